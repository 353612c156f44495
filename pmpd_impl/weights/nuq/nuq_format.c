/* The table row of NUQ weights: the input rotated once, x' = H (x o s),
 * and quantized to int8 per block of 32, split over the pool by tokens
 * (prefill), then the rows split over the
 * pool in blocks of 4 (model/linear.c runs the two steps, once for q, k
 * and v together: matrices with one input width and one sign seed share
 * the rotation).  Prefill loops the GEMV's weights over tiles of tokens;
 * there is no separate GEMM kernel. */
#include <string.h>

#include "pmpd_impl/weights/format.h"
#include "pmpd_impl/weights/nuq/nuq.h"

/* The rotated input of w's products. */
static pmpd_rotated pmpd_nuq_rotated_of(const pmpd_tensor *w)
{
    pmpd_nuq_matrix m;
    pmpd_nuq_bind(w->data, w->dims[0], w->dims[1], &m);
    return pmpd_nuq_rotated(&m);
}

static void pmpd_nuq_prepare(const pmpd_tensor *w, const float *x, size_t n_tokens, void *scratch, size_t begin,
                             size_t end, unsigned worker)
{
    const pmpd_rotated rotated = pmpd_nuq_rotated_of(w);
    pmpd_rotated_prepare_scratch(&rotated, x, n_tokens, scratch, begin, end, worker);
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
    return pmpd_rotated_shares(a, b, pmpd_nuq_rotated_of);
}

static pmpd_status pmpd_nuq_scratch(const pmpd_tensor *w, size_t n_tokens, unsigned n_threads, size_t *bytes)
{
    /* The tensor's stored rotation size sets the prepared input's. */
    return pmpd_rotated_scratch_bytes(pmpd_nuq_rotated_of(w).padded, n_tokens, n_threads, bytes);
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
    pmpd_status status = pmpd_rotated_check_matrix(n_dims, offset, "nuq", name, name_length, err);
    if (status != PMPD_OK)
        return status;
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
