/* The table row of NUQ weights: the input rotated once, x' = H (x o s),
 * and quantized to int8 per block of 32, split over the pool by tokens
 * (prefill), then the rows split over the
 * pool in blocks of 4 (model/linear.c runs the two steps, once for q, k
 * and v together: matrices with one input width and one sign seed share
 * the rotation).  Prefill loops the GEMV's weights over tiles of tokens;
 * there is no separate GEMM kernel. */
#include <string.h>

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/weights/format.h"
#include "pmpd_impl/weights/nuq/nuq.h"

static void pmpd_nuq_prepare(const pmpd_tensor *w, const float *x, size_t n_tokens, void *scratch, size_t begin,
                             size_t end, unsigned worker)
{
    pmpd_nuq_matrix m;
    float *work;
    pmpd_nuq_bind(w->data, w->dims[0], w->dims[1], &m);
    /* Per thread one rotated token, after the prepared input, 4-byte
     * aligned (nuq.h). */
    work = (float *)(void *)((unsigned char *)scratch + pmpd_nuq_act_bytes(&m, n_tokens));
    pmpd_nuq_prepare_tokens(&m, x, begin, end, n_tokens, scratch, work + (size_t)worker * m.padded);
}

static void pmpd_nuq_rows(const pmpd_tensor *w, const void *scratch, const float *x, size_t n_tokens, float *y,
                          size_t begin, size_t end, unsigned bits)
{
    pmpd_nuq_matrix m;
    (void)x;
    (void)bits;
    pmpd_nuq_bind(w->data, w->dims[0], w->dims[1], &m);
    pmpd_nuq_matmul(&m, scratch, n_tokens, begin, end, y, m.rows);
}

/* The rotated input depends only on the input width and the signs. */
static int pmpd_nuq_shares(const pmpd_tensor *a, const pmpd_tensor *b)
{
    pmpd_nuq_matrix ma, mb;
    pmpd_nuq_bind(a->data, a->dims[0], a->dims[1], &ma);
    pmpd_nuq_bind(b->data, b->dims[0], b->dims[1], &mb);
    return ma.cols == mb.cols && ma.seed == mb.seed;
}

PMPD_INTERNAL pmpd_status pmpd_nuq_input_scratch(size_t padded, size_t n_tokens, unsigned n_threads, size_t *bytes)
{
    size_t act, work;
    /* Per token the int8 steps and a float per block, then per thread one
     * rotated token in floats (nuq.h). */
    if (!pmpd_checked_mul(n_tokens, padded + padded / PMPD_NUQ_BLOCK * sizeof(float), &act) ||
        !pmpd_checked_mul3(n_threads ? n_threads : 1, padded, sizeof(float), &work) ||
        !pmpd_checked_add(act, work, bytes))
        return PMPD_ERR_OVERFLOW;
    return PMPD_OK;
}

static pmpd_status pmpd_nuq_scratch(const pmpd_tensor *w, size_t n_tokens, unsigned n_threads, size_t *bytes)
{
    pmpd_nuq_layout layout;
    /* The width does not change the prepared input's size. */
    if (pmpd_nuq_compute_layout(w->dims[0], w->dims[1], PMPD_NUQ_MAX_BITS, &layout) != PMPD_OK)
        return PMPD_ERR_OVERFLOW;
    return pmpd_nuq_input_scratch(layout.padded, n_tokens, n_threads, bytes);
}

static void pmpd_nuq_format_row(const pmpd_tensor *w, size_t r, float *out)
{
    pmpd_nuq_matrix m;
    pmpd_nuq_bind(w->data, w->dims[0], w->dims[1], &m);
    pmpd_nuq_row(&m, r, out);
}

static pmpd_status pmpd_nuq_check(const unsigned char *data, uint64_t size, uint32_t n_dims, const uint64_t *dims,
                                  uint64_t offset, const char *name, uint32_t name_length, pmpd_error *err)
{
    pmpd_nuq_matrix m;
    if (n_dims != 2)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, offset, "nuq tensor %.*s is not a matrix",
                              (int)name_length, name);
    return pmpd_nuq_view(data, size, dims[0], dims[1], offset, &m, err);
}

static const pmpd_weight_format pmpd_nuq_format = {
    PMPD_TENSOR_NUQ,  "nuq",         NULL,           pmpd_nuq_check, pmpd_nuq_scratch, NULL, pmpd_nuq_format_row,
    NULL,             pmpd_nuq_prepare, pmpd_nuq_rows, pmpd_nuq_shares,
};

PMPD_INTERNAL const pmpd_weight_format *pmpd_weights_nuq(void)
{
    return &pmpd_nuq_format;
}
