#include "pmpd_impl/model/linear.h"

#include "pmpd_impl/weights/format.h"

PMPD_INTERNAL pmpd_status pmpd_linear_scratch_bytes(const pmpd_tensor *w, size_t n_tokens, unsigned n_threads,
                                                    size_t *bytes)
{
    const pmpd_weight_format *f = pmpd_weight_format_of(w->type);
    if (!f || (!f->linear && !f->rows))
        return PMPD_ERR_UNSUPPORTED;
    if (!f->scratch_bytes) {
        *bytes = 0;
        return PMPD_OK;
    }
    return f->scratch_bytes(w, n_tokens, n_threads, bytes);
}

/* One pool job over the output rows of several matrices sharing their
 * prepared input: item i is row i of the matrices laid end to end, each
 * rounded up to whole blocks of 4 so a granule never straddles two. */
typedef struct pmpd_linear_group_job {
    const pmpd_tensor *const *w;
    float *const *y;
    size_t count, n_tokens;
    const float *x;
    const void *scratch;
    unsigned bits;
} pmpd_linear_group_job;

static size_t pmpd_linear_padded_rows(const pmpd_tensor *w)
{
    return ((size_t)w->dims[0] + 3) / 4 * 4;
}

PMPD_INTERNAL int pmpd_linear_group_shared(const pmpd_tensor *const *w, size_t count)
{
    const pmpd_weight_format *f = pmpd_weight_format_of(w[0]->type);
    size_t i;
    int shared = f->rows != NULL;
    for (i = 1; i < count && shared; i++)
        shared = w[i]->type == w[0]->type && f->shares(w[0], w[i]);
    return shared;
}

PMPD_INTERNAL size_t pmpd_linear_group_items(const pmpd_tensor *const *w, size_t count)
{
    size_t i, total = 0;
    for (i = 0; i < count; i++)
        total += pmpd_linear_padded_rows(w[i]);
    return total;
}

typedef struct pmpd_linear_prepare_job {
    const pmpd_tensor *w;
    const float *x;
    size_t n_tokens;
    void *scratch;
} pmpd_linear_prepare_job;

static void pmpd_linear_prepare_task(void *ctx, size_t begin, size_t end, unsigned worker)
{
    const pmpd_linear_prepare_job *job = (const pmpd_linear_prepare_job *)ctx;
    pmpd_linear_group_prepare_tokens(job->w, job->x, job->n_tokens, job->scratch, begin, end, worker);
}

PMPD_INTERNAL void pmpd_linear_group_prepare_tokens(const pmpd_tensor *w, const float *x, size_t n_tokens,
                                                    void *scratch, size_t begin, size_t end, unsigned worker)
{
    pmpd_weight_format_of(w->type)->prepare(w, x, n_tokens, scratch, begin, end, worker);
}

PMPD_INTERNAL void pmpd_linear_group_prepare(const pmpd_tensor *w, const float *x, size_t n_tokens, void *scratch,
                                             pmpd_pool *pool)
{
    pmpd_linear_prepare_job job;
    job.w = w;
    job.x = x;
    job.n_tokens = n_tokens;
    job.scratch = scratch;
    /* Prefill converts many tokens: split them too, in pairs. */
    pmpd_pool_run_weighed(pool, pmpd_linear_prepare_task, &job, n_tokens, 2, (size_t)w->dims[1]);
}

PMPD_INTERNAL void pmpd_linear_group_rows(const pmpd_tensor *const *w, size_t count, const void *scratch,
                                          const float *x, size_t n_tokens, float *const *y, size_t begin, size_t end,
                                          unsigned bits)
{
    const pmpd_weight_format *f = pmpd_weight_format_of(w[0]->type);
    size_t i, first = 0;
    for (i = 0; i < count && first < end; i++) {
        size_t rows = (size_t)w[i]->dims[0], span = pmpd_linear_padded_rows(w[i]);
        size_t lo = begin > first ? begin - first : 0, hi = end - first < rows ? end - first : rows;
        if (lo < hi)
            f->rows(w[i], scratch, x, n_tokens, y[i], lo, hi, bits);
        first += span;
    }
}

static void pmpd_linear_group_task(void *ctx, size_t begin, size_t end, unsigned worker)
{
    const pmpd_linear_group_job *job = (const pmpd_linear_group_job *)ctx;
    (void)worker;
    pmpd_linear_group_rows(job->w, job->count, job->scratch, job->x, job->n_tokens, job->y, begin, end, job->bits);
}

PMPD_INTERNAL void pmpd_linear_group(const pmpd_tensor *const *w, size_t count, const float *x, size_t n_tokens,
                                     float *const *y, void *scratch, pmpd_pool *pool, unsigned bits)
{
    pmpd_linear_group_job job;
    size_t i;
    if (!pmpd_linear_group_shared(w, count)) {
        for (i = 0; i < count; i++)
            pmpd_linear(w[i], x, n_tokens, y[i], scratch, pool, bits);
        return;
    }
    /* A group is traced under its first matrix's name. */
    pmpd_trace_label(pmpd_pool_get_trace(pool), w[0]->name, w[0]->name_length, "quantize");
    pmpd_linear_group_prepare(w[0], x, n_tokens, scratch, pool);
    pmpd_trace_label(pmpd_pool_get_trace(pool), w[0]->name, w[0]->name_length, "product");
    job.w = w;
    job.y = y;
    job.count = count;
    job.n_tokens = n_tokens;
    job.x = x;
    job.scratch = scratch;
    job.bits = bits;
    pmpd_pool_run_weighed(pool, pmpd_linear_group_task, &job, pmpd_linear_group_items(w, count), 4,
                          (size_t)w[0]->dims[1] * n_tokens);
}

PMPD_INTERNAL void pmpd_linear(const pmpd_tensor *w, const float *x, size_t n_tokens, float *y, void *scratch,
                               pmpd_pool *pool, unsigned bits)
{
    const pmpd_weight_format *f = pmpd_weight_format_of(w->type);
    if (f->linear) {
        pmpd_trace_label(pmpd_pool_get_trace(pool), w->name, w->name_length, "product");
        f->linear(w, x, n_tokens, y, scratch, pool, bits);
    } else
        pmpd_linear_group(&w, 1, x, n_tokens, &y, scratch, pool, bits);
}

PMPD_INTERNAL void pmpd_linear_row(const pmpd_tensor *w, size_t r, float *out)
{
    pmpd_weight_format_of(w->type)->row(w, r, out);
}

PMPD_INTERNAL uint64_t pmpd_linear_bytes_read(const pmpd_tensor *w, unsigned bits)
{
    const pmpd_weight_format *f = pmpd_weight_format_of(w->type);
    return f->bytes_read ? f->bytes_read(w, bits) : w->size;
}
