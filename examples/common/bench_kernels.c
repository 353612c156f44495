/* Group-quantized kernels at real shapes (pmpd_impl/kernels): GEMV of one
 * token with the weights streamed from RAM (enough copies of the matrix to
 * exceed the cache, visited in turn) as GB/s of weight bytes against the
 * measured bandwidth, and GEMM at 64 and 512 tokens as GFLOP/s (2 per
 * multiply-add, activation quantization included), then decode and
 * prefill tokens/s of a synthetic model of real shape per type.  f32 is the float
 * linear layer of the model (pmpd_linear); the scalar reference kernel of
 * each format runs beside the SIMD one.  Weight values are random valid
 * bytes: speed does not depend on them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/common/bench.h"
#include "pmpd_impl/weights/grouped/qmatmul.h"
#include "pmpd_impl/model/linear.h"

#define BENCH_KERNELS_MAX_TOTAL ((size_t)3 << 30)

typedef struct bench_kernels_job {
    pmpd_tensor tensor;  /* f32 */
    pmpd_qmatrix w;      /* quantized */
    const float *x;
    size_t n_tokens;
    pmpd_qact *act;
    float *y;
    int scalar;
    const unsigned char *base; /* the streamed copies, stride bytes apart */
    size_t stride;
    pmpd_pool *pool;
} bench_kernels_job;

static void bench_kernels_rows(void *ctx, size_t begin, size_t end, unsigned worker)
{
    const bench_kernels_job *job = (const bench_kernels_job *)ctx;
    (void)worker;
    if (job->scalar)
        pmpd_qmatmul_scalar(&job->w, job->act, begin, end, job->y, job->w.rows);
    else
        pmpd_qmatmul(&job->w, job->act, begin, end, job->y, job->w.rows);
}

/* One product as the model runs it: quantize the activations, split the
 * rows over the pool. */
static void bench_kernels_product(bench_kernels_job *job, pmpd_pool *pool)
{
    if (job->tensor.type == PMPD_TENSOR_F32) {
        pmpd_linear(&job->tensor, job->x, job->n_tokens, job->y, NULL, pool, 0);
        return;
    }
    pmpd_qact_quantize(job->act, job->x, job->w.cols, job->n_tokens, job->w.cols);
    pmpd_pool_run(pool, bench_kernels_rows, job, job->w.rows, PMPD_QROWS);
}

static void bench_kernels_product_of_copy(void *raw, size_t copy)
{
    bench_kernels_job *job = (bench_kernels_job *)raw;
    const unsigned char *data = job->base + copy * job->stride;
    job->w.data = data;
    job->tensor.data = data;
    bench_kernels_product(job, job->pool);
}

/* The kernel alone on copy 0 (copy is ignored), activations already quantized. */
static void bench_kernels_rows_cached(void *raw, size_t copy)
{
    bench_kernels_job *job = (bench_kernels_job *)raw;
    (void)copy;
    job->w.data = job->base;
    pmpd_pool_run(job->pool, bench_kernels_rows, job, job->w.rows, PMPD_QROWS);
}

/* Seconds per product, cycling through the copies. */
static double bench_kernels_time(const bench_context *ctx, pmpd_pool *pool, bench_kernels_job *job, size_t copies,
                                 double budget)
{
    job->pool = pool;
    return bench_seconds_per_call(ctx, budget, budget * 0.25, copies, bench_kernels_product_of_copy, job);
}

/* Random bytes that are a valid tensor of the type: f32 small normals-ish,
 * quantized blocks with modest f16 scales (q8 avoids -128). */
static void bench_kernels_fill(uint32_t type, unsigned char *p, size_t bytes)
{
    size_t i, header = pmpd_qformat_is_quantized(type) ? pmpd_qformat_header_bytes(type) : 0;
    bench_random_bytes(p, bytes, 0x243F6A8885A308D3ull);
    if (type == PMPD_TENSOR_F32) {
        for (i = 0; i + 4 <= bytes; i += 4) {
            float v = (float)(int)(p[i] - 128) / 4096.0f;
            memcpy(p + i, &v, sizeof v);
        }
        return;
    }
    for (i = 0; i < header; i++)
        p[i] = (unsigned char)(signed char)((int)(p[i] % 129) - 64);
    for (i = header; i < bytes; i += pmpd_qformat_block_bytes(type)) {
        size_t j;
        for (j = 0; j < PMPD_QROWS; j++) {
            p[i + 2 * j] = 0x00;
            p[i + 2 * j + 1] = 0x20; /* 2^-7 */
        }
        if (type == PMPD_TENSOR_Q8)
            for (j = 2 * PMPD_QROWS; j < pmpd_qformat_block_bytes(type); j++)
                if (p[i + j] == 0x80)
                    p[i + j] = 0x81;
    }
}

