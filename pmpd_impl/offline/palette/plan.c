#include "pmpd_impl/offline/palette/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/core/error.h"
#include "pmpd_impl/offline/palette/distortion.h"
#include "pmpd_impl/offline/palette/groups.h"
#include "pmpd_impl/offline/palette/knapsack.h"
#include "pmpd_impl/offline/palette/latency.h"
#include "pmpd_impl/offline/parallel/parallel.h"
#include "pmpd_impl/offline/vq/vq_build.h"
#include "pmpd_impl/weights/format.h"
#include "platform/platform.h"

/* The formats a group can take: those whose size follows from the shape
 * (and nuq's, vq's or tcq's width) and whose encoder takes one matrix (nested
 * weights and W8A8 need more than the matrix). */
static int palette_allowed(pmpd_tensor_type type, unsigned bits)
{
    return type == PMPD_TENSOR_F32 || type == PMPD_TENSOR_F16 || type == PMPD_TENSOR_Q8 || type == PMPD_TENSOR_Q4 ||
           type == PMPD_TENSOR_Q2CB || (type == PMPD_TENSOR_NUQ && bits >= 2 && bits <= 4) ||
           (type == PMPD_TENSOR_VQ2 && pmpd_vq_pair_bits(bits)) || (type == PMPD_TENSOR_TCQ && bits >= 6 && bits <= 16);
}

/* "q4", "nuq3" for nuq at 3 bits, "vq2.5" for vq at 10 quarter bits,
 * "tcq2.75" for tcq at 11 quarter bits. */
static const char *palette_name(pmpd_tensor_type type, unsigned bits, char *buffer, size_t size)
{
    const char *name = pmpd_tensor_type_name(type);
    if (type == PMPD_TENSOR_NUQ)
        snprintf(buffer, size, "nuq%u", bits);
    else if (type == PMPD_TENSOR_VQ2)
        snprintf(buffer, size, "vq%g", bits / 4.0);
    else if (type == PMPD_TENSOR_TCQ)
        snprintf(buffer, size, "tcq%g", bits / 4.0);
    else
        return name ? name : "(unknown)";
    return buffer;
}

/* The width of palette entry i: its palette_bits, else the conversion's
 * nuq_bits, vq_quarter_bits or tcq_quarter_bits, else the format's
 * default; 0 for formats without one. */
static unsigned palette_entry_bits(const pmpd_convert_options *options, const pmpd_tensor_type *list, uint32_t i)
{
    const unsigned given = options->palette && options->palette_bits ? options->palette_bits[i] : 0;
    if (list[i] == PMPD_TENSOR_NUQ)
        return given ? given : options->nuq_bits ? options->nuq_bits : 4;
    if (list[i] == PMPD_TENSOR_VQ2)
        return given ? given : options->vq_quarter_bits ? options->vq_quarter_bits : PMPD_VQ_DEFAULT_QUARTER_BITS;
    if (list[i] == PMPD_TENSOR_TCQ)
        return given ? given : options->tcq_quarter_bits ? options->tcq_quarter_bits : 8;
    return 0;
}

