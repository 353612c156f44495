/* The table rows of the group-quantized formats q8, q4 and q2cb: one
 * layout family (qformat.h) and one kernel family (qmatmul.h), which the
 * rows share; only the block layout differs. */
#include "pmpd_impl/weights/format.h"
#include "pmpd_impl/weights/grouped/qlinear.h"

static pmpd_status pmpd_grouped_bytes(uint32_t type, uint32_t n_dims, const uint64_t *dims, uint64_t *bytes)
{
    /* Rows are interleaved in blocks: only matrices have a layout. */
    if (n_dims != 2)
        return PMPD_ERR_FORMAT_SHAPE;
    return pmpd_qformat_tensor_bytes(type, dims[0], dims[1], bytes);
}

static pmpd_status pmpd_q8_bytes(uint32_t n_dims, const uint64_t *dims, uint64_t *bytes)
{
    return pmpd_grouped_bytes(PMPD_TENSOR_Q8, n_dims, dims, bytes);
}

static pmpd_status pmpd_q4_bytes(uint32_t n_dims, const uint64_t *dims, uint64_t *bytes)
{
    return pmpd_grouped_bytes(PMPD_TENSOR_Q4, n_dims, dims, bytes);
}

static pmpd_status pmpd_q2cb_bytes(uint32_t n_dims, const uint64_t *dims, uint64_t *bytes)
{
    return pmpd_grouped_bytes(PMPD_TENSOR_Q2CB, n_dims, dims, bytes);
}

/* The codebook levels must stay within +-64 (qformat.h says why). */
static pmpd_status pmpd_q2cb_check(const unsigned char *data, uint64_t size, uint32_t n_dims, const uint64_t *dims,
                                   uint64_t offset, const char *name, uint32_t name_length, pmpd_error *err)
{
    uint64_t bad = 0;
    (void)size;
    (void)n_dims;
    (void)dims;
    if (pmpd_qformat_validate(PMPD_TENSOR_Q2CB, data, &bad) != PMPD_OK)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, offset + bad, "tensor %.*s codebook level is outside -64..64",
                              (int)name_length, name);
    return PMPD_OK;
}

static pmpd_status pmpd_grouped_scratch(const pmpd_tensor *w, size_t n_tokens, unsigned n_threads, size_t *bytes)
{
    (void)n_threads;
    return pmpd_qlinear_scratch_bytes((size_t)w->dims[1], n_tokens, bytes);
}

static void pmpd_grouped_rows(const pmpd_tensor *w, const void *scratch, const float *x, size_t n_tokens, float *y,
                              size_t begin, size_t end, unsigned bits)
{
    (void)x;
    (void)bits;
    pmpd_qlinear_rows(w, scratch, n_tokens, y, begin, end);
}

/* Activations quantized per group of 32 depend only on X. */
static int pmpd_grouped_shares(const pmpd_tensor *a, const pmpd_tensor *b)
{
    return a->dims[1] == b->dims[1];
}

static const pmpd_weight_format pmpd_q8_row = {
    PMPD_TENSOR_Q8,       "q8",   pmpd_q8_bytes,           NULL, pmpd_grouped_scratch, NULL, pmpd_qlinear_row, NULL,
    pmpd_qlinear_prepare, pmpd_grouped_rows, pmpd_grouped_shares,
};

static const pmpd_weight_format pmpd_q4_row = {
    PMPD_TENSOR_Q4,       "q4",   pmpd_q4_bytes,           NULL, pmpd_grouped_scratch, NULL, pmpd_qlinear_row, NULL,
    pmpd_qlinear_prepare, pmpd_grouped_rows, pmpd_grouped_shares,
};

static const pmpd_weight_format pmpd_q2cb_row = {
    PMPD_TENSOR_Q2CB, "q2cb", pmpd_q2cb_bytes, pmpd_q2cb_check, pmpd_grouped_scratch, NULL, pmpd_qlinear_row, NULL,
    pmpd_qlinear_prepare, pmpd_grouped_rows, pmpd_grouped_shares,
};

PMPD_INTERNAL const pmpd_weight_format *pmpd_weights_q8(void)
{
    return &pmpd_q8_row;
}

PMPD_INTERNAL const pmpd_weight_format *pmpd_weights_q4(void)
{
    return &pmpd_q4_row;
}

PMPD_INTERNAL const pmpd_weight_format *pmpd_weights_q2cb(void)
{
    return &pmpd_q2cb_row;
}
