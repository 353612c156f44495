/* The table row of nested any-precision weights: the product at a chosen
 * width in two steps (int8 activations quantized once, shared by q/k/v and
 * by gate/up; then int8 entries from the width's table times them, rows
 * split over threads, prefill running the tokens through one pass over the
 * weights), the size check of a self-describing tensor, and the bytes a
 * k-bit product reads. */
#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/weights/anyprec/anyprec.h"
#include "pmpd_impl/weights/format.h"

/* The prepared input in scratch, for n_tokens tokens of cols columns:
 * int8 activations (pmpd_anyprec_quantize_tokens' layout), then their
 * group scales, then one sum per token. */
typedef struct pmpd_anyprec_input {
    int8_t *xq;
    float *xscale;
    float *xsum;
    size_t stride; /* bytes of xq per token */
} pmpd_anyprec_input;

static pmpd_anyprec_input pmpd_anyprec_input_view(const void *scratch, uint32_t cols, size_t n_tokens)
{
    pmpd_anyprec_input in;
    in.stride = pmpd_anyprec_token_stride(cols);
    in.xq = (int8_t *)(uintptr_t)scratch;
    in.xscale = (float *)(void *)(in.xq + n_tokens * in.stride);
    in.xsum = in.xscale + n_tokens * (in.stride / PMPD_ANYPREC_GROUP);
    return in;
}

static void pmpd_anyprec_prepare(const pmpd_tensor *w, const float *x, size_t n_tokens, void *scratch, size_t begin,
                                 size_t end, unsigned worker)
{
    uint32_t cols = (uint32_t)w->dims[1];
    pmpd_anyprec_input in = pmpd_anyprec_input_view(scratch, cols, n_tokens);
    (void)worker;
    pmpd_anyprec_quantize_tokens(x + begin * cols, end - begin, cols, in.xq + begin * in.stride,
                                 in.xscale + begin * (in.stride / PMPD_ANYPREC_GROUP), in.xsum + begin);
}

/* Rows [begin, end) at width bits: the GEMV for one token, else one pass
 * over the weights for all tokens. */
static void pmpd_anyprec_format_rows(const pmpd_tensor *w, const void *scratch, const float *x, size_t n_tokens,
                                     float *y, size_t begin, size_t end, unsigned bits)
{
    pmpd_anyprec_matrix m;
    pmpd_anyprec_input in;
    unsigned k;
    (void)x;
    pmpd_anyprec_bind(w->data, w->dims[0], w->dims[1], &m);
    in = pmpd_anyprec_input_view(scratch, m.cols, n_tokens);
    k = pmpd_anyprec_width(&m, bits);
    if (n_tokens == 1)
        pmpd_anyprec_gemv(&m, k, in.xq, in.xscale, y, (uint32_t)begin, (uint32_t)end);
    else
        pmpd_anyprec_gemm(&m, k, in.xq, in.xscale, in.xsum, n_tokens, y, m.rows, (uint32_t)begin, (uint32_t)end);
}

/* The quantized activations depend only on X and the column count. */
static int pmpd_anyprec_shares(const pmpd_tensor *a, const pmpd_tensor *b)
{
    return a->dims[1] == b->dims[1];
}

/* The int8 activations of the tokens: per token a whole number of
 * superblocks of bytes and their group scales, then one sum per token. */
static pmpd_status pmpd_anyprec_scratch(const pmpd_tensor *w, size_t n_tokens, unsigned n_threads, size_t *bytes)
{
    size_t stride = pmpd_anyprec_token_stride((uint32_t)w->dims[1]), per_token;
    (void)n_threads;
    if (w->dims[1] > UINT32_MAX)
        return PMPD_ERR_OVERFLOW;
    return pmpd_checked_mul(stride / PMPD_ANYPREC_GROUP, sizeof(float), &per_token) &&
                   pmpd_checked_add(per_token, stride + sizeof(float), &per_token) &&
                   pmpd_checked_mul(per_token, n_tokens ? n_tokens : 1, bytes)
               ? PMPD_OK
               : PMPD_ERR_OVERFLOW;
}

static void pmpd_anyprec_format_row(const pmpd_tensor *w, size_t r, float *out)
{
    pmpd_anyprec_matrix m;
    pmpd_anyprec_bind(w->data, w->dims[0], w->dims[1], &m);
    pmpd_anyprec_row(&m, m.parent_bits, (uint32_t)r, out);
}

static pmpd_status pmpd_anyprec_check(const unsigned char *data, uint64_t size, uint32_t n_dims, const uint64_t *dims,
                                      uint64_t offset, const char *name, uint32_t name_length, pmpd_error *err)
{
    pmpd_anyprec_matrix m;
    if (n_dims != 2)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, offset, "anyprec tensor %.*s is not a matrix",
                              (int)name_length, name);
    return pmpd_anyprec_view(data, size, dims[0], dims[1], offset, &m, err);
}

/* A k-bit product reads k bits of each stored column (whole 256-column
 * superblocks and the row's share of a partial one), then the row's scale,
 * offset and table of width k. */
static uint64_t pmpd_anyprec_bytes_read(const pmpd_tensor *w, unsigned bits)
{
    pmpd_anyprec_matrix m;
    unsigned k;
    pmpd_anyprec_bind(w->data, w->dims[0], w->dims[1], &m);
    k = pmpd_anyprec_width(&m, bits);
    return pmpd_anyprec_read_bytes(m.rows, pmpd_anyprec_stored_cols(m.cols, m.tail_shift), k);
}

static const pmpd_weight_format pmpd_anyprec_format = {
    PMPD_TENSOR_ANYPREC,      "anyprec",
    NULL,                     pmpd_anyprec_check,
    pmpd_anyprec_scratch,     NULL,
    pmpd_anyprec_format_row,  pmpd_anyprec_bytes_read,
    pmpd_anyprec_prepare,     pmpd_anyprec_format_rows,
    pmpd_anyprec_shares,
};

PMPD_INTERNAL const pmpd_weight_format *pmpd_weights_anyprec(void)
{
    return &pmpd_anyprec_format;
}