static pmpd_status palette_formats(const pmpd_convert_options *options, pmpd_palette_plan *plan, pmpd_error *err)
{
    static const pmpd_tensor_type defaults[] = {PMPD_TENSOR_Q8, PMPD_TENSOR_Q4, PMPD_TENSOR_Q2CB};
    const pmpd_tensor_type *list = options->palette ? options->palette : defaults;
    uint32_t n = options->palette ? options->n_palette : 3, i, j;
    char name[16];
    if (n == 0 || n > PMPD_PALETTE_MAX_FORMATS)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET, "a palette holds 1 to %u formats",
                              PMPD_PALETTE_MAX_FORMATS);
    for (i = 0; i < n; i++) {
        unsigned bits = palette_entry_bits(options, list, i);
        if (!palette_allowed(list[i], bits))
            return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                                  "format %s cannot be in a palette (f32, f16, q8, q4, q2cb, nuq2-4, vq2-4, tcq1.5-4 can: "
                                  "their size "
                                  "follows from the shape and they encode one matrix at a time)",
                                  palette_name(list[i], bits, name, sizeof name));
        for (j = 0; j < i; j++)
            if (plan->palette[j] == list[i] && plan->palette_bits[j] == bits)
                return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET, "format %s is in the palette twice",
                                      palette_name(list[i], bits, name, sizeof name));
        plan->palette[i] = list[i];
        plan->palette_bits[i] = bits;
        plan->format_options[i] = *options;
        if (list[i] == PMPD_TENSOR_NUQ)
            plan->format_options[i].nuq_bits = bits;
        if (list[i] == PMPD_TENSOR_VQ2)
            plan->format_options[i].vq_quarter_bits = bits;
        if (list[i] == PMPD_TENSOR_TCQ)
            plan->format_options[i].tcq_quarter_bits = bits;
    }
    plan->options = options;
    plan->report.n_palette = n;
    plan->report.palette = plan->palette;
    plan->report.palette_bits = plan->palette_bits;
    return PMPD_OK;
}

/* Measured times of every (group, format), and whether the fastest
 * choices fit the latency budget. */
