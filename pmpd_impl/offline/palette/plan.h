/* The bit allocation end to end, as pmpd_convert_file runs it with
 * options->budget_bits: the fusable groups (groups.h), what each format of
 * the palette costs them in bytes and in error (distortion.h), how much
 * each group's error costs the model (sensitivity.h), and the choice that
 * minimizes the predicted loss within the budget (knapsack.h).  The
 * result says, for every tensor of the model, the type to store it as. */
#ifndef PMPD_OFFLINE_PALETTE_PLAN_H
#define PMPD_OFFLINE_PALETTE_PLAN_H

#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/offline/format/builder.h"
#include "pmpd_impl/offline/ldlq/hessian.h"
#include "pmpd_impl/offline/palette/sensitivity.h"

#if PMPD_OFFLINE

typedef struct pmpd_palette_plan {
    uint32_t n_tensors;
    uint32_t *formats; /* [n_tensors]: the palette index of a group's matrix, else UINT32_MAX */
    pmpd_palette_report report; /* points into the arrays below */
    pmpd_palette_group_report *groups;
    pmpd_tensor_type palette[PMPD_PALETTE_MAX_FORMATS];
    unsigned palette_bits[PMPD_PALETTE_MAX_FORMATS];
    /* The caller's options with each palette entry's nuq, vq or tcq width: what the
     * encoders of that entry are called with. */
    pmpd_convert_options format_options[PMPD_PALETTE_MAX_FORMATS];
    const pmpd_convert_options *options; /* the caller's */
    double *errors;
    uint64_t *costs;
    uint64_t *latencies; /* under a latency budget, else NULL */
} pmpd_palette_plan;

/* Plans b (every tensor f32 and loaded) under options' budget_bits (or
 * budget_latency_us: the knapsack's costs are then measured times,
 * latency.h) and
 * palette (options must outlive the plan); sensitivity may be NULL for pmpd_palette_sensitivity_defaults
 * (threads and progress then come from options); hessians (may be NULL:
 * data-free) are the inputs' moments with the factors of the palette's
 * rotated formats, every candidate then measured as
 * pmpd_palette_group_error says (the converter refuses
 * options->palette_gaussian with them: its estimates are data-free).  Free the plan with
 * pmpd_palette_plan_free whatever this returns.  Errors: PMPD_ERR_BUDGET
 * (err gives the least bits per weight any assignment needs),
 * PMPD_ERR_INVALID_ARGUMENT (a format that cannot be in a palette, a
 * repeated one, a budget that is not positive), and those of the steps. */
PMPD_INTERNAL pmpd_status pmpd_palette_plan_make(const pmpd_build_model *b, const pmpd_convert_options *options,
                                                 const pmpd_palette_sensitivity_options *sensitivity,
                                                 const pmpd_hessian_set *hessians, pmpd_palette_plan *plan,
                                                 pmpd_error *err);

/* The type a streaming conversion stores tensor t of b as under the plan:
 * its group's format; q8 for the token embedding, the classifier and any
 * matrix outside the groups; f32 for vectors. */
PMPD_INTERNAL uint32_t pmpd_palette_plan_type(const pmpd_palette_plan *plan, const pmpd_build_model *b,
                                              const pmpd_build_tensor *t);

/* The options tensor t is encoded with: its palette entry's (nuq, vq or tcq width),
 * else the caller's. */
PMPD_INTERNAL const pmpd_convert_options *pmpd_palette_plan_options(const pmpd_palette_plan *plan,
                                                                    const pmpd_build_model *b,
                                                                    const pmpd_build_tensor *t);

PMPD_INTERNAL void pmpd_palette_plan_free(pmpd_palette_plan *plan);

#endif
#endif
