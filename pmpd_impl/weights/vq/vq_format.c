/* The table row of VQ weights: the rotated formats' two steps
 * (weights/rotated/rotated.h), the input rotated and quantized once per
 * shared input (reordered for pairs, vq.h), then the rows split over the
 * pool.  Prefill loops the GEMV's weights over tiles of tokens; there is
 * no separate GEMM kernel. */
#include "pmpd_impl/weights/format.h"
#include "pmpd_impl/weights/vq/vq.h"

/* The rotated input of w's products. */
static pmpd_rotated pmpd_vq_rotated_of(const pmpd_tensor *w)
{
    pmpd_vq_matrix m;
    pmpd_vq_bind(w->data, w->dims[0], w->dims[1], &m);
    return pmpd_vq_rotated(&m);
}

static void pmpd_vq_prepare(const pmpd_tensor *w, const float *x, size_t n_tokens, void *scratch, size_t begin,
                            size_t end, unsigned worker)
{
    const pmpd_rotated rotated = pmpd_vq_rotated_of(w);
    pmpd_rotated_prepare_scratch(&rotated, x, n_tokens, scratch, begin, end, worker);
    pmpd_vq_pair_order(&rotated, scratch, begin, end);
}

static void pmpd_vq_rows(const pmpd_tensor *w, const void *scratch, const float *x, size_t n_tokens, float *y,
                         size_t begin, size_t end, unsigned bits)
{
    pmpd_vq_matrix m;
    (void)x;
    (void)bits;
    pmpd_vq_bind(w->data, w->dims[0], w->dims[1], &m);
    pmpd_vq_matmul(&m, scratch, n_tokens, begin, end, y, m.rows);
}

/* The prepared input depends only on the input width and the signs. */
static int pmpd_vq_shares(const pmpd_tensor *a, const pmpd_tensor *b)
{
    return pmpd_rotated_shares(a, b, pmpd_vq_rotated_of);
}

static pmpd_status pmpd_vq_scratch(const pmpd_tensor *w, size_t n_tokens, unsigned n_threads, size_t *bytes)
{
    /* The tensor's stored rotation size sets the prepared input's. */
    return pmpd_rotated_scratch_bytes(pmpd_vq_rotated_of(w).padded, n_tokens, n_threads, bytes);
}

static void pmpd_vq_format_row(const pmpd_tensor *w, size_t r, float *out)
{
    pmpd_vq_matrix m;
    pmpd_vq_bind(w->data, w->dims[0], w->dims[1], &m);
    pmpd_vq_row(&m, r, out);
}

static pmpd_status pmpd_vq_check(const unsigned char *data, uint64_t size, uint32_t n_dims, const uint64_t *dims,
                                 uint64_t offset, const char *name, uint32_t name_length, pmpd_error *err)
{
    pmpd_vq_matrix m;
    pmpd_status status = pmpd_rotated_check_matrix(n_dims, offset, "vq", name, name_length, err);
    if (status != PMPD_OK)
        return status;
    return pmpd_vq_view(data, size, dims[0], dims[1], offset, &m, err);
}

static const pmpd_weight_format pmpd_vq_format = {
    PMPD_TENSOR_VQ2, "vq",         NULL,          pmpd_vq_check, pmpd_vq_scratch, NULL, pmpd_vq_format_row,
    NULL,            pmpd_vq_prepare, pmpd_vq_rows, pmpd_vq_shares,
};

PMPD_INTERNAL const pmpd_weight_format *pmpd_weights_vq2(void)
{
    return &pmpd_vq_format;
}
