/* The table row of TCQ weights: the rotated input prepared as NUQ's
 * (weights/rotated/rotated.h: int8 per block of 32), split over the pool
 * by tokens, then the rows split over the pool in blocks of 4
 * (model/linear.c runs the two steps, once for q, k and v together:
 * matrices with one input width and one sign seed share the rotation). */
#include "pmpd_impl/weights/format.h"
#include "pmpd_impl/weights/tcq/tcq.h"

/* The rotated input of w's products. */
static pmpd_rotated pmpd_tcq_rotated_of(const pmpd_tensor *w)
{
    pmpd_tcq_matrix m;
    pmpd_tcq_bind(w->data, w->dims[0], w->dims[1], &m);
    return pmpd_tcq_rotated(&m);
}

static void pmpd_tcq_prepare(const pmpd_tensor *w, const float *x, size_t n_tokens, void *scratch, size_t begin,
                             size_t end, unsigned worker)
{
    const pmpd_rotated rotated = pmpd_tcq_rotated_of(w);
    pmpd_rotated_prepare_scratch(&rotated, x, n_tokens, scratch, begin, end, worker);
}

static void pmpd_tcq_rows(const pmpd_tensor *w, const void *scratch, const float *x, size_t n_tokens, float *y,
                          size_t begin, size_t end, unsigned bits)
{
    pmpd_tcq_matrix m;
    (void)x;
    (void)bits;
    pmpd_tcq_bind(w->data, w->dims[0], w->dims[1], &m);
    pmpd_tcq_matmul(&m, scratch, n_tokens, begin, end, y, m.rows);
}

/* The rotated input depends only on the input width and the signs. */
static int pmpd_tcq_shares(const pmpd_tensor *a, const pmpd_tensor *b)
{
    return pmpd_rotated_shares(a, b, pmpd_tcq_rotated_of);
}

static pmpd_status pmpd_tcq_scratch(const pmpd_tensor *w, size_t n_tokens, unsigned n_threads, size_t *bytes)
{
    /* The tensor's stored rotation size sets the prepared input's. */
    return pmpd_rotated_scratch_bytes(pmpd_tcq_rotated_of(w).padded, n_tokens, n_threads, bytes);
}

static void pmpd_tcq_format_row(const pmpd_tensor *w, size_t r, float *out)
{
    pmpd_tcq_matrix m;
    pmpd_tcq_bind(w->data, w->dims[0], w->dims[1], &m);
    pmpd_tcq_row(&m, r, out);
}

static pmpd_status pmpd_tcq_check(const unsigned char *data, uint64_t size, uint32_t n_dims, const uint64_t *dims,
                                  uint64_t offset, const char *name, uint32_t name_length, pmpd_error *err)
{
    pmpd_tcq_matrix m;
    pmpd_status status = pmpd_rotated_check_matrix(n_dims, offset, "tcq", name, name_length, err);
    if (status != PMPD_OK)
        return status;
    return pmpd_tcq_view(data, size, dims[0], dims[1], offset, &m, err);
}

static const pmpd_weight_format pmpd_tcq_format = {
    PMPD_TENSOR_TCQ,  "tcq",         NULL,           pmpd_tcq_check, pmpd_tcq_scratch, NULL, pmpd_tcq_format_row,
    NULL,             pmpd_tcq_prepare, pmpd_tcq_rows, pmpd_tcq_shares,
};

PMPD_INTERNAL const pmpd_weight_format *pmpd_weights_tcq(void)
{
    return &pmpd_tcq_format;
}
