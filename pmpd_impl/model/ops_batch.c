#include "pmpd_impl/model/ops_batch.h"

typedef enum pmpd_ops_batch_kind { PMPD_OPS_RMSNORM, PMPD_OPS_SWIGLU, PMPD_OPS_ADD } pmpd_ops_batch_kind;

typedef struct pmpd_ops_batch_job {
    pmpd_ops_batch_kind kind;
    float *out;
    const float *in;
    const float *weight; /* RMSNorm gain */
    size_t width;
    float eps;
} pmpd_ops_batch_job;

static void pmpd_ops_batch_tokens(void *ctx, size_t begin, size_t end, unsigned worker)
{
    const pmpd_ops_batch_job *job = (const pmpd_ops_batch_job *)ctx;
    size_t t;
    (void)worker;
    for (t = begin; t < end; t++) {
        float *out = job->out + t * job->width;
        const float *in = job->in + t * job->width;
        if (job->kind == PMPD_OPS_RMSNORM)
            pmpd_ops_rmsnorm(out, in, job->weight, job->width, job->eps);
        else if (job->kind == PMPD_OPS_SWIGLU)
            pmpd_ops_swiglu(out, in, job->width);
        else
            pmpd_ops_add(out, in, job->width);
    }
}

/* Tokens are the items; the weight keeps short rows (or one token) on the
 * calling thread, where waking workers would cost more than the work. */
static void pmpd_ops_batch_run(pmpd_pool *pool, pmpd_ops_batch_job *job, size_t n_tokens)
{
    static const struct {
        const char *name;
        uint32_t length;
    } names[] = {{"rmsnorm", 7}, {"swiglu", 6}, {"add", 3}};
    pmpd_trace_label(pmpd_pool_get_trace(pool), names[job->kind].name, names[job->kind].length, "elementwise");
    pmpd_pool_run_weighed(pool, pmpd_ops_batch_tokens, job, n_tokens, 1,
                          job->kind == PMPD_OPS_SWIGLU ? 8 * job->width : job->width);
}

PMPD_INTERNAL void pmpd_ops_rmsnorm_batch(pmpd_pool *pool, float *out, const float *x, const float *weight,
                                          size_t n_tokens, size_t dim, float eps)
{
    pmpd_ops_batch_job job = {PMPD_OPS_RMSNORM, NULL, NULL, NULL, 0, 0.0f};
    job.out = out;
    job.in = x;
    job.weight = weight;
    job.width = dim;
    job.eps = eps;
    pmpd_ops_batch_run(pool, &job, n_tokens);
}

PMPD_INTERNAL void pmpd_ops_swiglu_batch(pmpd_pool *pool, float *gate, const float *up, size_t n_tokens,
                                         size_t width)
{
    pmpd_ops_batch_job job = {PMPD_OPS_SWIGLU, NULL, NULL, NULL, 0, 0.0f};
    job.out = gate;
    job.in = up;
    job.width = width;
    pmpd_ops_batch_run(pool, &job, n_tokens);
}

PMPD_INTERNAL void pmpd_ops_add_batch(pmpd_pool *pool, float *acc, const float *x, size_t n_tokens, size_t width)
{
    pmpd_ops_batch_job job = {PMPD_OPS_ADD, NULL, NULL, NULL, 0, 0.0f};
    job.out = acc;
    job.in = x;
    job.width = width;
    pmpd_ops_batch_run(pool, &job, n_tokens);
}
