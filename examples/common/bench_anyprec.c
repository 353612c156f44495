/* Any-precision GEMV at real shapes: one parent-4-bit matrix read at 2, 3
 * and 4 bits, weights streamed from RAM (enough copies of the matrix to
 * exceed the cache, visited in turn).  Reports the weight bytes a width
 * reads per second against the measured bandwidth, its time against plain
 * q4's GEMV of the same shape in the same run (with --gemv, only these),
 * the speed-up over the parent width, and the two ways of dequantizing: int8 table + integer dot
 * products (the decode kernel) against float table + float FMAs (the
 * prefill kernel run on one vector).  Then whole-model decode speed on a
 * synthetic model with real shapes (dim 2048, hidden 5632, 22 layers,
 * random nested weights) at each uniform width and under a static
 * schedule, with one thread and with all. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/common/bench.h"
#include "examples/common/bench_anyprec_q4.h"
#include "pmpd_impl/offline/precision/anyprec_build.h"
#include "pmpd_impl/weights/anyprec/anyprec.h"
#include "pmpd_impl/precision/learned_scheduler.h"

#define BENCH_ANYPREC_SEED 2
#define BENCH_ANYPREC_PARENT 4

typedef struct bench_anyprec_job {
    const pmpd_anyprec_matrix *m;
    const pmpd_anyprec_matrix *views; /* the streamed copies */
    pmpd_pool *pool;
    unsigned bits;
    int8_t *xq;
    float *xscale;
    const float *x;
    float *y;
    uint32_t cached_rows; /* rows whose parent-width bytes fit in ctx->cached_bytes */
} bench_anyprec_job;

static void bench_anyprec_rows(void *ctx, size_t begin, size_t end, unsigned worker)
{
    const bench_anyprec_job *job = (const bench_anyprec_job *)ctx;
    (void)worker;
    pmpd_anyprec_gemv(job->m, job->bits, job->xq, job->xscale, job->y, (uint32_t)begin, (uint32_t)end);
}

/* One product as the model runs it: quantize the activations (the int8
 * path), split the rows over the pool. */
static void bench_anyprec_product(void *raw, size_t copy)
{
    bench_anyprec_job *job = (bench_anyprec_job *)raw;
    job->m = &job->views[copy];
    pmpd_anyprec_quantize_input(job->x, job->m->cols, job->xq, job->xscale);
    pmpd_pool_run(job->pool, bench_anyprec_rows, job, job->m->rows, 4);
}

/* The GEMV alone on the rows job->cached_rows of the first copy, the
 * activations quantized once: the kernel's ceiling with its bytes in L2. */
static void bench_anyprec_cached_product(void *raw, size_t copy)
{
    const bench_anyprec_job *job = (const bench_anyprec_job *)raw;
    (void)copy;
    pmpd_anyprec_gemv(&job->views[0], job->bits, job->xq, job->xscale, job->y, 0, job->cached_rows);
}

/* Seconds per product, cycling through the copies so each call streams. */
static double bench_anyprec_time(const bench_context *ctx, pmpd_pool *pool, size_t copies, bench_anyprec_job *job)
{
    job->pool = pool;
    return bench_seconds_per_call(ctx, 0.4, 0.05, copies, bench_anyprec_product, job);
}