/* With --gemv: the kernel's own ceiling, the first rows of the matrix that
 * fit in ctx->cached_bytes (half the L2) computed over and over by one
 * thread. */
static void bench_kernels_cached(bench_context *ctx, pmpd_pool *single, bench_kernels_job *job, size_t bytes)
{
    size_t rows = job->w.rows, sub = ctx->cached_bytes / (bytes / rows) / PMPD_QROWS * PMPD_QROWS;
    double seconds, gbs;
    char name[96];
    if (sub < PMPD_QROWS)
        sub = PMPD_QROWS;
    if (sub > rows)
        sub = rows;
    job->w.rows = sub;
    job->pool = single;
    pmpd_qact_quantize(job->act, job->x, job->w.cols, 1, job->w.cols);
    seconds = bench_seconds_per_call(ctx, 0.5, 0.1, 1, bench_kernels_rows_cached, job);
    gbs = (double)bytes * (double)sub / (double)rows / seconds * 1e-9;
    job->w.rows = rows;
    snprintf(name, sizeof name, "%s GEMV %zux%zu in L2", pmpd_tensor_type_name((pmpd_tensor_type)job->w.type), sub, job->w.cols);
    bench_row(ctx, "kernels", name, gbs, "GB/s", "kernel alone, 1 thread");
}

static int bench_kernels_shape(bench_context *ctx, pmpd_pool *pool, pmpd_pool *single, uint32_t type, size_t rows,
                               size_t cols)
{
    static const size_t token_counts[2] = {64, 512};
    bench_kernels_job job;
    uint64_t bytes64 = (uint64_t)rows * cols * 4;
    size_t bytes, stride, copies, i, act_bytes;
    unsigned char *weights;
    void *act_buffer;
    float *x, *y;
    pmpd_arena arena;
    pmpd_qact act;
    char name[96], note[160];
    double seconds, gbs, scalar_gbs = 0.0;
    if (type != PMPD_TENSOR_F32 && pmpd_qformat_tensor_bytes(type, rows, cols, &bytes64) != PMPD_OK)
        return -1;
    bytes = (size_t)bytes64;
    stride = (bytes + 4095) & ~(size_t)4095;
    copies = ctx->stream_bytes / stride + 1;
    if (copies * stride > BENCH_KERNELS_MAX_TOTAL)
        copies = BENCH_KERNELS_MAX_TOTAL / stride;
    if (pmpd_qact_bytes(512, cols, &act_bytes) != PMPD_OK)
        return -1;
    weights = (unsigned char *)malloc(copies * stride);
    act_buffer = malloc(act_bytes + PMPD_ARENA_ALIGNMENT);
    x = (float *)malloc(512 * cols * sizeof(float));
    y = (float *)malloc(512 * rows * sizeof(float));
    if (!weights || !act_buffer || !x || !y || pmpd_arena_init(&arena, act_buffer, act_bytes + PMPD_ARENA_ALIGNMENT) ||
        pmpd_qact_alloc(&arena, 512, cols, &act) != PMPD_OK) {
        fprintf(stderr, "pmpd-bench: cannot allocate %zu MiB for the kernel benchmark\n", (copies * stride) >> 20);
        free(weights);
        free(act_buffer);
        free(x);
        free(y);
        return -1;
    }
    bench_kernels_fill(type, weights, bytes);
    for (i = 1; i < copies; i++)
        memcpy(weights + i * stride, weights, bytes);
    for (i = 0; i < 512 * cols; i++)
        x[i] = (float)((int)(i * 2654435761u % 2001) - 1000) / 1000.0f;
    memset(&job, 0, sizeof job);
    job.tensor.type = type;
    job.tensor.n_dims = 2;
    job.tensor.dims[0] = rows;
    job.tensor.dims[1] = cols;
    job.tensor.size = bytes;
    job.w.type = type;
    job.w.rows = rows;
    job.w.cols = cols;
    job.x = x;
    job.y = y;
    job.act = &act;
    job.n_tokens = 1;
    job.base = weights;
    job.stride = stride;

    if (type != PMPD_TENSOR_F32 && !ctx->gemv_only) {
        job.scalar = 1;
        scalar_gbs = (double)bytes / bench_kernels_time(ctx, single, &job, 1, 0.2) * 1e-9;
        job.scalar = 0;
    }
    seconds = bench_kernels_time(ctx, single, &job, copies, 1.0);
    gbs = (double)bytes / seconds * 1e-9;
    snprintf(name, sizeof name, "%s GEMV %zux%zu 1 thread", pmpd_tensor_type_name((pmpd_tensor_type)type), rows, cols);
    if (type == PMPD_TENSOR_F32 || ctx->gemv_only)
        snprintf(note, sizeof note, "%.0f%% of 1-thread bw; %.1f us", 100.0 * gbs / ctx->bw_one_gbs, seconds * 1e6);
    else
        snprintf(note, sizeof note, "%.0f%% of 1-thread bw; %.1f us; scalar %.2f GB/s", 100.0 * gbs / ctx->bw_one_gbs,
                 seconds * 1e6, scalar_gbs);
    bench_row(ctx, "kernels", name, gbs, "GB/s", note);
    if (ctx->gemv_only && type != PMPD_TENSOR_F32)
        bench_kernels_cached(ctx, single, &job, bytes);
    if (ctx->threads > 1) {
        seconds = bench_kernels_time(ctx, pool, &job, copies, 1.0);
        gbs = (double)bytes / seconds * 1e-9;
        snprintf(name, sizeof name, "%s GEMV %zux%zu %d threads", pmpd_tensor_type_name((pmpd_tensor_type)type), rows, cols,
                 ctx->threads);
        snprintf(note, sizeof note, "%.0f%% of all-thread bw; %.1f us", 100.0 * gbs / ctx->bw_all_gbs, seconds * 1e6);
        bench_row(ctx, "kernels", name, gbs, "GB/s", note);
    }
    for (i = 0; i < 2 && !ctx->gemv_only; i++) {
        double flops = 2.0 * (double)rows * (double)cols * (double)token_counts[i], one, all = 0.0;
        job.n_tokens = token_counts[i];
        one = flops / bench_kernels_time(ctx, single, &job, 1, 1.0) * 1e-9;
        if (ctx->threads > 1)
            all = flops / bench_kernels_time(ctx, pool, &job, 1, 1.0) * 1e-9;
        snprintf(name, sizeof name, "%s GEMM %zux%zu x%zu 1 thread", pmpd_tensor_type_name((pmpd_tensor_type)type), rows, cols,
                 token_counts[i]);
        snprintf(note, sizeof note, "%d threads: %.1f GFLOP/s", ctx->threads, all);
        bench_row(ctx, "kernels", name, one, "GFLOP/s", note);
    }
    free(weights);
    free(act_buffer);
    free(x);
    free(y);
    return 0;
}

