/* W8A8 matrices from floats (w8a8_build.h, layout in weights/w8a8/w8a8.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/offline/quant/build.h"
#include "pmpd_impl/offline/w8a8/w8a8_build.h"
#include "pmpd_impl/weights/w8a8/w8a8.h"

static void w8a8_put_u32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

PMPD_INTERNAL pmpd_status pmpd_w8a8_encode(const float *w, size_t rows, size_t cols, float activation_scale,
                                           const uint32_t *hot, size_t n_hot, void *out, size_t out_size)
{
    unsigned char *p = (unsigned char *)out;
    pmpd_w8a8_layout layout;
    size_t r, c, h;
    if (!w || !out || !(activation_scale > 0.0f) || !isfinite(activation_scale) || (n_hot && !hot) ||
        pmpd_w8a8_compute_layout(rows, cols, n_hot, &layout) != PMPD_OK || out_size != layout.total)
        return PMPD_ERR_INVALID_ARGUMENT;
    for (h = 0; h < n_hot; h++)
        if (hot[h] >= cols || (h > 0 && hot[h] <= hot[h - 1]))
            return PMPD_ERR_INVALID_ARGUMENT;
    memset(p, 0, out_size);
    memcpy(p, "W8A8", 4);
    w8a8_put_u32(p + 4, PMPD_W8A8_VERSION);
    w8a8_put_u32(p + 8, (uint32_t)rows);
    w8a8_put_u32(p + 12, (uint32_t)cols);
    w8a8_put_u32(p + 16, (uint32_t)layout.padded_cols);
    memcpy(p + 20, &activation_scale, sizeof activation_scale);
    w8a8_put_u32(p + 24, (uint32_t)n_hot);
    for (h = 0; h < n_hot; h++) {
        w8a8_put_u32(p + layout.hot_offset + 4 * h, hot[h]);
        for (r = 0; r < rows; r++)
            memcpy(p + layout.hot_weight_offset + 4 * (h * rows + r), &w[r * cols + hot[h]], sizeof(float));
    }
    for (r = 0; r < rows; r++) {
        const float *row = w + r * cols;
        int8_t *q = (int8_t *)(void *)(p + layout.weight_offset + r * layout.padded_cols);
        float absmax = 0.0f, scale, inverse;
        for (c = 0; c < cols; c++)
            absmax = fabsf(row[c]) > absmax ? fabsf(row[c]) : absmax;
        scale = absmax / 127.0f;
        inverse = scale > 0.0f ? 1.0f / scale : 0.0f;
        memcpy(p + layout.scale_offset + 4 * r, &scale, sizeof scale);
        for (c = 0; c < cols; c++) {
            long v = lrintf(row[c] * inverse);
            q[c] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
    }
    return PMPD_OK;
}

/* qsort has no context argument: the channel absmax array it orders by
 * (offline, one conversion at a time). */
static const float *w8a8_sort_absmax;
static int w8a8_compare_channels(const void *a, const void *b)
{
    float x = w8a8_sort_absmax[*(const uint32_t *)a], y = w8a8_sort_absmax[*(const uint32_t *)b];
    return x < y ? 1 : x > y ? -1 : 0;
}

