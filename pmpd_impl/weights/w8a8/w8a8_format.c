/* The table row of W8A8 weights: activations quantized once with the
 * tensor's static scale (split over the pool for prefill), then the rows
 * split over the pool in blocks of 4. */
#include <string.h>

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/weights/format.h"
#include "pmpd_impl/weights/w8a8/w8a8.h"

typedef struct pmpd_w8a8_job {
    pmpd_w8a8_matrix m;
    const float *x;
    float *y;
    size_t n_tokens;
    void *act;
} pmpd_w8a8_job;

static void pmpd_w8a8_quantize_part(void *ctx, size_t begin, size_t end, unsigned worker)
{
    const pmpd_w8a8_job *job = (const pmpd_w8a8_job *)ctx;
    (void)worker;
    pmpd_w8a8_act_quantize(&job->m, job->x, begin, end, job->act);
}

static void pmpd_w8a8_rows(void *ctx, size_t begin, size_t end, unsigned worker)
{
    const pmpd_w8a8_job *job = (const pmpd_w8a8_job *)ctx;
    (void)worker;
    pmpd_w8a8_matmul(&job->m, job->act, job->n_tokens, begin, end, job->y, job->m.rows);
}

static pmpd_status pmpd_w8a8_scratch(const pmpd_tensor *w, size_t n_tokens, unsigned n_threads, size_t *bytes)
{
    pmpd_w8a8_layout layout;
    (void)n_threads;
    if (pmpd_w8a8_compute_layout(w->dims[0], w->dims[1], &layout) != PMPD_OK)
        return PMPD_ERR_OVERFLOW;
    return pmpd_checked_mul3(n_tokens, layout.padded_cols, PMPD_W8A8_ACT_BYTES, bytes) ? PMPD_OK : PMPD_ERR_OVERFLOW;
}

static void pmpd_w8a8_linear(const pmpd_tensor *w, const float *x, size_t n_tokens, float *y, void *scratch,
                             pmpd_pool *pool, unsigned bits)
{
    pmpd_w8a8_job job;
    (void)bits;
    pmpd_w8a8_bind(w->data, w->dims[0], w->dims[1], &job.m);
    job.x = x;
    job.y = y;
    job.n_tokens = n_tokens;
    job.act = scratch;
    if (n_tokens == 1)
        pmpd_w8a8_act_quantize(&job.m, x, 0, 1, scratch);
    else
        pmpd_pool_run_weighed(pool, pmpd_w8a8_quantize_part, &job, n_tokens, 1, job.m.cols);
    pmpd_pool_run_weighed(pool, pmpd_w8a8_rows, &job, job.m.rows, PMPD_W8A8_ROW_BLOCK, job.m.cols * n_tokens);
}

static void pmpd_w8a8_row(const pmpd_tensor *w, size_t r, float *out)
{
    pmpd_w8a8_matrix m;
    size_t c;
    pmpd_w8a8_bind(w->data, w->dims[0], w->dims[1], &m);
    for (c = 0; c < m.cols; c++)
        out[c] = m.row_scale[r] * (float)m.weights[r * m.padded_cols + c];
}

static pmpd_status pmpd_w8a8_check(const unsigned char *data, uint64_t size, uint32_t n_dims, const uint64_t *dims,
                                   uint64_t offset, const char *name, uint32_t name_length, pmpd_error *err)
{
    pmpd_w8a8_matrix m;
    if (n_dims != 2)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, offset, "w8a8 tensor %.*s is not a matrix",
                              (int)name_length, name);
    return pmpd_w8a8_view(data, size, dims[0], dims[1], offset, &m, err);
}

static const pmpd_weight_format pmpd_w8a8_format = {
    PMPD_TENSOR_W8A8, "w8a8", NULL, pmpd_w8a8_check, pmpd_w8a8_scratch, pmpd_w8a8_linear, pmpd_w8a8_row, NULL,
};

PMPD_INTERNAL const pmpd_weight_format *pmpd_weights_w8a8(void)
{
    return &pmpd_w8a8_format;
}
