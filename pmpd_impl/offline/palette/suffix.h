/* The layers of a model from one layer on, run on given hidden states: a
 * group's noise changes nothing before its layer, so the sensitivity run
 * (sensitivity.c) keeps the clean residual stream entering every layer
 * and restarts each noisy evaluation there instead of at the embedding.
 *
 * Beside the forward pass, not in it: a suffix is a copy of the model's
 * struct whose layer array starts at `first` and whose token embedding is
 * an f32 table of the hidden states, one row per position, looked up by
 * tokens 0, 1, ..., length - 1.  The session runs it with the runtime's
 * own forward (the same kernels, row copy and thread split), so the
 * logits are bit for bit those of the whole model (tests/test_palette.c
 * compares them). */
#ifndef PMPD_OFFLINE_PALETTE_SUFFIX_H
#define PMPD_OFFLINE_PALETTE_SUFFIX_H

#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/model/model.h"
#include "pmpd_impl/offline/precision/calibration_session.h"

#if PMPD_OFFLINE

typedef struct pmpd_palette_suffix {
    pmpd_model view;   /* layers [first, first + count) of the model; the session points here */
    pmpd_tensor table; /* the view's embedding: [length][dim] f32, set by each run */
    pmpd_calibration_session cs;
    int32_t *positions; /* 0 .. length - 1: the table's rows */
    uint32_t first, length;
} pmpd_palette_suffix;

/* A session over layers [first, first + count) of model (its own struct,
 * which must outlive s) for sequences of length tokens on threads
 * threads.  PMPD_ERR_UNSUPPORTED when length exceeds the vocabulary (the
 * positions are token ids) or the session's prefill batch (the stream
 * after the last layer is read from the session's one batch); else
 * session errors or PMPD_ERR_OUT_OF_MEMORY.  Close s whatever it returns. */
PMPD_INTERNAL pmpd_status pmpd_palette_suffix_open(const pmpd_model *model, uint32_t first, uint32_t count,
                                                   uint32_t length, unsigned threads, pmpd_palette_suffix *s);

/* Runs one sequence from position 0 whose residual stream entering layer
 * first is hidden ([length][dim]).  With logits ([length][vocab]): every
 * position's logits; else, out ([length][dim]) gets the stream leaving
 * the last layer of the view. */
PMPD_INTERNAL pmpd_status pmpd_palette_suffix_run(pmpd_palette_suffix *s, const float *hidden, float *logits,
                                                  float *out);

PMPD_INTERNAL void pmpd_palette_suffix_close(pmpd_palette_suffix *s);

#endif
#endif