/* A synthetic Llama of real shape with random weights of one type (the
 * embedding, shared with the classifier, q8 for the quantized types). */
static pmpd_status bench_kernels_model_build(const pmpd_model_info *info, uint32_t type, pmpd_build_model *b)
{
    static const char *const names[7] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up",
                                         "ffn_down"};
    const uint64_t kv = (uint64_t)info->n_kv_heads * info->head_dim;
    const uint64_t rows[8] = {info->dim, kv, kv, info->dim, info->hidden_dim, info->hidden_dim, info->dim,
                              info->vocab_size};
    const uint64_t cols[8] = {info->dim, info->dim, info->dim, info->dim, info->dim, info->dim, info->hidden_dim,
                              info->dim};
    uint64_t dims[2], bytes;
    float *ones = (float *)malloc(info->dim * sizeof(float));
    unsigned char *data = NULL;
    pmpd_status st = ones ? PMPD_OK : PMPD_ERR_OUT_OF_MEMORY;
    uint32_t layer, i;
    pmpd_build_init(b);
    b->info = *info;
    for (i = 0; ones && i < info->dim; i++)
        ones[i] = 1.0f;
    dims[0] = info->dim;
    if (st == PMPD_OK)
        st = pmpd_build_add_f32(b, "output_norm.weight", 1, dims, ones);
    for (layer = 0; layer <= info->n_layers && st == PMPD_OK; layer++) {
        for (i = layer == info->n_layers ? 7 : 0; i < (layer == info->n_layers ? 8u : 7u) && st == PMPD_OK; i++) {
            uint32_t t = i == 7 && type != PMPD_TENSOR_F32 ? PMPD_TENSOR_Q8 : type;
            char name[64];
            dims[0] = rows[i];
            dims[1] = cols[i];
            if (i == 7)
                snprintf(name, sizeof name, "token_embd.weight");
            else
                snprintf(name, sizeof name, "blk.%u.%s.weight", (unsigned)layer, names[i]);
            if (t == PMPD_TENSOR_F32)
                bytes = rows[i] * cols[i] * 4;
            else if (pmpd_qformat_tensor_bytes(t, rows[i], cols[i], &bytes) != PMPD_OK)
                st = PMPD_ERR_OVERFLOW;
            if (st == PMPD_OK && !(data = (unsigned char *)realloc(data, (size_t)bytes)))
                st = PMPD_ERR_OUT_OF_MEMORY;
            if (st == PMPD_OK) {
                bench_kernels_fill(t, data, (size_t)bytes);
                st = pmpd_build_add_tensor(b, name, t, 2, dims, data, bytes);
            }
        }
        dims[0] = info->dim;
        if (layer < info->n_layers && st == PMPD_OK) {
            char name[64];
            snprintf(name, sizeof name, "blk.%u.attn_norm.weight", (unsigned)layer);
            st = pmpd_build_add_f32(b, name, 1, dims, ones);
            snprintf(name, sizeof name, "blk.%u.ffn_norm.weight", (unsigned)layer);
            if (st == PMPD_OK)
                st = pmpd_build_add_f32(b, name, 1, dims, ones);
        }
    }
    free(data);
    free(ones);
    return st;
}

