#include "pmpd_impl/weights/grouped/qlinear.h"

typedef struct pmpd_qlinear_job {
    pmpd_qmatrix w;
    pmpd_qact *act;
    const float *x;
    float *y;
} pmpd_qlinear_job;

static void pmpd_qlinear_quantize(void *ctx, size_t begin, size_t end, unsigned worker)
{
    const pmpd_qlinear_job *job = (const pmpd_qlinear_job *)ctx;
    (void)worker;
    pmpd_qact_quantize_tokens(job->act, job->x, job->w.cols, job->w.cols, begin, end);
}

static void pmpd_qlinear_rows(void *ctx, size_t begin, size_t end, unsigned worker)
{
    const pmpd_qlinear_job *job = (const pmpd_qlinear_job *)ctx;
    (void)worker;
    pmpd_qmatmul(&job->w, job->act, begin, end, job->y, job->w.rows);
}

static pmpd_qmatrix pmpd_qlinear_matrix(const pmpd_tensor *w)
{
    pmpd_qmatrix m;
    m.type = w->type;
    m.data = (const unsigned char *)w->data;
    m.rows = (size_t)w->dims[0];
    m.cols = (size_t)w->dims[1];
    return m;
}

PMPD_INTERNAL pmpd_status pmpd_qlinear_scratch_bytes(size_t cols, size_t n_tokens, size_t *bytes)
{
    return pmpd_qact_bytes(n_tokens, cols, bytes);
}

PMPD_INTERNAL void pmpd_qlinear(const pmpd_tensor *w, const float *x, size_t n_tokens, float *y, void *scratch,
                                pmpd_pool *pool)
{
    pmpd_qlinear_job job;
    pmpd_qact act;
    pmpd_arena arena;
    size_t bytes = 0;
    job.w = pmpd_qlinear_matrix(w);
    /* The planning call sized scratch with pmpd_qlinear_scratch_bytes, so
     * these cannot fail. */
    pmpd_qact_bytes(n_tokens, job.w.cols, &bytes);
    pmpd_arena_init(&arena, scratch, bytes);
    pmpd_qact_alloc(&arena, n_tokens, job.w.cols, &act);
    act.n_tokens = n_tokens;
    job.act = &act;
    job.x = x;
    job.y = y;
    /* Prefill quantizes many tokens: split them too (pairs share bytes). */
    if (n_tokens == 1)
        pmpd_qact_quantize(&act, x, job.w.cols, n_tokens, job.w.cols);
    else
        pmpd_pool_run_weighed(pool, pmpd_qlinear_quantize, &job, n_tokens + (n_tokens & 1), 2, job.w.cols);
    pmpd_pool_run_weighed(pool, pmpd_qlinear_rows, &job, job.w.rows, PMPD_QROWS, job.w.cols * n_tokens);
}

PMPD_INTERNAL void pmpd_qlinear_row(const pmpd_tensor *w, size_t r, float *out)
{
    pmpd_qmatrix m = pmpd_qlinear_matrix(w);
    pmpd_qformat_dequantize_row(&m, r, out);
}
