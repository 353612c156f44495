#include "pmpd_impl/model/linear.h"

#include <string.h>

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/model/f16.h"
#include "pmpd_impl/model/linear_float.h"
#include "pmpd_impl/kernels/qlinear.h"
#include "pmpd_impl/precision/anyprec.h"

/* The scalar float kernel, the reference for the vector ones in
 * linear_float_*.c, walks a weight row in chunks (converted once per chunk
 * for f16) and applies each chunk to a block of tokens, so prefill converts
 * every weight once per block instead of once per token.  Every output is
 * still the plain left-to-right sum over the columns (llama2.c's order),
 * the same for any token count, block or thread split: batched prefill
 * reproduces token-by-token decode exactly. */
#define PMPD_LINEAR_CHUNK 64
#define PMPD_LINEAR_TOKEN_BLOCK 8

typedef struct pmpd_linear_job {
    const pmpd_tensor *w;
    const float *x;
    float *y;
    size_t n_tokens, rows, cols;
    pmpd_anyprec_matrix anyprec; /* ANYPREC only */
    unsigned bits;               /* ANYPREC only: the width in use */
    const int8_t *xq;            /* ANYPREC decode: int8 activations */
    const float *xscale;
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

/* Nested any-precision rows: decode (one token) multiplies int8 weights
 * from the width's table with int8 activations quantized once, before the
 * rows are split; prefill multiplies float-dequantized weights. */
static void pmpd_linear_anyprec_rows(void *ctx, size_t begin, size_t end, unsigned worker)
{
    const pmpd_linear_job *job = (const pmpd_linear_job *)ctx;
    (void)worker;
    if (job->n_tokens == 1)
        pmpd_anyprec_gemv(&job->anyprec, job->bits, job->xq, job->xscale, job->y, (uint32_t)begin,
                          (uint32_t)end);
    else
        pmpd_anyprec_gemm(&job->anyprec, job->bits, job->x, job->n_tokens, job->cols, job->y, job->rows,
                          (uint32_t)begin, (uint32_t)end);
}

/* The int8 activations of one token: padded_cols bytes, then the group scales. */
static int pmpd_linear_anyprec_scratch(size_t cols, size_t *bytes)
{
    size_t padded, scales;
    return pmpd_checked_align_up(cols, PMPD_ANYPREC_GROUP, &padded) &&
           pmpd_checked_mul(padded / PMPD_ANYPREC_GROUP, sizeof(float), &scales) &&
           pmpd_checked_add(padded, scales, bytes);
}

#if PMPD_LINEAR_FLOAT_SIMD
static void pmpd_linear_float_simd_rows(void *ctx, size_t begin, size_t end, unsigned worker)
{
    const pmpd_linear_job *job = (const pmpd_linear_job *)ctx;
    (void)worker;
    pmpd_linear_float_simd(job->w, job->x, job->n_tokens, job->y, begin, end);
}
#endif

static void pmpd_linear_job_init(pmpd_linear_job *job, const pmpd_tensor *w, const float *x, size_t n_tokens,
                                 float *y)
{
    job->w = w;
    job->x = x;
    job->y = y;
    job->n_tokens = n_tokens;
    job->rows = (size_t)w->dims[0];
    job->cols = (size_t)w->dims[1];
}

PMPD_INTERNAL void pmpd_linear_reference(const pmpd_tensor *w, const float *x, size_t n_tokens, float *y)
{
    pmpd_linear_job job;
    pmpd_linear_job_init(&job, w, x, n_tokens, y);
    pmpd_linear_float_rows(&job, 0, job.rows, 0);
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
    case PMPD_TENSOR_ANYPREC:
        return pmpd_linear_anyprec_scratch((size_t)w->dims[1], bytes) ? PMPD_OK : PMPD_ERR_OVERFLOW;
    case PMPD_TENSOR_Q8:
    case PMPD_TENSOR_Q4:
    case PMPD_TENSOR_Q2CB:
        return pmpd_qlinear_scratch_bytes((size_t)w->dims[1], n_tokens, bytes);
    default:
        return PMPD_ERR_UNSUPPORTED;
    }
}

PMPD_INTERNAL void pmpd_linear(const pmpd_tensor *w, const float *x, size_t n_tokens, float *y,
                               void *scratch, pmpd_pool *pool, unsigned bits)
{
    pmpd_linear_job job;
    pmpd_linear_job_init(&job, w, x, n_tokens, y);
    (void)scratch;
    switch (w->type) {
    case PMPD_TENSOR_F32:
    case PMPD_TENSOR_F16:
#if PMPD_LINEAR_FLOAT_SIMD
        /* Granules of 4 rows keep the vector kernels on their 4-row path. */
        pmpd_pool_run_weighed(pool, pmpd_linear_float_simd_rows, &job, job.rows, 4, job.cols * n_tokens);
#else
        pmpd_pool_run_weighed(pool, pmpd_linear_float_rows, &job, job.rows, 1, job.cols * n_tokens);
#endif
        break;
    case PMPD_TENSOR_ANYPREC:
        pmpd_anyprec_bind(w->data, w->dims[0], w->dims[1], &job.anyprec);
        job.bits = pmpd_anyprec_width(&job.anyprec, bits);
        if (n_tokens == 1) {
            int8_t *xq = (int8_t *)scratch;
            float *xscale = (float *)(void *)(xq + pmpd_anyprec_padded_cols(job.anyprec.cols));
            pmpd_anyprec_quantize_input(x, job.anyprec.cols, xq, xscale);
            job.xq = xq;
            job.xscale = xscale;
        }
        /* Granules of 4 rows keep the SIMD kernels on their 4-row path. */
        pmpd_pool_run_weighed(pool, pmpd_linear_anyprec_rows, &job, job.rows, 4, job.cols * n_tokens);
        break;
    case PMPD_TENSOR_Q8:
    case PMPD_TENSOR_Q4:
    case PMPD_TENSOR_Q2CB:
        pmpd_qlinear(w, x, n_tokens, y, scratch, pool);
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
    case PMPD_TENSOR_ANYPREC: {
        pmpd_anyprec_matrix m;
        pmpd_anyprec_bind(w->data, w->dims[0], cols, &m);
        pmpd_anyprec_row(&m, m.parent_bits, (uint32_t)r, out);
        break;
    }
    case PMPD_TENSOR_Q8:
    case PMPD_TENSOR_Q4:
    case PMPD_TENSOR_Q2CB:
        pmpd_qlinear_row(w, r, out);
        break;
    default:
        break;
    }
}

#undef PMPD_LINEAR_CHUNK
#undef PMPD_LINEAR_TOKEN_BLOCK
