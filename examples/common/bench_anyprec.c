/* Any-precision GEMV at real shapes: one parent-4-bit matrix read at 2, 3
 * and 4 bits, weights streamed from RAM (enough copies of the matrix to
 * exceed the cache, visited in turn).  Reports the weight bytes a width
 * reads per second against the measured bandwidth, the speed-up over the
 * parent width, and the two ways of dequantizing: int8 table + integer dot
 * products (the decode kernel) against float table + float FMAs (the
 * prefill kernel run on one vector). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/common/bench.h"
#include "pmpd_impl/exec/pool.h"
#include "pmpd_impl/precision/anyprec.h"

#define BENCH_ANYPREC_SEED 2
#define BENCH_ANYPREC_PARENT 4

typedef struct bench_anyprec_job {
    const pmpd_anyprec_matrix *m;
    unsigned bits;
    int use_float;
    const int8_t *xq;
    const float *xscale;
    const float *x;
    float *y;
} bench_anyprec_job;

static void bench_anyprec_rows(void *ctx, size_t begin, size_t end, unsigned worker)
{
    const bench_anyprec_job *job = (const bench_anyprec_job *)ctx;
    (void)worker;
    if (job->use_float)
        pmpd_anyprec_gemm(job->m, job->bits, job->x, 1, job->m->cols, job->y, job->m->rows, (uint32_t)begin,
                          (uint32_t)end);
    else
        pmpd_anyprec_gemv(job->m, job->bits, job->xq, job->xscale, job->y, (uint32_t)begin, (uint32_t)end);
}

/* Seconds per product, cycling through the copies so each call streams. */
static double bench_anyprec_time(const bench_context *ctx, pmpd_pool *pool, const pmpd_anyprec_matrix *views,
                                 size_t copies, bench_anyprec_job *job)
{
    double start, elapsed, budget = ctx->quick ? 0.05 : 0.4;
    size_t calls = 0;
    start = bench_now_seconds();
    do {
        job->m = &views[calls % copies];
        pmpd_pool_run(pool, bench_anyprec_rows, job, job->m->rows, 4);
        calls++;
        elapsed = bench_now_seconds() - start;
    } while (elapsed < budget || calls < copies);
    return elapsed / (double)calls;
}

static void bench_anyprec_fill(unsigned char *bytes, const pmpd_anyprec_layout *layout, uint32_t rows,
                               uint32_t cols)
{
    uint64_t state = 0x9E3779B97F4A7C15ull;
    size_t i;
    unsigned k;
    uint32_t r;
    for (i = 0; i < layout->total; i++) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        bytes[i] = (unsigned char)(state >> 24);
    }
    memset(bytes, 0, PMPD_ANYPREC_HEADER_BYTES);
    memcpy(bytes, "ANYP", 4);
    bytes[4] = BENCH_ANYPREC_SEED;
    bytes[5] = BENCH_ANYPREC_PARENT;
    memcpy(bytes + 8, &rows, 4);
    memcpy(bytes + 12, &cols, 4);
    for (k = BENCH_ANYPREC_SEED; k <= BENCH_ANYPREC_PARENT; k++)
        for (r = 0; r < rows; r++) {
            float scale = 1e-3f;
            memcpy(bytes + layout->width_offset[k] + (size_t)r * sizeof(float), &scale, sizeof scale);
        }
}

