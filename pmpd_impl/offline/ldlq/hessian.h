/* The second moment of every linear layer's input, H = E[x x^T] over
 * calibration text run through the float model: what LDLQ (ldlq.h)
 * weighs rounding errors by, and what the bit allocation measures a
 * format's output error with (palette/distortion.h).
 *
 * The text is the user's (windows of a calibration file) or, without
 * one, data-free as the sensitivity's (palette/sensitivity.h): sequences
 * the model writes itself from BOS, sampled at temperature 1 throughout
 * (greedy continuations repeat themselves and excite few directions).  Matrices reading one input
 * (q, k, v; gate, up) share one moment.  Memory: cols^2 doubles per
 * distinct input (pycode21M: 24 inputs, 12 MB; a 2048 x 5632 model's
 * layer: about 0.3 GB). */
#ifndef PMPD_OFFLINE_LDLQ_HESSIAN_H
#define PMPD_OFFLINE_LDLQ_HESSIAN_H

#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/offline/format/builder.h"
#include "pmpd_impl/offline/format/tensor_records.h"
#include "pmpd_impl/offline/ldlq/ldlq.h"

#if PMPD_OFFLINE

typedef struct pmpd_hessian {
    pmpd_tensor_record head; /* name, the model tensor, cols */
    uint32_t owner;          /* the record holding the moment: itself, or the first matrix of its input */
    uint64_t tokens;         /* inputs summed */
    uint64_t checksum;       /* of the last input seen (who shares it) */
    double *moment;          /* [cols][cols] (owners only): the sum, then the mean */
    /* LDLQ's factors in the rotated formats' domain, per block size
     * (pmpd_hessian_factors; owners only). */
    pmpd_ldlq factors[3];
} pmpd_hessian;

typedef struct pmpd_hessian_set {
    uint32_t n, capacity;
    pmpd_hessian *records;
    pmpd_status status; /* first failure inside the collection */
    uint32_t last;      /* the record observed last (UINT32_MAX: none) */
    double *columns;    /* the observed input transposed (scratch) */
    size_t column_capacity;
} pmpd_hessian_set;

/* Collects the moments of every f32 matrix of b's layers (all f32 and
 * loaded) over n_sequences sequences of length tokens (BOS included,
 * >= 2, at most seq_len), on threads threads: with text (text_length
 * bytes, tokenized by b's tokenizer) BOS and then consecutive runs of
 * length - 1 of its tokens, from its start; with text NULL sequences
 * sampled from seed.  Free set with pmpd_hessian_free whatever this
 * returns.  Errors: PMPD_ERR_INVALID_ARGUMENT (a text too short, saying
 * how many tokens it gives), tokenizer and session errors,
 * PMPD_ERR_OUT_OF_MEMORY, each named in err. */
PMPD_INTERNAL pmpd_status pmpd_hessian_collect(const pmpd_build_model *b, uint32_t n_sequences, uint32_t length,
                                               const char *text, size_t text_length, uint64_t seed,
                                               unsigned threads, pmpd_hessian_set *set, pmpd_error *err);

/* The same over given text (every prompt and its reference continuation,
 * as pmpd_calibration_observe runs them) through model.  Free set with
 * pmpd_hessian_free whatever this returns.  Errors: session errors,
 * PMPD_ERR_OUT_OF_MEMORY. */
PMPD_INTERNAL pmpd_status pmpd_hessian_collect_set(const pmpd_model *model, const pmpd_calibration_set *text,
                                                   unsigned threads, pmpd_hessian_set *set);

/* The mean moment ([cols][cols]) of the input of the matrix named name
 * with cols columns, or NULL when none was collected. */
PMPD_INTERNAL const double *pmpd_hessian_find(const pmpd_hessian_set *set, const char *name, uint64_t cols);

/* Factors every moment for blocks of block columns (1, 2 or 256 and at
 * most three distinct sizes over the set's life) in the domain of the
 * rotated formats (core/hadamard.h: pmpd_hadamard_size(cols), the sign
 * seed seed).  Errors: PMPD_ERR_OUT_OF_MEMORY, PMPD_ERR_INVALID_ARGUMENT
 * (a moment LDLQ cannot factor, named in err). */
PMPD_INTERNAL pmpd_status pmpd_hessian_factors(pmpd_hessian_set *set, size_t block, uint64_t seed, pmpd_error *err);

/* The factor for blocks of block columns of the input of the matrix named
 * name with cols columns, or NULL. */
PMPD_INTERNAL const pmpd_ldlq *pmpd_hessian_factor(const pmpd_hessian_set *set, const char *name, uint64_t cols,
                                                   size_t block);

PMPD_INTERNAL void pmpd_hessian_free(pmpd_hessian_set *set);

#endif
#endif
