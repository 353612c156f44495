/* Input ranges of the linear layers of a float model (w8a8_build.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/model/session.h"
#include "pmpd_impl/offline/precision/calibration_session.h"
#include "pmpd_impl/offline/w8a8/w8a8_build.h"

/* The range of tensor w, made on first sight. */
static pmpd_w8a8_range *w8a8_range_of(pmpd_w8a8_ranges *all, const pmpd_tensor *w)
{
    int created;
    pmpd_w8a8_range *r = (pmpd_w8a8_range *)pmpd_tensor_record_of((void **)&all->ranges, &all->n, &all->capacity,
                                                                  sizeof *all->ranges, w, &created);
    if (r && created) {
        r->histogram = (uint32_t *)calloc(PMPD_W8A8_HIST_BINS, sizeof *r->histogram);
        r->channel_absmax = (float *)calloc((size_t)r->head.cols, sizeof *r->channel_absmax);
    }
    return r && r->histogram && r->channel_absmax ? r : NULL;
}

static size_t w8a8_bin(float magnitude)
{
    double position;
    if (!(magnitude > 0.0f))
        return 0;
    position = (log2((double)magnitude) - PMPD_W8A8_HIST_MIN_LOG2) * PMPD_W8A8_HIST_PER_OCTAVE;
    if (position < 0.0)
        return 0;
    return position >= PMPD_W8A8_HIST_BINS - 1 ? PMPD_W8A8_HIST_BINS - 1 : (size_t)position;
}

static void w8a8_observe(void *context, const pmpd_tensor *w, const float *x, size_t n_tokens)
{
    pmpd_w8a8_ranges *all = (pmpd_w8a8_ranges *)context;
    pmpd_w8a8_range *r;
    size_t i, n;
    if (all->status != PMPD_OK)
        return;
    r = w8a8_range_of(all, w);
    if (!r) {
        all->status = PMPD_ERR_OUT_OF_MEMORY;
        return;
    }
    n = n_tokens * (size_t)r->head.cols;
    for (i = 0; i < n; i++) {
        float m = fabsf(x[i]);
        size_t c = i % (size_t)r->head.cols;
        if (m > r->absmax)
            r->absmax = m;
        if (m > r->channel_absmax[c])
            r->channel_absmax[c] = m;
        r->histogram[w8a8_bin(m)]++;
    }
    r->values += n;
}

PMPD_INTERNAL pmpd_status pmpd_w8a8_ranges_collect(const pmpd_model *float_model,
                                                   const pmpd_calibration_config *config, pmpd_w8a8_ranges *out)
{
    pmpd_calibration_set set;
    pmpd_status st;
    memset(out, 0, sizeof *out);
    memset(&set, 0, sizeof set);
    st = pmpd_calibration_set_sample(float_model, config, PMPD_CALIBRATION_TRAIN, &set);
    if (st == PMPD_OK)
        st = pmpd_calibration_observe(float_model, &set, 1, w8a8_observe, out, &out->status);
    pmpd_calibration_set_free(&set);
    return st;
}

PMPD_INTERNAL void pmpd_w8a8_ranges_free(pmpd_w8a8_ranges *ranges)
{
    uint32_t i;
    for (i = 0; i < ranges->n; i++) {
        free(ranges->ranges[i].histogram);
        free(ranges->ranges[i].channel_absmax);
    }
    free(ranges->ranges);
    memset(ranges, 0, sizeof *ranges);
}

PMPD_INTERNAL const pmpd_w8a8_range *pmpd_w8a8_range_find(const pmpd_w8a8_ranges *ranges, const char *name)
{
    uint32_t i;
    for (i = 0; i < ranges->n; i++)
        if (strcmp(ranges->ranges[i].head.name, name) == 0)
            return &ranges->ranges[i];
    return NULL;
}

PMPD_INTERNAL float pmpd_w8a8_range_quantile(const pmpd_w8a8_range *range, double q)
{
    uint64_t want, seen = 0;
    size_t b;
    if (q >= 1.0 || range->values == 0)
        return range->absmax;
    want = (uint64_t)ceil(q * (double)range->values);
    for (b = 0; b < PMPD_W8A8_HIST_BINS; b++) {
        seen += range->histogram[b];
        if (seen >= want) {
            double edge = exp2((double)(b + 1) / PMPD_W8A8_HIST_PER_OCTAVE + PMPD_W8A8_HIST_MIN_LOG2);
            return edge < range->absmax ? (float)edge : range->absmax;
        }
    }
    return range->absmax;
}