/* Prefill (one batch of 64 tokens) and decode tokens per second. */
static void bench_kernels_model_rates(const pmpd_model *model, unsigned threads, uint32_t n_decode, double *prefill,
                                      double *decode)
{
    int32_t prompt[64];
    pmpd_session_config config;
    pmpd_session *s;
    void *block;
    double start;
    uint32_t t;
    *prefill = *decode = 0.0;
    for (t = 0; t < 64; t++)
        prompt[t] = (int32_t)(t * 37 % 500) + 3;
    pmpd_session_config_init(&config);
    config.context_length = 64 + n_decode + 1;
    config.prefill_batch = 64;
    config.n_threads = threads;
    s = bench_session_open(model, &config, &block);
    if (s) {
        start = bench_now_seconds();
        if (pmpd_session_prefill(s, prompt, 64, NULL) == PMPD_OK)
            *prefill = 64.0 / (bench_now_seconds() - start);
        start = bench_now_seconds();
        for (t = 0; t < n_decode; t++)
            pmpd_session_decode(s, (int32_t)(t % 500) + 3, NULL);
        *decode = n_decode / (bench_now_seconds() - start);
    }
    pmpd_session_destroy(s);
    free(block);
}

static int bench_kernels_model(bench_context *ctx)
{
    static const uint32_t types[4] = {PMPD_TENSOR_F32, PMPD_TENSOR_Q8, PMPD_TENSOR_Q4, PMPD_TENSOR_Q2CB};
    const uint32_t n_decode = ctx->quick ? 4 : 16;
    unsigned threads[2];
    pmpd_model_info info;
    char name[128], note[160];
    size_t t, k;
    bench_synthetic_info(&info, ctx->quick ? 2 : 8, 32000);
    threads[0] = 1;
    threads[1] = bench_pool_threads(ctx);
    snprintf(name, sizeof name, "synthetic model: dim 2048, hidden 5632, %u layers, 32/4 heads, vocab 32000",
             info.n_layers);
    bench_section(ctx, name);
    for (t = 0; t < 4; t++) {
        pmpd_build_model b;
        example_model synthetic;
        if (bench_model_open(bench_kernels_model_build(&info, types[t], &b), &b, pmpd_tensor_type_name((pmpd_tensor_type)types[t]),
                             &synthetic) != 0)
            return -1;
        for (k = 0; k < 2 && (k == 0 || threads[1] > 1); k++) {
            double prefill, decode;
            bench_kernels_model_rates(synthetic.model, threads[k], n_decode, &prefill, &decode);
            snprintf(name, sizeof name, "%s decode, %u thread%s", pmpd_tensor_type_name((pmpd_tensor_type)types[t]), threads[k],
                     threads[k] > 1 ? "s" : "");
            snprintf(note, sizeof note, "%.0f MiB of weights read per token = %.1f GB/s; prefill %.1f tokens/s",
                     (double)synthetic.size / 1048576.0, decode * (double)synthetic.size * 1e-9, prefill);
            bench_row(ctx, "model", name, decode, "tokens/s", note);
        }
        example_model_close(&synthetic);
    }
    return 0;
}

int bench_kernels(bench_context *ctx)
{
    static const size_t shapes[3][2] = {{4096, 4096}, {5632, 2048}, {2048, 5632}};
    static const uint32_t types[4] = {PMPD_TENSOR_F32, PMPD_TENSOR_Q8, PMPD_TENSOR_Q4, PMPD_TENSOR_Q2CB};
    bench_pools pools;
    size_t s, t;
    int status = 0;
    if (bench_pools_start(ctx, &pools) != 0)
        return -1;
    bench_section(ctx, "group-quantized kernels: GEMV streamed from RAM, GEMM at 64 / 512 tokens");
    for (s = 0; s < 3 && status == 0; s++)
        for (t = 0; t < 4 && status == 0; t++)
            status = bench_kernels_shape(ctx, pools.all, pools.single, types[t], shapes[s][0], shapes[s][1]);
    bench_pools_stop(&pools);
    return status == 0 && !ctx->gemv_only ? bench_kernels_model(ctx) : status;
}

#undef BENCH_KERNELS_MAX_TOTAL
