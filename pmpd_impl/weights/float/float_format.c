/* Float weights (f32, or f16 converted on the fly): their table rows, the
 * scalar product every vector kernel is tested against, and the row
 * lookup.
 *
 * The scalar kernel walks a weight row in chunks (converted once per chunk
 * for f16) and applies each chunk to a block of tokens, so prefill converts
 * every weight once per block instead of once per token.  Every output is
 * still the plain left-to-right sum over the columns (llama2.c's order),
 * the same for any token count, block or thread split: batched prefill
 * reproduces token-by-token decode exactly. */
#include <string.h>

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/model/f16.h"
#include "pmpd_impl/weights/float/linear_float.h"
#include "pmpd_impl/weights/format.h"

#define PMPD_FLOAT_CHUNK 64
#define PMPD_FLOAT_TOKEN_BLOCK 8

typedef struct pmpd_float_job {
    const pmpd_tensor *w;
    const float *x;
    float *y;
    size_t n_tokens, rows, cols;
} pmpd_float_job;

/* Columns [c0, c0+n) of row r as floats: in place for f32, converted into
 * tmp for f16. */
static const float *pmpd_float_chunk(const pmpd_tensor *w, size_t cols, size_t r, size_t c0, size_t n, float *tmp)
{
    size_t i;
    if (w->type == PMPD_TENSOR_F32)
        return (const float *)w->data + r * cols + c0;
    for (i = 0; i < n; i++)
        tmp[i] = pmpd_f16_to_f32(((const uint16_t *)w->data)[r * cols + c0 + i]);
    return tmp;
}

static void pmpd_float_rows(void *ctx, size_t begin, size_t end, unsigned worker)
{
    const pmpd_float_job *job = (const pmpd_float_job *)ctx;
    float tmp[PMPD_FLOAT_CHUNK];
    float acc[PMPD_FLOAT_TOKEN_BLOCK];
    size_t r, t0, t, c0, c;
    (void)worker;
    for (r = begin; r < end; r++) {
        for (t0 = 0; t0 < job->n_tokens; t0 += PMPD_FLOAT_TOKEN_BLOCK) {
            size_t nt = job->n_tokens - t0 < PMPD_FLOAT_TOKEN_BLOCK ? job->n_tokens - t0 : PMPD_FLOAT_TOKEN_BLOCK;
            for (t = 0; t < nt; t++)
                acc[t] = 0.0f;
            for (c0 = 0; c0 < job->cols; c0 += PMPD_FLOAT_CHUNK) {
                size_t n = job->cols - c0 < PMPD_FLOAT_CHUNK ? job->cols - c0 : PMPD_FLOAT_CHUNK;
                const float *wc = pmpd_float_chunk(job->w, job->cols, r, c0, n, tmp);
                for (t = 0; t < nt; t++) {
                    const float *xc = job->x + (t0 + t) * job->cols + c0;
                    float sum = acc[t];
                    for (c = 0; c < n; c++)
                        sum += wc[c] * xc[c];
                    acc[t] = sum;
                }
            }
            for (t = 0; t < nt; t++)
                job->y[(t0 + t) * job->rows + r] = acc[t];
        }
    }
}

#if PMPD_LINEAR_FLOAT_SIMD
static void pmpd_float_simd_rows(void *ctx, size_t begin, size_t end, unsigned worker)
{
    const pmpd_float_job *job = (const pmpd_float_job *)ctx;
    (void)worker;
    pmpd_linear_float_simd(job->w, job->x, job->n_tokens, job->y, begin, end);
}
#endif

static void pmpd_float_job_init(pmpd_float_job *job, const pmpd_tensor *w, const float *x, size_t n_tokens, float *y)
{
    job->w = w;
    job->x = x;
    job->y = y;
    job->n_tokens = n_tokens;
    job->rows = (size_t)w->dims[0];
    job->cols = (size_t)w->dims[1];
}

PMPD_INTERNAL void pmpd_linear_float_reference(const pmpd_tensor *w, const float *x, size_t n_tokens, float *y)
{
    pmpd_float_job job;
    pmpd_float_job_init(&job, w, x, n_tokens, y);
    pmpd_float_rows(&job, 0, job.rows, 0);
}

static void pmpd_float_linear(const pmpd_tensor *w, const float *x, size_t n_tokens, float *y, void *scratch,
                              pmpd_pool *pool, unsigned bits)
{
    pmpd_float_job job;
    (void)scratch;
    (void)bits;
    pmpd_float_job_init(&job, w, x, n_tokens, y);
#if PMPD_LINEAR_FLOAT_SIMD
    /* Granules of 4 rows keep the vector kernels on their 4-row path. */
    pmpd_pool_run_weighed(pool, pmpd_float_simd_rows, &job, job.rows, 4, job.cols * n_tokens);
#else
    pmpd_pool_run_weighed(pool, pmpd_float_rows, &job, job.rows, 1, job.cols * n_tokens);
#endif
}

static void pmpd_float_row(const pmpd_tensor *w, size_t r, float *out)
{
    size_t cols = (size_t)w->dims[1], c0, n;
    float tmp[PMPD_FLOAT_CHUNK];
    for (c0 = 0; c0 < cols; c0 += n) {
        n = cols - c0 < PMPD_FLOAT_CHUNK ? cols - c0 : PMPD_FLOAT_CHUNK;
        memcpy(out + c0, pmpd_float_chunk(w, cols, r, c0, n, tmp), n * sizeof(float));
    }
}

/* Any shape: the product of the dimensions times the element size. */
static pmpd_status pmpd_float_bytes(uint32_t n_dims, const uint64_t *dims, uint64_t element, uint64_t *bytes)
{
    uint64_t total = element;
    uint32_t i;
    for (i = 0; i < n_dims; i++)
        if (!pmpd_checked_mul_u64(total, dims[i], &total))
            return PMPD_ERR_FORMAT_SHAPE;
    *bytes = total;
    return PMPD_OK;
}

static pmpd_status pmpd_f32_bytes(uint32_t n_dims, const uint64_t *dims, uint64_t *bytes)
{
    return pmpd_float_bytes(n_dims, dims, 4, bytes);
}

static pmpd_status pmpd_f16_bytes(uint32_t n_dims, const uint64_t *dims, uint64_t *bytes)
{
    return pmpd_float_bytes(n_dims, dims, 2, bytes);
}

static const pmpd_weight_format pmpd_f32_row = {
    PMPD_TENSOR_F32, "f32", pmpd_f32_bytes, NULL, NULL, pmpd_float_linear, pmpd_float_row, NULL, NULL, NULL, NULL,
};

static const pmpd_weight_format pmpd_f16_row = {
    PMPD_TENSOR_F16, "f16", pmpd_f16_bytes, NULL, NULL, pmpd_float_linear, pmpd_float_row, NULL, NULL, NULL, NULL,
};

PMPD_INTERNAL const pmpd_weight_format *pmpd_weights_f32(void)
{
    return &pmpd_f32_row;
}

PMPD_INTERNAL const pmpd_weight_format *pmpd_weights_f16(void)
{
    return &pmpd_f16_row;
}

#undef PMPD_FLOAT_CHUNK
#undef PMPD_FLOAT_TOKEN_BLOCK
