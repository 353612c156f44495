#include "pmpd_impl/model/linear.h"

#include <string.h>

#include "pmpd_impl/model/f16.h"

/* The float kernels walk a weight row in chunks (converted once per chunk
 * for f16) and apply each chunk to a block of tokens, so prefill converts
 * every weight once per block instead of once per token.  Every output is
 * still the plain left-to-right sum over the columns, the same for any
 * token count, block or thread split: batched prefill reproduces
 * token-by-token decode exactly. */
#define PMPD_LINEAR_CHUNK 64
#define PMPD_LINEAR_TOKEN_BLOCK 8

typedef struct pmpd_linear_job {
    const pmpd_tensor *w;
    const float *x;
    float *y;
    size_t n_tokens, rows, cols;
} pmpd_linear_job;

/* Columns [c0, c0+n) of row r as floats: in place for f32, converted into
 * tmp for f16. */
static const float *pmpd_linear_float_chunk(const pmpd_tensor *w, size_t cols, size_t r, size_t c0,
                                            size_t n, float *tmp)
{
    size_t i;
    if (w->type == PMPD_TENSOR_F32)
        return (const float *)w->data + r * cols + c0;
    for (i = 0; i < n; i++)
        tmp[i] = pmpd_f16_to_f32(((const uint16_t *)w->data)[r * cols + c0 + i]);
    return tmp;
}

static void pmpd_linear_float_rows(void *ctx, size_t begin, size_t end, unsigned worker)
{
    const pmpd_linear_job *job = (const pmpd_linear_job *)ctx;
    float tmp[PMPD_LINEAR_CHUNK];
    float acc[PMPD_LINEAR_TOKEN_BLOCK];
    size_t r, t0, t, c0, c;
    (void)worker;
    for (r = begin; r < end; r++) {
        for (t0 = 0; t0 < job->n_tokens; t0 += PMPD_LINEAR_TOKEN_BLOCK) {
            size_t nt = job->n_tokens - t0 < PMPD_LINEAR_TOKEN_BLOCK ? job->n_tokens - t0
                                                                     : PMPD_LINEAR_TOKEN_BLOCK;
            for (t = 0; t < nt; t++)
                acc[t] = 0.0f;
            for (c0 = 0; c0 < job->cols; c0 += PMPD_LINEAR_CHUNK) {
                size_t n = job->cols - c0 < PMPD_LINEAR_CHUNK ? job->cols - c0 : PMPD_LINEAR_CHUNK;
                const float *wc = pmpd_linear_float_chunk(job->w, job->cols, r, c0, n, tmp);
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

PMPD_INTERNAL pmpd_status pmpd_linear_scratch_bytes(const pmpd_tensor *w, size_t n_tokens,
                                                    unsigned n_threads, size_t *bytes)
{
    (void)n_tokens;
    (void)n_threads;
    switch (w->type) {
    case PMPD_TENSOR_F32:
    case PMPD_TENSOR_F16:
        *bytes = 0;
        return PMPD_OK;
    default:
        return PMPD_ERR_UNSUPPORTED;
    }
}

PMPD_INTERNAL void pmpd_linear(const pmpd_tensor *w, const float *x, size_t n_tokens, float *y,
                               void *scratch, pmpd_pool *pool)
{
    pmpd_linear_job job;
    job.w = w;
    job.x = x;
    job.y = y;
    job.n_tokens = n_tokens;
    job.rows = (size_t)w->dims[0];
    job.cols = (size_t)w->dims[1];
    (void)scratch;
    switch (w->type) {
    case PMPD_TENSOR_F32:
    case PMPD_TENSOR_F16:
        pmpd_pool_run(pool, pmpd_linear_float_rows, &job, job.rows, 1);
        break;
    default:
        break;
    }
}

PMPD_INTERNAL void pmpd_linear_row(const pmpd_tensor *w, size_t r, float *out)
{
    size_t cols = (size_t)w->dims[1], c0, n;
    float tmp[PMPD_LINEAR_CHUNK];
    switch (w->type) {
    case PMPD_TENSOR_F32:
    case PMPD_TENSOR_F16:
        for (c0 = 0; c0 < cols; c0 += n) {
            n = cols - c0 < PMPD_LINEAR_CHUNK ? cols - c0 : PMPD_LINEAR_CHUNK;
            memcpy(out + c0, pmpd_linear_float_chunk(w, cols, r, c0, n, tmp), n * sizeof(float));
        }
        break;
    default:
        break;
    }
}

#undef PMPD_LINEAR_CHUNK
#undef PMPD_LINEAR_TOKEN_BLOCK