static int w8a8_compare_index(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

PMPD_INTERNAL pmpd_status pmpd_w8a8_choose(const pmpd_w8a8_range *range, int shadow, double ratio,
                                           pmpd_w8a8_choice *out)
{
    uint32_t *order, n_hot = 0, cols = (uint32_t)range->head.cols, c, limit = cols / 32 > 0 ? cols / 32 : 1;
    double threshold;
    float rest;
    memset(out, 0, sizeof *out);
    out->activation_scale = range->absmax > 0.0f ? range->absmax / 127.0f : 1.0f;
    if (!shadow)
        return PMPD_OK;
    order = (uint32_t *)malloc(cols * sizeof *order);
    if (!order)
        return PMPD_ERR_OUT_OF_MEMORY;
    for (c = 0; c < cols; c++)
        order[c] = c;
    w8a8_sort_absmax = range->channel_absmax;
    qsort(order, cols, sizeof *order, w8a8_compare_channels);
    /* The typical channel's range: the median of the channels' absmax. */
    threshold = ratio * (double)range->channel_absmax[order[cols / 2]];
    while (n_hot < limit && n_hot < cols && (double)range->channel_absmax[order[n_hot]] > threshold)
        n_hot++;
    if (n_hot == 0 || n_hot == cols) {
        free(order);
        return PMPD_OK;
    }
    rest = range->channel_absmax[order[n_hot]];
    qsort(order, n_hot, sizeof *order, w8a8_compare_index);
    out->hot = order;
    out->n_hot = n_hot;
    if (rest > 0.0f)
        out->activation_scale = rest / 127.0f;
    return PMPD_OK;
}

static int w8a8_is_vocabulary(const pmpd_build_tensor *t)
{
    return strcmp(t->name, "token_embd.weight") == 0 || strcmp(t->name, "output.weight") == 0;
}

PMPD_INTERNAL double pmpd_w8a8_shadow_importance(const pmpd_w8a8_range *range, const pmpd_w8a8_choice *choice,
                                                 const float *w, size_t rows, size_t cols)
{
    double s0 = range->absmax / 127.0, s1 = choice->activation_scale, weights = 0.0, energy = 0.0;
    size_t r, c;
    if (choice->n_hot == 0)
        return 0.0;
    for (c = 0; c < cols; c++) {
        double column = 0.0, a = range->channel_absmax[c];
        for (r = 0; r < rows; r++)
            column += (double)w[r * cols + c] * w[r * cols + c];
        weights += column;
        energy += a * a / 3.0 * column;
    }
    return energy > 0.0 ? (s0 * s0 - s1 * s1) / 12.0 * weights / energy : 0.0;
}

/* The matrices W8A8 replaces. */
static int w8a8_converts(const pmpd_build_tensor *t)
{
    return t->n_dims == 2 && t->type == PMPD_TENSOR_F32 && !w8a8_is_vocabulary(t);
}

/* Sorts tensor indices by decreasing importance (qsort has no context:
 * offline, one conversion at a time). */
static const double *w8a8_sort_importance;
static int w8a8_compare_importance(const void *a, const void *b)
{
    double x = w8a8_sort_importance[*(const uint32_t *)a], y = w8a8_sort_importance[*(const uint32_t *)b];
    return x < y ? 1 : x > y ? -1 : 0;
}

/* keep[i] = whether tensor i keeps its shadow path: every tensor, or the
 * shadow_tensors most important ones. */
static pmpd_status w8a8_rank_shadows(const pmpd_build_model *b, const pmpd_w8a8_ranges *ranges,
                                     unsigned shadow_tensors, unsigned char *keep)
{
    double *importance = (double *)calloc(b->n_tensors ? b->n_tensors : 1, sizeof *importance);
    uint32_t *order = (uint32_t *)malloc((b->n_tensors ? b->n_tensors : 1) * sizeof *order), i;
    pmpd_status st = importance && order ? PMPD_OK : PMPD_ERR_OUT_OF_MEMORY;
    for (i = 0; st == PMPD_OK && i < b->n_tensors; i++) {
        const pmpd_build_tensor *t = &b->tensors[i];
        const pmpd_w8a8_range *range = w8a8_converts(t) ? pmpd_w8a8_range_find(ranges, t->name) : NULL;
        pmpd_w8a8_choice choice;
        order[i] = i;
        keep[i] = 1;
        if (!range || range->head.cols != t->dims[1])
            continue; /* not converted, or refused by the caller */
        st = pmpd_w8a8_choose(range, 1, PMPD_W8A8_OUTLIER_RATIO, &choice);
        if (st == PMPD_OK)
            importance[i] = pmpd_w8a8_shadow_importance(range, &choice, (const float *)(const void *)t->data,
                                                        (size_t)t->dims[0], (size_t)t->dims[1]);
        free(choice.hot);
    }
    if (st == PMPD_OK && shadow_tensors > 0) {
        w8a8_sort_importance = importance;
        qsort(order, b->n_tensors, sizeof *order, w8a8_compare_importance);
        for (i = shadow_tensors; i < b->n_tensors; i++)
            keep[order[i]] = 0;
    }
    free(importance);
    free(order);
    return st;
}

PMPD_INTERNAL pmpd_status pmpd_w8a8_build_convert(pmpd_build_model *b, const pmpd_w8a8_ranges *ranges,
                                                  unsigned shadow_tensors, int shadow,
                                                  void (*progress)(void *context, uint64_t done, uint64_t total),
                                                  void *context)
{
    uint64_t total = 0, done = 0;
    uint32_t i;
    unsigned char *keep = (unsigned char *)malloc(b->n_tensors ? b->n_tensors : 1);
    pmpd_status st = keep ? PMPD_OK : PMPD_ERR_OUT_OF_MEMORY;
    if (st == PMPD_OK && shadow)
        st = w8a8_rank_shadows(b, ranges, shadow_tensors, keep);
    for (i = 0; i < b->n_tensors; i++)
        total += w8a8_converts(&b->tensors[i]);
    for (i = 0; st == PMPD_OK && i < b->n_tensors; i++) {
        pmpd_build_tensor *t = &b->tensors[i];
        const pmpd_w8a8_range *range;
        pmpd_w8a8_choice choice;
        pmpd_w8a8_layout layout;
        unsigned char *out;
        if (!w8a8_converts(t))
            continue;
        range = pmpd_w8a8_range_find(ranges, t->name);
        if (!range || range->head.cols != t->dims[1]) {
            st = PMPD_ERR_INVALID_ARGUMENT;
            break;
        }
        st = pmpd_w8a8_choose(range, shadow && keep[i], PMPD_W8A8_OUTLIER_RATIO, &choice);
        if (st != PMPD_OK)
            break;
        out = NULL;
        st = pmpd_w8a8_compute_layout(t->dims[0], t->dims[1], choice.n_hot, &layout) != PMPD_OK ? PMPD_ERR_OVERFLOW
             : !(out = (unsigned char *)malloc(layout.total))                                   ? PMPD_ERR_OUT_OF_MEMORY
             : pmpd_w8a8_encode((const float *)(const void *)t->data, (size_t)t->dims[0], (size_t)t->dims[1],
                                choice.activation_scale, choice.hot, choice.n_hot, out, layout.total);
        free(choice.hot);
        if (st != PMPD_OK) {
            free(out);
            break;
        }
        pmpd_build_replace_data(t, PMPD_TENSOR_W8A8, out, layout.total);
        if (progress)
            progress(context, ++done, total);
    }
    free(keep);
    if (st != PMPD_OK)
        return st;
    /* The vocabulary matrices go to q8. */
    return pmpd_quant_build_convert(b, PMPD_TENSOR_Q8, 1, NULL, NULL);
}