static void bench_anyprec_fill(unsigned char *bytes, const pmpd_anyprec_layout *layout, uint32_t rows,
                               uint32_t cols)
{
    unsigned k;
    uint32_t r;
    size_t i;
    bench_random_bytes(bytes, layout->total, 0x9E3779B97F4A7C15ull);
    memset(bytes, 0, PMPD_ANYPREC_HEADER_BYTES);
    memcpy(bytes, "ANYP", 4);
    bytes[4] = BENCH_ANYPREC_SEED;
    bytes[5] = BENCH_ANYPREC_PARENT;
    bytes[6] = PMPD_ANYPREC_VERSION;
    memcpy(bytes + 8, &rows, 4);
    memcpy(bytes + 12, &cols, 4);
    for (k = BENCH_ANYPREC_SEED; k <= BENCH_ANYPREC_PARENT; k++) {
        for (r = 0; r < rows; r++) {
            float scale = 1e-3f, offset = -64e-3f;
            memcpy(bytes + layout->width_offset[k] + (size_t)r * sizeof(float), &scale, sizeof scale);
            memcpy(bytes + layout->offset_offset[k] + (size_t)r * sizeof(float), &offset, sizeof offset);
        }
        for (i = 0; i < ((size_t)rows << k); i++)
            bytes[layout->table_offset[k] + i] &= (unsigned char)pmpd_anyprec_table_max(k);
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
    double parent_seconds = 0.0, q4_one, q4_all;
    bench_anyprec_job job;
    unsigned k;
    char name[96], note[160];
    if (pmpd_anyprec_compute_layout(rows, cols, BENCH_ANYPREC_SEED, BENCH_ANYPREC_PARENT, PMPD_ANYPREC_VERSION,
                                    &layout) != PMPD_OK ||
        bench_anyprec_q4_seconds(ctx, single, pool, rows, cols, &q4_one, &q4_all) != 0)
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
    job.views = views;
    job.xq = xq;
    job.xscale = xscale;
    job.x = x;
    job.y = y;
    snprintf(name, sizeof name, "q4 GEMV %ux%u, 1 / %u threads", rows, cols, pmpd_pool_threads(pool));
    snprintf(note, sizeof note, "the reference: %.0f us / %.0f us", q4_one * 1e6, q4_all * 1e6);
    bench_row(ctx, "anyprec", name, q4_one * 1e6, "us", note);
    for (k = BENCH_ANYPREC_PARENT; k >= BENCH_ANYPREC_SEED; k--) {
        /* What a k-bit product reads: the slices of planes 0..k-1, the
         * width-k tables, scales and offsets. */
        size_t slices_end = k < BENCH_ANYPREC_PARENT ? layout.slice_offset[k] : layout.width_offset[BENCH_ANYPREC_SEED];
        double bytes = (double)(slices_end - PMPD_ANYPREC_HEADER_BYTES) + (double)rows * ((1u << k) + 8);
        double t_one, t_all;
        job.bits = k;
        t_one = bench_anyprec_time(ctx, single, copies, &job);
        t_all = bench_anyprec_time(ctx, pool, copies, &job);
        if (k == BENCH_ANYPREC_PARENT)
            parent_seconds = t_one;
        snprintf(name, sizeof name, "gemv %ux%u %u-bit int8, 1 thread", rows, cols, k);
        snprintf(note, sizeof note, "%.0f%% of 1-thread bw; %.0f us = %.2fx q4's time; %.2fx the %d-bit speed",
                 100.0 * bytes / t_one * 1e-9 / ctx->bw_one_gbs, t_one * 1e6, t_one / q4_one, parent_seconds / t_one,
                 BENCH_ANYPREC_PARENT);
        bench_row(ctx, "anyprec", name, bytes / t_one * 1e-9, "GB/s", note);
        snprintf(name, sizeof name, "gemv %ux%u %u-bit int8, %u threads", rows, cols, k, pmpd_pool_threads(pool));
        snprintf(note, sizeof note, "%.0f%% of all-thread bw; %.0f us = %.2fx q4's time",
                 100.0 * bytes / t_all * 1e-9 / ctx->bw_all_gbs, t_all * 1e6, t_all / q4_all);
        bench_row(ctx, "anyprec", name, bytes / t_all * 1e-9, "GB/s", note);
    }
    /* Each width's ceiling with the bytes in L2, in weights per second: the
     * kernels' work is per weight (one lookup and one multiply-add each at
     * every width), so below some width a core decodes slower than RAM
     * delivers.  The rows whose parent-width planes fill ctx->cached_bytes
     * (half the L2), so every width's bytes stay in L2. */
    job.cached_rows = (uint32_t)((ctx->cached_bytes / (padded * BENCH_ANYPREC_PARENT / 8)) / PMPD_ANYPREC_ROW_BLOCK *
                                 PMPD_ANYPREC_ROW_BLOCK);
    job.cached_rows = job.cached_rows < PMPD_ANYPREC_ROW_BLOCK ? PMPD_ANYPREC_ROW_BLOCK
                      : job.cached_rows > rows                  ? rows
                                                                : job.cached_rows;
    pmpd_anyprec_quantize_input(x, cols, xq, xscale);
    for (k = BENCH_ANYPREC_PARENT; k >= BENCH_ANYPREC_SEED; k--) {
        double t;
        job.bits = k;
        t = bench_seconds_per_call(ctx, 0.3, 0.05, 1, bench_anyprec_cached_product, &job);
        snprintf(name, sizeof name, "gemv %ux%u %u-bit in L2", job.cached_rows, cols, k);
        snprintf(note, sizeof note, "kernel alone, 1 thread: %.1f GB/s of weights",
                 (double)job.cached_rows * cols * k / 8.0 / t * 1e-9);
        bench_row(ctx, "anyprec", name, (double)job.cached_rows * cols / t * 1e-9, "G weights/s", note);
    }
    free(raw);
    free(views);
    free(x);
    free(xscale);
    free(y);
    free(xq);
    return 0;
}

/* A synthetic Llama with random nested weights at real shapes. */
static pmpd_status bench_anyprec_model_build(const pmpd_model_info *info, pmpd_build_model *b)
{
    static const char *const names[7] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up",
                                         "ffn_down"};
    const uint64_t kv = (uint64_t)info->n_kv_heads * info->head_dim;
    const uint64_t rows[7] = {info->dim, kv, kv, info->dim, info->hidden_dim, info->hidden_dim, info->dim};
    const uint64_t cols[7] = {info->dim, info->dim, info->dim, info->dim, info->dim, info->dim, info->hidden_dim};
    uint64_t dims[2];
    float *values = (float *)malloc((size_t)info->vocab_size * info->dim * sizeof(float));
    pmpd_status st = values ? PMPD_OK : PMPD_ERR_OUT_OF_MEMORY;
    uint32_t layer, i;
    pmpd_build_init(b);
    b->info = *info;
    for (i = 0; values && i < info->vocab_size * info->dim; i++)
        values[i] = (float)((int)(i * 2654435761u >> 24) - 128) / 512.0f;
    dims[0] = info->vocab_size;
    dims[1] = info->dim;
    if (st == PMPD_OK)
        st = pmpd_build_add_f32(b, "token_embd.weight", 2, dims, values);
    for (i = 0; values && i < info->hidden_dim; i++)
        values[i] = 1.0f;
    if (st == PMPD_OK)
        st = pmpd_build_add_f32(b, "output_norm.weight", 1, dims + 1, values);
    for (layer = 0; layer < info->n_layers && st == PMPD_OK; layer++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%u.attn_norm.weight", (unsigned)layer);
        st = pmpd_build_add_f32(b, name, 1, dims + 1, values);
        snprintf(name, sizeof name, "blk.%u.ffn_norm.weight", (unsigned)layer);
        if (st == PMPD_OK)
            st = pmpd_build_add_f32(b, name, 1, dims + 1, values);
        for (i = 0; i < 7 && st == PMPD_OK; i++) {
            pmpd_anyprec_layout layout;
            unsigned char *bytes;
            snprintf(name, sizeof name, "blk.%u.%s.weight", (unsigned)layer, names[i]);
            st = pmpd_anyprec_compute_layout(rows[i], cols[i], BENCH_ANYPREC_SEED, BENCH_ANYPREC_PARENT, PMPD_ANYPREC_VERSION,
                                             &layout);
            bytes = st == PMPD_OK ? (unsigned char *)malloc(layout.total) : NULL;
            if (st == PMPD_OK && !bytes)
                st = PMPD_ERR_OUT_OF_MEMORY;
            if (st == PMPD_OK) {
                bench_anyprec_fill(bytes, &layout, (uint32_t)rows[i], (uint32_t)cols[i]);
                st = pmpd_anyprec_build_add(b, name, rows[i], cols[i], bytes, layout.total);
            }
            free(bytes);
        }
    }
    free(values);
    return st;
}

