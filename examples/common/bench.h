/* Shared pieces of pmpd-bench: timing, the results table, and the machine's
 * memory bandwidth that every kernel figure is reported against. */
#ifndef PMPD_EXAMPLES_BENCH_H
#define PMPD_EXAMPLES_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct bench_context {
    int threads;               /* all-core thread count */
    size_t stream_bytes;       /* size of buffers that must not fit in cache */
    double bw_one_gbs;         /* measured single-thread read bandwidth, GB/s */
    double bw_all_gbs;         /* measured all-thread read bandwidth, GB/s */
    int quick;                 /* fewer repetitions (smoke runs) */
    FILE *csv;                 /* NULL, or where CSV rows go */
} bench_context;

double bench_now_seconds(void);

/* Last-level cache size in bytes as the OS reports it (0 if unknown). */
size_t bench_last_level_cache_bytes(void);

/* Measures read bandwidth over ctx->stream_bytes with 1 and ctx->threads
 * threads and fills bw_one_gbs / bw_all_gbs. Prints its own table rows. */
int bench_memory_bandwidth(bench_context *ctx);

/* Any-precision GEMV at real shapes, each width vs bandwidth and vs the
 * parent width, int8 vs float dequantization (bench_anyprec.c). */
int bench_anyprec(bench_context *ctx);

/* One decode step of attention over an f32, f16 and PQ KV cache at 1K-32K
 * context, and the KV bytes per token of every mode (bench_attention.c). */
int bench_attention(bench_context *ctx);

/* Group-quantized kernels (q8, q4, q2cb) beside f32 and their scalar
 * references: GEMV streamed from RAM against the bandwidth, GEMM at 64 and
 * 512 tokens in GFLOP/s, and decode / prefill tokens/s of a synthetic
 * model of real shape in each type (bench_kernels.c). */
int bench_kernels(bench_context *ctx);

/* Table output: a section header, then rows of name, value, unit and a
 * free-form comparison column; mirrored to CSV when ctx->csv is set. */
void bench_section(const bench_context *ctx, const char *title);
void bench_row(const bench_context *ctx, const char *section, const char *name, double value,
               const char *unit, const char *comparison);

#endif
