/* Sensitivity of each fusable group, after seed 002's linearity theorem:
 * for small errors the next-token KL a model loses grows linearly in the
 * relative error energy e of one group's weights, KL ~ a_g * e, so the
 * loss of a whole assignment is about sum_g a_g * err_g.
 *
 * a_g is measured, not modelled: Gaussian noise of relative energy e (std
 * sqrt(e) times the RMS of each matrix's weights) is added to the group's
 * matrices of the float model, which runs on data-free text (sequences it
 * writes itself: BOS, a few tokens sampled at temperature 1, then its own
 * greedy continuation; pmpd_calibration_set_sample); the mean KL(clean ||
 * noisy) of the next-token distributions over every position is fitted
 * by least squares through the origin over a few values of e.  One noise
 * direction per matrix, scaled for each e, so the fit sees the curvature
 * along one direction and not the spread between draws. */
#ifndef PMPD_OFFLINE_PALETTE_SENSITIVITY_H
#define PMPD_OFFLINE_PALETTE_SENSITIVITY_H

#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/offline/format/builder.h"
#include "pmpd_impl/offline/palette/groups.h"

#if PMPD_OFFLINE

#define PMPD_PALETTE_MAX_ENERGIES 4u

typedef struct pmpd_palette_sensitivity_options {
    uint32_t n_sequences;   /* data-free sequences */
    uint32_t length;        /* tokens each, BOS included (>= 3, at most seq_len) */
    uint32_t n_energies;    /* 1..PMPD_PALETTE_MAX_ENERGIES */
    double energies[PMPD_PALETTE_MAX_ENERGIES]; /* relative noise energies e, > 0 */
    uint64_t seed;          /* the sequences' and the noise's */
    unsigned threads;       /* the session's threads (0: 1) */
    /* 0: each noisy evaluation restarts at its group's layer from the
     * clean stream entering it (suffix.h; the same logits bit for bit);
     * 1: every evaluation runs the whole model (the reference the test
     * compares with). */
    int full_forward;
    /* After each noisy evaluation: done and total (groups x energies). */
    void (*progress)(void *context, uint64_t done, uint64_t total);
    void *progress_context;
} pmpd_palette_sensitivity_options;

typedef struct pmpd_palette_fit {
    double kl[PMPD_PALETTE_MAX_ENERGIES]; /* mean KL (nats) at each energy */
    double slope;  /* a_g: nats of KL per unit of relative error energy */
    double r2;     /* 1 - residual / sum KL^2 of the fit through the origin */
    double ratio;  /* (KL/e at the largest e) / (KL/e at the smallest): 1 when linear */
} pmpd_palette_fit;

/* 4 sequences of 32 tokens, e = 0.01, 0.03, 0.1, seed 2002, 1 thread. */
PMPD_INTERNAL void pmpd_palette_sensitivity_defaults(pmpd_palette_sensitivity_options *options);

/* Fits a_g for each of the n_groups groups of b (every matrix f32 and
 * loaded) into fits[n_groups].  b is not changed (the noise goes into a
 * serialized copy).  Errors: PMPD_ERR_INVALID_ARGUMENT (options), session
 * errors, PMPD_ERR_OUT_OF_MEMORY. */
PMPD_INTERNAL pmpd_status pmpd_palette_sensitivity(const pmpd_build_model *b, const pmpd_palette_group *groups,
                                                   uint32_t n_groups, const pmpd_palette_sensitivity_options *options,
                                                   pmpd_palette_fit *fits, pmpd_error *err);

/* Least squares through the origin of kl[i] ~ slope * e[i], i < n, with
 * its r2 and ratio as in pmpd_palette_fit (kl filled by the caller). */
PMPD_INTERNAL void pmpd_palette_fit_line(const double *e, uint32_t n, pmpd_palette_fit *fit);

#endif
#endif
