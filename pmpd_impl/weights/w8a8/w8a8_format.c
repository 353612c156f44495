/* The table row of W8A8 weights: activations quantized once with the
 * tensor's static scale (split over threads by tokens for prefill), then the rows
 * split over the pool in blocks of 4 (model/linear.c runs the two steps,
 * once for q, k and v together). */
#include <string.h>

#include "platform/platform.h"
#include "pmpd_impl/weights/format.h"
#include "pmpd_impl/weights/w8a8/w8a8.h"

static void pmpd_w8a8_prepare(const pmpd_tensor *w, const float *x, size_t n_tokens, void *scratch, size_t begin,
                              size_t end, unsigned worker)
{
    pmpd_w8a8_matrix m;
    (void)n_tokens;
    (void)worker;
    pmpd_w8a8_bind(w->data, w->dims[0], w->dims[1], &m);
    pmpd_w8a8_act_quantize(&m, x, begin, end, scratch);
}

static void pmpd_w8a8_rows(const pmpd_tensor *w, const void *scratch, const float *x, size_t n_tokens, float *y,
                           size_t begin, size_t end, unsigned bits)
{
    pmpd_w8a8_matrix m;
    (void)bits;
    pmpd_w8a8_bind(w->data, w->dims[0], w->dims[1], &m);
    PMPD_W8A8_DELEGATE(&m, scratch, n_tokens, begin, end, y, m.rows);
    if (m.n_hot)
        pmpd_w8a8_shadow(&m, x, n_tokens, begin, end, y, m.rows);
}

/* Matrices calibrated on one input (q, k, v) get the same activation
 * scale: then the quantized activations are the same too. */
static int pmpd_w8a8_shares(const pmpd_tensor *a, const pmpd_tensor *b)
{
    pmpd_w8a8_matrix ma, mb;
    pmpd_w8a8_bind(a->data, a->dims[0], a->dims[1], &ma);
    pmpd_w8a8_bind(b->data, b->dims[0], b->dims[1], &mb);
    return ma.cols == mb.cols && ma.activation_scale == mb.activation_scale;
}

static pmpd_status pmpd_w8a8_scratch(const pmpd_tensor *w, size_t n_tokens, unsigned n_threads, size_t *bytes)
{
    pmpd_w8a8_layout layout;
    (void)n_threads;
    if (pmpd_w8a8_compute_layout(w->dims[0], w->dims[1], 0, &layout) != PMPD_OK)
        return PMPD_ERR_OVERFLOW;
    return pmpd_w8a8_act_size(n_tokens, layout.padded_cols, bytes);
}

/* The integer weights dequantized: what a product with inputs inside the
 * activation range computes (the shadow path adds only what clipping
 * removed). */
static void pmpd_w8a8_row(const pmpd_tensor *w, size_t r, float *out)
{
    pmpd_w8a8_matrix m;
    size_t c;
    pmpd_w8a8_bind(w->data, w->dims[0], w->dims[1], &m);
    for (c = 0; c < m.cols; c++)
        out[c] = m.row_scale[r] * (float)m.weights[r * m.padded_cols + c];
}

static pmpd_status pmpd_w8a8_check(const unsigned char *data, uint64_t size, uint32_t n_dims, const uint64_t *dims,
                                   uint64_t offset, const char *name, uint32_t name_length, pmpd_error *err)
{
    pmpd_w8a8_matrix m;
    if (n_dims != 2)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, offset, "w8a8 tensor %.*s is not a matrix",
                              (int)name_length, name);
    /* Refuse here, with a reason, rather than fault in the first product. */
    if (pmpd_platform_request_amx() != PMPD_OK)
        return pmpd_error_set(err, PMPD_ERR_UNSUPPORTED, offset,
                              "w8a8 tensor %.*s: this build multiplies with AMX tiles and the OS did not grant "
                              "their state (Linux 5.16 or later; or rebuild with -DPMPD_USE_AMX=0)",
                              (int)name_length, name);
    return pmpd_w8a8_view(data, size, dims[0], dims[1], offset, &m, err);
}

static const pmpd_weight_format pmpd_w8a8_format = {
    PMPD_TENSOR_W8A8,  "w8a8",         NULL,           pmpd_w8a8_check, pmpd_w8a8_scratch, NULL, pmpd_w8a8_row, NULL,
    pmpd_w8a8_prepare, pmpd_w8a8_rows, pmpd_w8a8_shares,
};

PMPD_INTERNAL const pmpd_weight_format *pmpd_weights_w8a8(void)
{
    return &pmpd_w8a8_format;
}