/* Decode tokens per second for one precision schedule. */
static double bench_anyprec_decode_rate(const bench_context *ctx, const pmpd_model *model, unsigned threads,
                                        const pmpd_precision_schedule *schedule, uint32_t n_decode)
{
    static const int32_t prompt[8] = {1, 5, 9, 13, 17, 21, 25, 29};
    pmpd_session_config config;
    pmpd_session *s;
    void *block;
    double start, rate = 0.0;
    uint32_t t;
    (void)ctx;
    pmpd_session_config_init(&config);
    config.context_length = 8 + n_decode + 1;
    config.n_threads = threads;
    s = bench_session_open(model, &config, &block);
    if (s && pmpd_session_set_precision(s, schedule) == PMPD_OK &&
        pmpd_session_prefill(s, prompt, 8, NULL) == PMPD_OK) {
        start = bench_now_seconds();
        for (t = 0; t < n_decode; t++)
            pmpd_session_decode(s, (int32_t)(t % 500) + 3, NULL);
        rate = n_decode / (bench_now_seconds() - start);
    }
    pmpd_session_destroy(s);
    free(block);
    return rate;
}

/* The learned scheduler's decision after an 8-token prefill (random
 * classifier weights of the default size), against one decode step. */
static void bench_anyprec_learned_cost(const bench_context *ctx, const pmpd_model *model, double decode_rate,
                                       uint32_t output_length)
{
    static const int32_t prompt[8] = {1, 5, 9, 13, 17, 21, 25, 29};
    static unsigned char scratch_memory[(size_t)1 << 20];
    const uint32_t d = 2 * pmpd_model_get_info(model)->head_dim, m = 4, h = 32, n = 4, pairs = 2;
    const size_t block = pmpd_learned_block_floats(d, m, h, n), header = 4 * PMPD_LEARNED_HEADER_WORDS + 8 * pairs;
    const uint32_t fields[PMPD_LEARNED_HEADER_WORDS + 4] = {pairs, n, d, m, h, output_length, 4, 3, 3, 2};
    size_t size = header + pairs * block * sizeof(float), i, reps = ctx->quick ? 10 : 200;
    unsigned char *weights = (unsigned char *)malloc(size);
    pmpd_session *s = NULL;
    pmpd_arena scratch;
    void *session_block = NULL;
    double start, seconds;
    char note[160];
    if (!weights || !(s = bench_session_open(model, NULL, &session_block))) {
        free(weights);
        return;
    }
    memcpy(weights, fields, sizeof fields);
    for (i = 0; i < pairs * block; i++) {
        float w = (float)((int)((i * 2654435761u) >> 20 & 255) - 128) / 1024.0f;
        memcpy(weights + header + i * sizeof(float), &w, sizeof w);
    }
    pmpd_arena_init(&scratch, scratch_memory, sizeof scratch_memory);
    if (pmpd_session_prefill(s, prompt, 8, NULL) == PMPD_OK) {
        start = bench_now_seconds();
        for (i = 0; i < reps; i++)
            pmpd_session_apply_learned_scheduler(s, weights, size, &scratch);
        seconds = (bench_now_seconds() - start) / (double)reps;
        snprintf(note, sizeof note, "%zu arena bytes; %.4f%% of one 4-bit decode step", scratch.high_water,
                 100.0 * seconds * decode_rate);
        bench_row(ctx, "anyprec-model", "learned scheduler decision per prompt", seconds * 1e6, "us", note);
    }
    pmpd_session_destroy(s);
    free(session_block);
    free(weights);
}

