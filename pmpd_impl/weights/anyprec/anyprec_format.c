/* The table row of nested any-precision weights: the linear layer at a
 * chosen width (int8 entries from the width's table times int8
 * activations quantized once, before the rows are split; prefill runs the
 * tokens through one pass over the weights), the size check of a
 * self-describing tensor, and the bytes a k-bit product reads. */
#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/weights/anyprec/anyprec.h"
#include "pmpd_impl/weights/format.h"

typedef struct pmpd_anyprec_job {
    pmpd_anyprec_matrix m;
    unsigned bits;
    float *y;
    size_t n_tokens;
    const int8_t *xq; /* int8 activations, pmpd_anyprec_quantize_tokens' layout */
    const float *xscale;
    const float *xsum;
    const float *x; /* the float activations, n_tokens x cols */
} pmpd_anyprec_job;

/* Tokens [begin, end) of x quantized into the job's activations. */
static void pmpd_anyprec_quantize_job(void *ctx, size_t begin, size_t end, unsigned worker)
{
    const pmpd_anyprec_job *job = (const pmpd_anyprec_job *)ctx;
    size_t stride = pmpd_anyprec_token_stride(job->m.cols);
    (void)worker;
    pmpd_anyprec_quantize_tokens(job->x + begin * job->m.cols, end - begin, job->m.cols,
                                 (int8_t *)(uintptr_t)(job->xq + begin * stride),
                                 (float *)(uintptr_t)(job->xscale + begin * (stride / PMPD_ANYPREC_GROUP)),
                                 (float *)(uintptr_t)(job->xsum + begin));
}

static void pmpd_anyprec_rows(void *ctx, size_t begin, size_t end, unsigned worker)
{
    const pmpd_anyprec_job *job = (const pmpd_anyprec_job *)ctx;
    (void)worker;
    if (job->n_tokens == 1)
        pmpd_anyprec_gemv(&job->m, job->bits, job->xq, job->xscale, job->y, (uint32_t)begin, (uint32_t)end);
    else
        pmpd_anyprec_gemm(&job->m, job->bits, job->xq, job->xscale, job->xsum, job->n_tokens, job->y, job->m.rows,
                          (uint32_t)begin, (uint32_t)end);
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

static void pmpd_anyprec_linear(const pmpd_tensor *w, const float *x, size_t n_tokens, float *y, void *scratch,
                                pmpd_pool *pool, unsigned bits)
{
    pmpd_anyprec_job job;
    size_t stride;
    pmpd_anyprec_bind(w->data, w->dims[0], w->dims[1], &job.m);
    stride = pmpd_anyprec_token_stride(job.m.cols);
    job.bits = pmpd_anyprec_width(&job.m, bits);
    job.y = y;
    job.n_tokens = n_tokens;
    job.xq = (const int8_t *)scratch;
    job.xscale = (const float *)(const void *)((const unsigned char *)scratch + n_tokens * stride);
    job.xsum = job.xscale + n_tokens * (stride / PMPD_ANYPREC_GROUP);
    job.x = x;
    /* The tokens' activations are quantized in parallel too: on 16 Xeon
     * threads a serial pass was most of a 512-token prefill. */
    pmpd_pool_run_weighed(pool, pmpd_anyprec_quantize_job, &job, n_tokens, 1, job.m.cols);
    /* Granules of 4 rows keep the SIMD kernels on their 4-row path. */
    pmpd_pool_run_weighed(pool, pmpd_anyprec_rows, &job, job.m.rows, 4, job.m.cols * n_tokens);
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

/* A k-bit product reads k bits of each padded 256-column superblock, then
 * the row's scale, offset and table of width k. */
static uint64_t pmpd_anyprec_bytes_read(const pmpd_tensor *w, unsigned bits)
{
    pmpd_anyprec_matrix m;
    unsigned k;
    pmpd_anyprec_bind(w->data, w->dims[0], w->dims[1], &m);
    k = pmpd_anyprec_width(&m, bits);
    return (uint64_t)m.rows * ((uint64_t)m.superblocks * 32u * k + 2 * sizeof(float) + ((uint64_t)1 << k));
}

static const pmpd_weight_format pmpd_anyprec_format = {
    PMPD_TENSOR_ANYPREC, "anyprec", NULL, pmpd_anyprec_check, pmpd_anyprec_scratch, pmpd_anyprec_linear,
    pmpd_anyprec_format_row, pmpd_anyprec_bytes_read, NULL, NULL, NULL,
};

PMPD_INTERNAL const pmpd_weight_format *pmpd_weights_anyprec(void)
{
    return &pmpd_anyprec_format;
}