static pmpd_status palette_latencies(const pmpd_build_model *b, const pmpd_palette_group *groups, uint32_t n_groups,
                                     pmpd_palette_plan *plan, pmpd_error *err)
{
    pmpd_palette_report *r = &plan->report;
    pmpd_palette_timings *timings = (pmpd_palette_timings *)malloc(sizeof *timings);
    uint64_t least = 0;
    uint32_t g, q;
    if (!timings)
        return pmpd_error_set(err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory");
    pmpd_palette_timings_init(timings, b);
    for (g = 0; g < n_groups; g++) {
        uint64_t fastest = UINT64_MAX;
        for (q = 0; q < r->n_palette; q++) {
            uint64_t *ns = &plan->latencies[(size_t)g * r->n_palette + q];
            pmpd_status st = pmpd_palette_group_latency(b, &groups[g], plan->palette[q], &plan->format_options[q],
                                                        timings, ns);
            char name[16];
            if (st != PMPD_OK) {
                free(timings);
                return pmpd_error_set(err, st, PMPD_NO_OFFSET, "cannot time layer %u %s as %s",
                                      (unsigned)groups[g].layer, pmpd_palette_group_name(groups[g].kind),
                                      palette_name(plan->palette[q], plan->palette_bits[q], name, sizeof name));
            }
            fastest = *ns < fastest ? *ns : fastest;
        }
        least += fastest;
    }
    free(timings);
    r->latencies = plan->latencies;
    if ((double)least > r->budget_latency_us * 1000.0)
        return pmpd_error_set(err, PMPD_ERR_BUDGET, PMPD_NO_OFFSET,
                              "a budget of %.4g us per token is below the fastest assignment of this palette on "
                              "this machine, %.1f us (one thread)",
                              r->budget_latency_us, (double)least / 1000.0);
    return PMPD_OK;
}

/* Costs of every (group, format) and the budget; PMPD_ERR_BUDGET when even
 * the cheapest format of every group exceeds it. */
static pmpd_status palette_costs(const pmpd_build_model *b, const pmpd_palette_group *groups, uint32_t n_groups,
                                 double budget_bits, pmpd_palette_plan *plan, pmpd_error *err)
{
    pmpd_palette_report *r = &plan->report;
    uint64_t least = 0;
    uint32_t g, q;
    for (g = 0; g < n_groups; g++) {
        uint64_t cheapest = UINT64_MAX;
        for (q = 0; q < r->n_palette; q++) {
            uint64_t *cost = &plan->costs[(size_t)g * r->n_palette + q];
            pmpd_status st = pmpd_palette_group_bytes(b, &groups[g], plan->palette[q], &plan->format_options[q], cost);
            char name[16];
            if (st != PMPD_OK)
                return pmpd_error_set(err, st, PMPD_NO_OFFSET, "cannot size layer %u %s as %s",
                                      (unsigned)groups[g].layer, pmpd_palette_group_name(groups[g].kind),
                                      palette_name(plan->palette[q], plan->palette_bits[q], name, sizeof name));
            cheapest = *cost < cheapest ? *cost : cheapest;
        }
        least += cheapest;
        r->weights += groups[g].weights;
    }
    r->budget_bits = budget_bits;
    r->budget_bytes = (uint64_t)floor(budget_bits * (double)r->weights / 8.0);
    if (plan->latencies)
        return palette_latencies(b, groups, n_groups, plan, err);
    if (least > r->budget_bytes)
        return pmpd_error_set(err, PMPD_ERR_BUDGET, PMPD_NO_OFFSET,
                              "a budget of %.4g bits per weight (%llu bytes for %llu layer weights) is below the "
                              "cheapest assignment of this palette, %.4f bits per weight (%llu bytes)",
                              budget_bits, (unsigned long long)r->budget_bytes, (unsigned long long)r->weights,
                              8.0 * (double)least / (double)r->weights, (unsigned long long)least);
    return PMPD_OK;
}

/* The errors of every (group, format), with progress: independent jobs
 * spread over up to PALETTE_ERROR_THREADS threads (pmpd_parallel_run; a
 * 968M-weight model takes over half an hour on one; each job holds a
 * group's quantized copy), each writing its own slot, so the result does
 * not depend on the thread count. */
#define PALETTE_ERROR_THREADS 16

/* With options->palette_gaussian the rotated formats' errors are
 * estimated first (pmpd_palette_gaussian_error), once per (palette entry,
 * distinct column count) rather than once per group: estimates[q *
 * n_widths + w] for width widths[w].  Both steps report progress as one
 * count of total. */
#define PALETTE_MAX_WIDTHS (PMPD_PALETTE_GROUP_KINDS * PMPD_PALETTE_GROUP_MAX_TENSORS)

typedef struct palette_error_job {
    const pmpd_build_model *b;
    const pmpd_palette_group *groups;
    const pmpd_convert_options *options;
    pmpd_palette_plan *plan;
    const pmpd_hessian_set *hessians; /* NULL: data-free */
    uint64_t widths[PALETTE_MAX_WIDTHS];
    uint32_t n_widths;
    double *estimates; /* NULL: every error measured */
    double *norms;     /* [group][PMPD_PALETTE_GROUP_MAX_TENSORS]: squared weights, with estimates */
    uint64_t done_before, total;
} palette_error_job;

/* Index of cols in job->widths, UINT32_MAX if it is not there (a Llama
 * layer's matrices have two input widths, dim and hidden; a model with
 * more than PALETTE_MAX_WIDTHS has the others' errors measured). */
static uint32_t palette_width_index(const palette_error_job *job, uint64_t cols)
{
    uint32_t w;
    for (w = 0; w < job->n_widths; w++)
        if (job->widths[w] == cols)
            return w;
    return UINT32_MAX;
}

/* Estimate jobs [begin, end): job i is palette entry i / n_widths on width
 * i % n_widths (entries that are not rotated are skipped). */
static pmpd_status palette_estimate_jobs(void *context, unsigned worker, uint64_t begin, uint64_t end)
{
    const palette_error_job *job = (const palette_error_job *)context;
    uint64_t i;
    (void)worker;
    for (i = begin; i < end; i++) {
        const uint32_t q = (uint32_t)(i / job->n_widths);
        pmpd_status st = PMPD_OK;
        if (pmpd_palette_rotated(job->plan->palette[q]))
            st = pmpd_palette_gaussian_error(job->plan->palette[q], &job->plan->format_options[q],
                                             job->widths[i % job->n_widths], &job->estimates[i]);
        if (st != PMPD_OK)
            return st;
    }
    return PMPD_OK;
}

/* Group g's estimated error under palette entry q into *err: its
 * matrices' estimates weighed by their squared weights.  0 (measure it)
 * when one of its widths has no estimate. */
static int palette_estimated_error(const palette_error_job *job, uint32_t g, uint32_t q, double *err)
{
    const pmpd_palette_group *group = &job->groups[g];
    const double *norm = job->norms + (size_t)g * PMPD_PALETTE_GROUP_MAX_TENSORS;
    double energy = 0.0, total = 0.0;
    uint32_t i;
    for (i = 0; i < group->n_tensors; i++) {
        uint32_t w = palette_width_index(job, job->b->tensors[group->tensors[i]].dims[1]);
        if (w == UINT32_MAX)
            return 0;
        energy += job->estimates[(size_t)q * job->n_widths + w] * norm[i];
        total += norm[i];
    }
    *err = total > 0.0 ? energy / total : 0.0;
    return 1;
}

/* Jobs [begin, end): job i is group i / n in format i % n. */
static pmpd_status palette_error_jobs(void *context, unsigned worker, uint64_t begin, uint64_t end)
{
    const palette_error_job *job = (const palette_error_job *)context;
    const uint32_t n = job->plan->report.n_palette;
    uint64_t i;
    (void)worker;
    for (i = begin; i < end; i++) {
        const uint32_t g = (uint32_t)(i / n), q = (uint32_t)(i % n);
        pmpd_status st = PMPD_OK;
        if (!job->estimates || !pmpd_palette_rotated(job->plan->palette[q]) ||
            !palette_estimated_error(job, g, q, &job->plan->errors[i]))
            st = pmpd_palette_group_error(job->b, &job->groups[g], job->plan->palette[q],
                                          &job->plan->format_options[q], job->hessians, &job->plan->errors[i]);
        if (st != PMPD_OK)
            return st;
    }
    return PMPD_OK;
}

static void palette_error_progress(void *context, uint64_t done)
{
    const palette_error_job *job = (const palette_error_job *)context;
    if (job->options->progress)
        job->options->progress(job->options->progress_context, job->done_before + done, job->total);
}

/* The estimates of every rotated palette entry at every width the groups
 * have, into a malloc'ed job->estimates, and each group's squared weights
 * (once, not once per entry) into a malloc'ed job->norms. */
static pmpd_status palette_estimates(palette_error_job *job, uint32_t n_groups, unsigned threads, pmpd_error *err)
{
    const pmpd_parallel_work work = {palette_estimate_jobs, palette_error_progress, job};
    const uint32_t n = job->plan->report.n_palette;
    uint64_t failed = 0, count;
    uint32_t g, i;
    pmpd_status status;
    for (g = 0; g < n_groups; g++)
        for (i = 0; i < job->groups[g].n_tensors; i++) {
            const uint64_t cols = job->b->tensors[job->groups[g].tensors[i]].dims[1];
            if (palette_width_index(job, cols) == UINT32_MAX && job->n_widths < PALETTE_MAX_WIDTHS)
                job->widths[job->n_widths++] = cols;
        }
    count = (uint64_t)n * job->n_widths;
    job->estimates = (double *)calloc(count ? count : 1, sizeof *job->estimates);
    job->norms = (double *)calloc((size_t)n_groups * PMPD_PALETTE_GROUP_MAX_TENSORS, sizeof *job->norms);
    if (!job->estimates || !job->norms)
        return pmpd_error_set(err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory");
    for (g = 0; g < n_groups; g++)
        pmpd_palette_group_norms(job->b, &job->groups[g], job->norms + (size_t)g * PMPD_PALETTE_GROUP_MAX_TENSORS);
    job->total += count;
    status = pmpd_parallel_run(threads, count, 1, &work, &failed);
    if (status != PMPD_OK && failed >= count)
        return pmpd_error_set(err, status, PMPD_NO_OFFSET, "cannot create a lock for the palette's error runs");
    if (status != PMPD_OK) {
        char name[16];
        const uint32_t q = (uint32_t)(failed / job->n_widths);
        return pmpd_error_set(err, status, PMPD_NO_OFFSET, "cannot estimate %s on Gaussian rows of %llu columns",
                              palette_name(job->plan->palette[q], job->plan->palette_bits[q], name, sizeof name),
                              (unsigned long long)job->widths[failed % job->n_widths]);
    }
    job->done_before = count;
    return PMPD_OK;
}

static pmpd_status palette_errors(const pmpd_build_model *b, const pmpd_palette_group *groups, uint32_t n_groups,
                                  const pmpd_convert_options *options, const pmpd_hessian_set *hessians,
                                  pmpd_palette_plan *plan, pmpd_error *err)
{
    palette_error_job job;
    const pmpd_parallel_work work = {palette_error_jobs, palette_error_progress, &job};
    const uint64_t count = (uint64_t)n_groups * plan->report.n_palette;
    uint64_t failed = 0;
    unsigned threads;
    pmpd_status status;
    memset(&job, 0, sizeof job);
    job.b = b;
    job.groups = groups;
    job.options = options;
    job.plan = plan;
    job.hessians = hessians;
    job.total = count;
    threads = pmpd_parallel_threads(options->threads, count, 1);
    if (threads > PALETTE_ERROR_THREADS)
        threads = PALETTE_ERROR_THREADS;
    if (options->palette_gaussian) {
        status = palette_estimates(&job, n_groups, threads, err);
        if (status != PMPD_OK) {
            free(job.estimates);
            free(job.norms);
            return status;
        }
    }
    /* One job per step: the failure reported is the lowest failed job's. */
    status = pmpd_parallel_run(threads, count, 1, &work, &failed);
    free(job.estimates);
    free(job.norms);
    if (status != PMPD_OK && failed >= count)
        return pmpd_error_set(err, status, PMPD_NO_OFFSET, "cannot create a lock for the palette's error runs");
    if (status != PMPD_OK) {
        const uint32_t n = plan->report.n_palette;
        const uint32_t g = (uint32_t)(failed / n), q = (uint32_t)(failed % n);
        char name[16];
        return pmpd_error_set(err, status, PMPD_NO_OFFSET, "cannot measure layer %u %s as %s",
                              (unsigned)groups[g].layer, pmpd_palette_group_name(groups[g].kind),
                              palette_name(plan->palette[q], plan->palette_bits[q], name, sizeof name));
    }
    return PMPD_OK;
}

#undef PALETTE_ERROR_THREADS
#undef PALETTE_MAX_WIDTHS

/* The knapsack over loss a_g * err and cost bytes; the chosen types into
 * the plan and its report. */
static pmpd_status palette_choose(const pmpd_palette_group *groups, uint32_t n_groups, const pmpd_palette_fit *fits,
                                  pmpd_palette_plan *plan, pmpd_error *err)
{
    pmpd_palette_report *r = &plan->report;
    uint32_t n = r->n_palette, g, q, m;
    uint32_t *count = (uint32_t *)malloc(n_groups * sizeof *count), *choice = (uint32_t *)malloc(n_groups * sizeof *choice);
    double *loss = (double *)malloc((size_t)n_groups * n * sizeof *loss);
    pmpd_knapsack_result result;
    pmpd_knapsack_status ks = PMPD_KNAPSACK_NO_MEMORY;
    if (count && choice && loss) {
        for (g = 0; g < n_groups; g++) {
            count[g] = n;
            for (q = 0; q < n; q++)
                loss[(size_t)g * n + q] = fits[g].slope * plan->errors[(size_t)g * n + q];
        }
        if (plan->latencies)
            ks = pmpd_knapsack_solve(n_groups, count, loss, plan->latencies,
                                     (uint64_t)floor(r->budget_latency_us * 1000.0), 0, choice, &result);
        else
            ks = pmpd_knapsack_solve(n_groups, count, loss, plan->costs, r->budget_bytes, 0, choice, &result);
    }
    if (ks == PMPD_KNAPSACK_OK) {
        uint64_t latency = 0;
        r->bytes = 0;
        r->predicted_kl = result.loss;
        r->cost_unit = result.unit;
        r->exact = result.exact;
        for (g = 0; g < n_groups; g++) {
            pmpd_palette_group_report *out = &plan->groups[g];
            q = choice[g];
            out->type = plan->palette[q];
            out->bits = plan->palette_bits[q];
            out->error = plan->errors[(size_t)g * n + q];
            out->bytes = plan->costs[(size_t)g * n + q];
            out->latency_ns = plan->latencies ? plan->latencies[(size_t)g * n + q] : 0;
            r->bytes += out->bytes;
            latency += out->latency_ns;
            for (m = 0; m < groups[g].n_tensors; m++)
                plan->formats[groups[g].tensors[m]] = q;
        }
        r->bits = 8.0 * (double)r->bytes / (double)r->weights;
        r->latency_us = (double)latency / 1000.0;
    }
    free(count);
    free(choice);
    free(loss);
    if (ks == PMPD_KNAPSACK_INFEASIBLE)
        return plan->latencies
                   ? pmpd_error_set(err, PMPD_ERR_BUDGET, PMPD_NO_OFFSET,
                                    "no assignment fits %.4g us once times are rounded up to %llu ns units",
                                    r->budget_latency_us, (unsigned long long)result.unit)
                   : pmpd_error_set(err, PMPD_ERR_BUDGET, PMPD_NO_OFFSET,
                                    "no assignment fits %llu bytes once costs are rounded up to %llu-byte units",
                                    (unsigned long long)r->budget_bytes, (unsigned long long)result.unit);
    if (ks != PMPD_KNAPSACK_OK)
        return pmpd_error_set(err, ks == PMPD_KNAPSACK_NO_MEMORY ? PMPD_ERR_OUT_OF_MEMORY : PMPD_ERR_INVALID_ARGUMENT,
                              PMPD_NO_OFFSET, "the knapsack failed (a sensitivity that is not finite?)");
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_palette_plan_make(const pmpd_build_model *b, const pmpd_convert_options *options,
                                                 const pmpd_palette_sensitivity_options *sensitivity,
                                                 const pmpd_hessian_set *hessians, pmpd_palette_plan *plan,
                                                 pmpd_error *err)
{
    pmpd_palette_sensitivity_options probe;
    pmpd_palette_group *groups = NULL;
    pmpd_palette_fit *fits = NULL;
    uint32_t n_groups = 0, g, i;
    pmpd_status st;
    int by_latency = options->budget_latency_us != 0.0;
    memset(plan, 0, sizeof *plan);
    if (by_latency ? !(options->budget_latency_us > 0.0) || !isfinite(options->budget_latency_us) ||
                         options->budget_bits != 0.0
                   : !(options->budget_bits > 0.0) || !isfinite(options->budget_bits))
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                              "the budget must be a positive number of bits or of microseconds (not both)");
    st = palette_formats(options, plan, err);
    if (st != PMPD_OK)
        return st;
    st = pmpd_palette_groups(b, &groups, &n_groups);
    if (st != PMPD_OK)
        return pmpd_error_set(err, st, PMPD_NO_OFFSET, "cannot find the layers' matrices (f32 q/k/v, output, gate/up, down)");
    plan->n_tensors = b->n_tensors;
    plan->formats = (uint32_t *)malloc((b->n_tensors + 1) * sizeof *plan->formats);
    plan->groups = (pmpd_palette_group_report *)calloc(n_groups, sizeof *plan->groups);
    plan->errors = (double *)calloc((size_t)n_groups * plan->report.n_palette, sizeof *plan->errors);
    plan->costs = (uint64_t *)calloc((size_t)n_groups * plan->report.n_palette, sizeof *plan->costs);
    if (by_latency)
        plan->latencies = (uint64_t *)calloc((size_t)n_groups * plan->report.n_palette, sizeof *plan->latencies);
    plan->report.budget_latency_us = options->budget_latency_us;
    plan->report.gaussian_errors = options->palette_gaussian ? 1 : 0;
    plan->report.ldlq = hessians ? 1 : 0;
    fits = (pmpd_palette_fit *)calloc(n_groups, sizeof *fits);
    if (!plan->formats || !plan->groups || !plan->errors || !plan->costs || !fits || (by_latency && !plan->latencies)) {
        free(groups);
        free(fits);
        return pmpd_error_set(err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory");
    }
    for (i = 0; i < b->n_tensors; i++)
        plan->formats[i] = UINT32_MAX;
    plan->report.n_groups = n_groups;
    plan->report.groups = plan->groups;
    plan->report.errors = plan->errors;
    plan->report.costs = plan->costs;
    st = palette_costs(b, groups, n_groups, options->budget_bits, plan, err);
    if (st == PMPD_OK) {
        if (sensitivity) {
            probe = *sensitivity;
        } else {
            int cpus = pmpd_platform_cpu_count();
            pmpd_palette_sensitivity_defaults(&probe);
            probe.threads = options->threads ? options->threads : cpus > 0 ? (unsigned)cpus : 1;
            if (probe.threads > pmpd_max_threads())
                probe.threads = pmpd_max_threads();
            if (options->palette_sequences)
                probe.n_sequences = options->palette_sequences;
            if (options->palette_length)
                probe.length = options->palette_length;
            probe.progress = options->progress;
            probe.progress_context = options->progress_context;
        }
        /* Flat: a group weighs by its share of the weights, so the loss is
         * the mean relative error per weight (no model run). */
        if (options->palette_flat)
            for (g = 0; g < n_groups; g++) {
                fits[g].slope = (double)groups[g].weights / (double)plan->report.weights;
                fits[g].r2 = fits[g].ratio = 1.0;
            }
        else
            st = pmpd_palette_sensitivity(b, groups, n_groups, &probe, fits, err);
    }
    if (st == PMPD_OK)
        st = palette_errors(b, groups, n_groups, options, hessians, plan, err);
    for (g = 0; st == PMPD_OK && g < n_groups; g++) {
        plan->groups[g].layer = groups[g].layer;
        plan->groups[g].group = pmpd_palette_group_name(groups[g].kind);
        plan->groups[g].sensitivity = fits[g].slope;
        plan->groups[g].fit_r2 = fits[g].r2;
        plan->groups[g].fit_ratio = fits[g].ratio;
        plan->groups[g].weights = groups[g].weights;
    }
    if (st == PMPD_OK)
        st = palette_choose(groups, n_groups, fits, plan, err);
    free(groups);
    free(fits);
    return st;
}

PMPD_INTERNAL uint32_t pmpd_palette_plan_type(const pmpd_palette_plan *plan, const pmpd_build_model *b,
                                              const pmpd_build_tensor *t)
{
    size_t index = (size_t)(t - b->tensors);
    if (t->n_dims != 2)
        return PMPD_TENSOR_F32;
    if (index < plan->n_tensors && plan->formats[index] != UINT32_MAX)
        return (uint32_t)plan->palette[plan->formats[index]];
    return PMPD_TENSOR_Q8;
}

PMPD_INTERNAL const pmpd_convert_options *pmpd_palette_plan_options(const pmpd_palette_plan *plan,
                                                                    const pmpd_build_model *b,
                                                                    const pmpd_build_tensor *t)
{
    size_t index = (size_t)(t - b->tensors);
    if (index < plan->n_tensors && plan->formats[index] != UINT32_MAX)
        return &plan->format_options[plan->formats[index]];
    return plan->options;
}

PMPD_INTERNAL void pmpd_palette_plan_free(pmpd_palette_plan *plan)
{
    free(plan->formats);
    free(plan->groups);
    free(plan->errors);
    free(plan->costs);
    free(plan->latencies);
    memset(plan, 0, sizeof *plan);
}