static int bench_anyprec_shape(const bench_context *ctx, pmpd_pool *pool, pmpd_pool *single, uint32_t rows,
                               uint32_t cols)
{
    pmpd_anyprec_layout layout;
    pmpd_anyprec_matrix *views;
    unsigned char *raw, *base;
    size_t copies, i, padded = pmpd_anyprec_padded_cols(cols);
    float *x = (float *)malloc(cols * sizeof(float)), *xscale = (float *)malloc(padded / 32 * sizeof(float));
    float *y = (float *)malloc(rows * sizeof(float));
    int8_t *xq = (int8_t *)malloc(padded);
    double parent_seconds = 0.0;
    bench_anyprec_job job;
    unsigned k;
    char name[96], note[160];
    if (pmpd_anyprec_compute_layout(rows, cols, BENCH_ANYPREC_SEED, BENCH_ANYPREC_PARENT, &layout) != PMPD_OK)
        return -1;
    copies = ctx->stream_bytes / layout.total + 1;
    raw = (unsigned char *)malloc(copies * layout.total + 64);
    views = (pmpd_anyprec_matrix *)malloc(copies * sizeof *views);
    if (!raw || !views || !x || !xscale || !y || !xq) {
        fprintf(stderr, "pmpd-bench: cannot allocate the any-precision matrices\n");
        return -1;
    }
    base = raw + (64 - (size_t)raw % 64);
    bench_anyprec_fill(base, &layout, rows, cols);
    for (i = 0; i < copies; i++) {
        if (i > 0)
            memcpy(base + i * layout.total, base, layout.total);
        if (pmpd_anyprec_view(base + i * layout.total, layout.total, rows, cols, 0, &views[i], NULL) != PMPD_OK)
            return -1;
    }
    for (i = 0; i < cols; i++)
        x[i] = (float)((int)(i % 17) - 8) * 0.125f;
    pmpd_anyprec_quantize_input(x, cols, xq, xscale);
    job.xq = xq;
    job.xscale = xscale;
    job.x = x;
    job.y = y;
    for (k = BENCH_ANYPREC_PARENT; k >= BENCH_ANYPREC_SEED; k--) {
        /* What a k-bit product reads: k planes, the width-k tables and scales. */
        double bytes = (double)k * layout.plane_stride + (double)rows * ((1u << k) + 4);
        double t_one, t_float, t_all;
        job.bits = k;
        job.use_float = 0;
        t_one = bench_anyprec_time(ctx, single, views, copies, &job);
        t_all = bench_anyprec_time(ctx, pool, views, copies, &job);
        job.use_float = 1;
        t_float = bench_anyprec_time(ctx, single, views, copies, &job);
        if (k == BENCH_ANYPREC_PARENT)
            parent_seconds = t_one;
        snprintf(name, sizeof name, "gemv %ux%u %u-bit int8, 1 thread", rows, cols, k);
        snprintf(note, sizeof note, "%.0f%% of 1-thread bandwidth; %.0f us; %.2fx the %d-bit speed", 
                 100.0 * bytes / t_one * 1e-9 / ctx->bw_one_gbs, t_one * 1e6, parent_seconds / t_one,
                 BENCH_ANYPREC_PARENT);
        bench_row(ctx, "anyprec", name, bytes / t_one * 1e-9, "GB/s", note);
        snprintf(name, sizeof name, "gemv %ux%u %u-bit float, 1 thread", rows, cols, k);
        snprintf(note, sizeof note, "%.0f%% of 1-thread bandwidth; int8 path is %.2fx faster",
                 100.0 * bytes / t_float * 1e-9 / ctx->bw_one_gbs, t_float / t_one);
        bench_row(ctx, "anyprec", name, bytes / t_float * 1e-9, "GB/s", note);
        snprintf(name, sizeof name, "gemv %ux%u %u-bit int8, %u threads", rows, cols, k, pmpd_pool_threads(pool));
        snprintf(note, sizeof note, "%.0f%% of all-thread bandwidth; %.0f us",
                 100.0 * bytes / t_all * 1e-9 / ctx->bw_all_gbs, t_all * 1e6);
        bench_row(ctx, "anyprec", name, bytes / t_all * 1e-9, "GB/s", note);
    }
    free(raw);
    free(views);
    free(x);
    free(xscale);
    free(y);
    free(xq);
    return 0;
}

int bench_anyprec(bench_context *ctx)
{
    static const uint32_t shapes[][2] = {{4096, 4096}, {5632, 2048}, {2048, 5632}};
    unsigned threads = ctx->threads > PMPD_MAX_THREADS ? PMPD_MAX_THREADS : (unsigned)ctx->threads;
    size_t pool_bytes = 0, single_bytes = 0, s;
    pmpd_arena arena;
    pmpd_pool *pool = NULL, *single = NULL;
    void *buffer;
    int status = 0;
    if (pmpd_pool_plan(threads, &pool_bytes) != PMPD_OK || pmpd_pool_plan(1, &single_bytes) != PMPD_OK)
        return -1;
    buffer = malloc(pool_bytes + single_bytes + 4 * PMPD_ARENA_ALIGNMENT);
    if (!buffer || pmpd_arena_init(&arena, buffer, pool_bytes + single_bytes + 4 * PMPD_ARENA_ALIGNMENT) != PMPD_OK ||
        pmpd_pool_create(&arena, threads, &pool) != PMPD_OK || pmpd_pool_create(&arena, 1, &single) != PMPD_OK) {
        fprintf(stderr, "pmpd-bench: cannot start the worker pool\n");
        free(buffer);
        return -1;
    }
    bench_section(ctx, "any-precision GEMV (parent 4 bits, seed 2), weights streamed from RAM");
    for (s = 0; s < sizeof shapes / sizeof shapes[0] && status == 0; s++)
        status = bench_anyprec_shape(ctx, pool, single, shapes[s][0], shapes[s][1]);
    pmpd_pool_destroy(pool);
    pmpd_pool_destroy(single);
    free(buffer);
    return status;
}

#undef BENCH_ANYPREC_SEED
#undef BENCH_ANYPREC_PARENT
