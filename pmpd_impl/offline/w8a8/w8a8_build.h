/* Offline W8A8 (weights/w8a8/w8a8.h): the per-tensor activation ranges of
 * a float model, measured on calibration text it writes itself, and the
 * matrices quantized with them. */
#ifndef PMPD_OFFLINE_W8A8_BUILD_H
#define PMPD_OFFLINE_W8A8_BUILD_H

#include <stddef.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/format/container.h"
#include "pmpd_impl/offline/format/builder.h"
#include "pmpd_impl/offline/format/tensor_records.h"

#if PMPD_OFFLINE

/* Log-spaced histogram bins of |x|: 64 per octave from 2^-24 to 2^16. */
#define PMPD_W8A8_HIST_PER_OCTAVE 64
#define PMPD_W8A8_HIST_MIN_LOG2 (-24)
#define PMPD_W8A8_HIST_BINS (40 * PMPD_W8A8_HIST_PER_OCTAVE)

/* What one linear layer saw at its input. */
typedef struct pmpd_w8a8_range {
    pmpd_tensor_record head; /* name, the model tensor, cols */
    uint64_t values;         /* values seen (tokens x cols) */
    float absmax;
    float *channel_absmax;   /* [cols] */
    uint32_t *histogram;     /* [PMPD_W8A8_HIST_BINS] counts of |x| */
} pmpd_w8a8_range;

typedef struct pmpd_w8a8_ranges {
    uint32_t n, capacity;
    pmpd_w8a8_range *ranges;
    pmpd_status status;      /* first failure inside the collection */
} pmpd_w8a8_ranges;

/* Runs calibration text through float_model (its own greedy continuations
 * of sampled prompts: data-free, seed 004 calibrates on such text too) and
 * records every linear layer's input range.  Free with
 * pmpd_w8a8_ranges_free whatever it returns.  Errors: session and
 * sampling errors, PMPD_ERR_OUT_OF_MEMORY. */
PMPD_INTERNAL pmpd_status pmpd_w8a8_ranges_collect(const pmpd_model *float_model,
                                                   const pmpd_calibration_config *config, pmpd_w8a8_ranges *out);
PMPD_INTERNAL void pmpd_w8a8_ranges_free(pmpd_w8a8_ranges *ranges);

/* The range recorded for tensor name, or NULL. */
PMPD_INTERNAL const pmpd_w8a8_range *pmpd_w8a8_range_find(const pmpd_w8a8_ranges *ranges, const char *name);

/* The value below which a fraction q (0..1) of the recorded |x| lie (upper
 * edge of the histogram bin reaching q; absmax at q = 1). */
PMPD_INTERNAL float pmpd_w8a8_range_quantile(const pmpd_w8a8_range *range, double q);

/* Quantizes the row-major rows x cols float matrix w into out (exactly
 * pmpd_w8a8_compute_layout's total bytes for n_hot) with the given
 * activation scale: each row at absmax / 127, rounded to nearest; the
 * columns listed in hot (strictly increasing) also kept in float for the
 * shadow path.  Errors: PMPD_ERR_INVALID_ARGUMENT (shape, scale, hot
 * list, out_size). */
PMPD_INTERNAL pmpd_status pmpd_w8a8_encode(const float *w, size_t rows, size_t cols, float activation_scale,
                                           const uint32_t *hot, size_t n_hot, void *out, size_t out_size);

/* The activation scale and shadow channels chosen for one tensor. */
typedef struct pmpd_w8a8_choice {
    float activation_scale;
    uint32_t n_hot;
    uint32_t *hot;           /* [n_hot], malloc'ed (NULL when 0) */
} pmpd_w8a8_choice;

/* Seed 004's outlier test on one input range: a channel is hot when its
 * calibrated absmax exceeds `ratio` times the median channel's absmax (at
 * most 1/32 of the channels, at least 1, the largest first); with hot
 * channels the scale covers the largest absmax of the other channels,
 * without them the tensor's absmax.  (The median channel, not a percentile
 * of all values: in a narrow layer two outlier channels are already 3% of
 * the values and would move any high percentile.)  shadow = 0 never marks
 * a channel hot (every input at the absmax scale).  Errors:
 * PMPD_ERR_OUT_OF_MEMORY. */
PMPD_INTERNAL pmpd_status pmpd_w8a8_choose(const pmpd_w8a8_range *range, int shadow, double ratio,
                                           pmpd_w8a8_choice *out);

/* What the shadow path of choice saves on the rows x cols matrix w whose
 * input range is range: the expected squared output error of rounding
 * every input at the absmax scale s0 minus that at the shadow scale s1,
 * (s0^2 - s1^2) / 12 * sum of w^2, relative to the output's energy
 * estimated as sum over channels of absmax_c^2 / 3 * sum_r w[r][c]^2 (each
 * channel spread evenly over its range).  0 without hot channels.  The
 * ranking of tensors by it decides where the shadow path stays. */
PMPD_INTERNAL double pmpd_w8a8_shadow_importance(const pmpd_w8a8_range *range, const pmpd_w8a8_choice *choice,
                                                 const float *w, size_t rows, size_t cols);

/* Replaces every 2-D f32 matrix of b but the vocabulary ones (token
 * embedding, classifier: q8, as in the other quantized types) by W8A8 with
 * the choice pmpd_w8a8_choose makes from its recorded input range (ratio
 * PMPD_W8A8_OUTLIER_RATIO); with shadow_tensors > 0, only that many
 * tensors keep their hot channels, the ones of highest
 * pmpd_w8a8_shadow_importance (the others take the absmax scale).  Errors:
 * PMPD_ERR_INVALID_ARGUMENT (a matrix without a range),
 * PMPD_ERR_OUT_OF_MEMORY. */
#define PMPD_W8A8_OUTLIER_RATIO 16.0
PMPD_INTERNAL pmpd_status pmpd_w8a8_build_convert(pmpd_build_model *b, const pmpd_w8a8_ranges *ranges,
                                                  unsigned shadow_tensors, int shadow,
                                                  void (*progress)(void *context, uint64_t done, uint64_t total),
                                                  void *context);

#endif
#endif
