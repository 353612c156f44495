/* Shared pieces of pmpd-bench: timing, the results table, and the machine's
 * memory bandwidth that every kernel figure is reported against. */
#ifndef PMPD_EXAMPLES_BENCH_H
#define PMPD_EXAMPLES_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "examples/common/built_model.h"
#include "pmpd.h"
#include "pmpd_impl/exec/pool.h"
#include "pmpd_impl/offline/format/builder.h"

typedef struct bench_context {
    int threads;               /* all-core thread count */
    size_t stream_bytes;       /* size of buffers that must not fit in cache */
    double bw_one_gbs;         /* measured single-thread read bandwidth, GB/s */
    double bw_all_gbs;         /* measured all-thread read bandwidth, GB/s */
    int quick;                 /* fewer repetitions (smoke runs) */
    int gemv_only;             /* kernels: only the streamed GEMV rows */
    size_t cached_bytes;       /* weight bytes an "in L2" row computes over: half the L2 */
    FILE *csv;                 /* NULL, or where CSV rows go */
} bench_context;

double bench_now_seconds(void);

/* Last-level cache size in bytes as the OS reports it (0 if unknown). */
size_t bench_last_level_cache_bytes(void);

/* The level-2 data (or unified) cache of cpu 0 in bytes as the OS reports
 * it (0 if unknown): 512 KiB on Zen3, 1 MiB on Zen4, 2 MiB on recent Xeons,
 * so a fixed "in L2" size would measure L3 on some of them. */
size_t bench_l2_cache_bytes(void);

/* The CPU's model name from /proc/cpuinfo ("unknown CPU" without one), and
 * the kernel paths this build compiled in: what a figure depends on. */
void bench_cpu_model(char *out, size_t size);
const char *bench_kernel_paths(void);

/* Measures read bandwidth over ctx->stream_bytes with 1 and ctx->threads
 * threads and fills bw_one_gbs / bw_all_gbs. Prints its own table rows. */
int bench_memory_bandwidth(bench_context *ctx);

/* ctx->threads, capped at what a worker pool accepts. */
unsigned bench_pool_threads(const bench_context *ctx);

/* A pool of bench_pool_threads() workers and a one-thread pool, both in one
 * malloc'd block. */
typedef struct bench_pools {
    pmpd_pool *all;
    pmpd_pool *single;
    void *buffer;
} bench_pools;

/* 0, or -1 after printing why the pools could not start. */
int bench_pools_start(const bench_context *ctx, bench_pools *pools);
void bench_pools_stop(bench_pools *pools);

/* Seconds per call of step(job, copy), with copy cycling through
 * 0..copies-1 so that each call streams a matrix the previous ones pushed
 * out of the cache.  Runs for at least budget seconds (quick_budget on
 * quick runs) and until every copy was visited once. */
double bench_seconds_per_call(const bench_context *ctx, double budget, double quick_budget, size_t copies,
                              void (*step)(void *job, size_t copy), void *job);

/* n xorshift64 bytes from seed: weight bytes whose values speed does not
 * depend on. */
void bench_random_bytes(unsigned char *bytes, size_t n, uint64_t seed);

/* A Llama of real shape (dim 2048, hidden 5632, 32 query and 4 KV heads of
 * 64, classifier shared with the embedding) with n_layers and vocab_size. */
void bench_synthetic_info(pmpd_model_info *info, uint32_t n_layers, uint32_t vocab_size);

/* Takes what building b returned, serializes b, frees it and opens the
 * container (close it with example_model_close).  0, or -1 after printing
 * why, with nothing left allocated (label names the model). */
int bench_model_open(pmpd_status built, pmpd_build_model *b, const char *label, example_model *out);

/* A session of model (config may be NULL) in a malloc'd arena stored in
 * *block; NULL with nothing left allocated on failure.  The caller destroys
 * the session, then frees *block. */
pmpd_session *bench_session_open(const pmpd_model *model, const pmpd_session_config *config, void **block);

/* Any-precision GEMV at real shapes, each width vs bandwidth and vs the
 * parent width, int8 vs float dequantization (bench_anyprec.c). */
int bench_anyprec(bench_context *ctx);

/* One decode step of attention over an f32, f16 and PQ KV cache at 1K-32K
 * context, and the KV bytes per token of every mode (bench_attention.c). */
int bench_attention(bench_context *ctx);

/* Group-quantized kernels (q8, q4, q2cb) beside f32 and their scalar
 * references: GEMV streamed from RAM against the bandwidth, GEMM at 64 and
 * 512 tokens in GFLOP/s, and decode / prefill tokens/s of a synthetic
 * model of real shape in each type (bench_kernels.c).  With
 * ctx->gemv_only, only the streamed GEMV rows. */
int bench_kernels(bench_context *ctx);

/* NUQ GEMV at 2, 3 and 4 bits, VQ GEMV at 2 to 4 bits in half-bit steps
 * and TCQ at 4, 3, 2.5 and 2 bits through the table of weight formats
 * (the input's rotation included) beside q4 of the same shape, streamed
 * from RAM, against the bandwidth (bench_nuq.c; part of --gemv). */
int bench_nuq(bench_context *ctx);

/* Prefill GEMM of q4, q8, w8a8, nested and nuq4 through the table of weight formats
 * (pmpd_linear, activation quantization included) at 64 and 512 tokens,
 * against q4 of the same run (bench_formats.c). */
int bench_formats(bench_context *ctx);

/* Table output: a section header, then rows of name, value, unit and a
 * free-form comparison column; mirrored to CSV when ctx->csv is set. */
void bench_section(const bench_context *ctx, const char *title);
void bench_row(const bench_context *ctx, const char *section, const char *name, double value,
               const char *unit, const char *comparison);

#endif