static double bench_anyprec_average_bits(const pmpd_precision_schedule *schedule, uint32_t n_decode)
{
    uint32_t step, sum = 0;
    for (step = 0; step < n_decode; step++)
        sum += pmpd_precision_schedule_bits_at(schedule, step);
    return (double)sum / n_decode;
}

static int bench_anyprec_model(bench_context *ctx)
{
    static const char *const labels[4] = {"4-bit", "3-bit", "2-bit", "static 4/3/2"};
    pmpd_model_info info;
    pmpd_build_model b;
    example_model synthetic;
    pmpd_precision_schedule schedules[4];
    size_t layer_weights;
    const uint32_t n_decode = ctx->quick ? 6 : 24;
    unsigned k, threads[2];
    char name[96], note[160];
    size_t s, t;
    bench_synthetic_info(&info, ctx->quick ? 2 : 22, 512);
    layer_weights = (size_t)info.dim * info.dim * 2 + (size_t)info.dim * info.n_kv_heads * info.head_dim * 2 +
                    (size_t)info.dim * info.hidden_dim * 3;
    if (bench_model_open(bench_anyprec_model_build(&info, &b), &b, "any-precision", &synthetic) != 0)
        return -1;
    for (k = 0; k < 3; k++)
        pmpd_precision_schedule_uniform(&schedules[k], BENCH_ANYPREC_PARENT, BENCH_ANYPREC_PARENT - k);
    /* The static shape PMPD finds: thirds of the output at 4, 3 and 2 bits. */
    schedules[3] = schedules[0];
    schedules[3].n_widths = 3;
    schedules[3].decode_bits[1] = 3;
    schedules[3].decode_bits[2] = 2;
    schedules[3].from_step[1] = n_decode / 3;
    schedules[3].from_step[2] = 2 * n_decode / 3;
    threads[0] = 1;
    threads[1] = bench_pool_threads(ctx);
    snprintf(name, sizeof name, "synthetic model: dim %u, hidden %u, %u layers, %.0f M nested weights", info.dim,
             info.hidden_dim, info.n_layers, (double)layer_weights * info.n_layers * 1e-6);
    bench_section(ctx, name);
    for (t = 0; t < 2; t++) {
        double parent_rate = 0.0;
        for (s = 0; s < 4; s++) {
            double rate = bench_anyprec_decode_rate(ctx, synthetic.model, threads[t], &schedules[s], n_decode);
            double bits = bench_anyprec_average_bits(&schedules[s], n_decode);
            double gbs = rate * bits / 8.0 * (double)layer_weights * info.n_layers * 1e-9;
            if (s == 0)
                parent_rate = rate;
            snprintf(name, sizeof name, "decode %s, %u thread%s", labels[s], threads[t], threads[t] > 1 ? "s" : "");
            snprintf(note, sizeof note,
                     "%.2f avg bits; %.2fx the 4-bit rate (ideal %.2fx); planes at %.1f GB/s = %.0f%% of bandwidth",
                     bits, parent_rate > 0 ? rate / parent_rate : 0.0, 4.0 / bits, gbs,
                     100.0 * gbs / (t == 0 ? ctx->bw_one_gbs : ctx->bw_all_gbs));
            bench_row(ctx, "anyprec-model", name, rate, "tokens/s", note);
        }
        if (t == 0)
            bench_anyprec_learned_cost(ctx, synthetic.model, parent_rate, n_decode);
    }
    example_model_close(&synthetic);
    return 0;
}

int bench_anyprec(bench_context *ctx)
{
    /* The 1.1B model's shapes, and pycode21M's classifier (384 columns: a
     * whole superblock and half of one, shared by two row blocks). */
    static const uint32_t shapes[][2] = {{4096, 4096}, {5632, 2048}, {2048, 5632}, {32000, 384}};
    bench_pools pools;
    size_t s;
    int status = 0;
    if (bench_pools_start(ctx, &pools) != 0)
        return -1;
    bench_section(ctx, "any-precision GEMV (parent 4 bits, seed 2), weights streamed from RAM");
    for (s = 0; s < sizeof shapes / sizeof shapes[0] && status == 0; s++)
        status = bench_anyprec_shape(ctx, pools.all, pools.single, shapes[s][0], shapes[s][1]);
    bench_pools_stop(&pools);
    return status == 0 && !ctx->gemv_only ? bench_anyprec_model(ctx) : status;
}

#undef BENCH_ANYPREC_SEED
#undef BENCH_ANYPREC_PARENT
