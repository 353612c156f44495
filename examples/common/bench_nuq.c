/* NUQ, VQ and TCQ GEMV at real shapes through the table of weight formats
 * (pmpd_linear: the input's rotation included), NUQ at 2, 3 and 4 bits, VQ
 * at 2 to 4 bits in half-bit steps and TCQ at 4, 3, 2.5 and 2 bits beside
 * q4 of the same shape in the same run: GB/s of weight bytes streamed from
 * RAM (enough copies of the matrix to exceed the cache, visited in turn)
 * against the measured bandwidth, at 1 thread and all threads.  NUQ and VQ
 * weights are encoded from random normals by the converter's encoders (the
 * encoder runs once per width); TCQ's are random bitstreams (every
 * bitstream is a valid code and the kernel's time does not depend on it,
 * where the Viterbi encoder would take minutes per shape). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/common/bench.h"
#include "pmpd_impl/core/hadamard.h"
#include "pmpd_impl/model/linear.h"
#include "pmpd_impl/offline/tcq/tcq_build.h"
#include "pmpd_impl/offline/weights/encoders.h"
#include "pmpd_impl/weights/format.h"

#define BENCH_NUQ_MAX_TOTAL ((size_t)2 << 30)

typedef struct bench_nuq_job {
    pmpd_tensor tensor;
    const unsigned char *base; /* the streamed copies, stride bytes apart */
    size_t stride;
    const float *x;
    float *y;
    void *scratch;
    pmpd_pool *pool;
} bench_nuq_job;

static void bench_nuq_step(void *raw, size_t copy)
{
    bench_nuq_job *job = (bench_nuq_job *)raw;
    job->tensor.data = job->base + copy * job->stride;
    pmpd_linear(&job->tensor, job->x, 1, job->y, job->scratch, job->pool, 0);
}

/* The input's side alone: one token rotated and quantized (the format's
 * prepare step), which a product does once per token and shared input on
 * the calling thread before the rows are split. */
static void bench_nuq_prepare_step(void *raw, size_t copy)
{
    bench_nuq_job *job = (bench_nuq_job *)raw;
    (void)copy;
    pmpd_weight_format_of(job->tensor.type)->prepare(&job->tensor, job->x, 1, job->scratch, 0, 1, 0);
}

/* The row of the rotation's time at this shape, against the product's
 * one-thread time gemv_us. */
static void bench_nuq_rotation_row(bench_context *ctx, bench_nuq_job *job, size_t cols, double gemv_us)
{
    char name[96], note[160];
    double us = bench_seconds_per_call(ctx, 0.25, 0.1, 1, bench_nuq_prepare_step, job) * 1e6;
    snprintf(name, sizeof name, "input rotation, %zu columns (size %zu)", cols, pmpd_hadamard_size(cols));
    snprintf(note, sizeof note, "one token rotated and quantized: %.1f%% of the nuq4 GEMV's 1-thread time",
             gemv_us > 0 ? 100.0 * us / gemv_us : 0.0);
    bench_row(ctx, "nuq", name, us, "us", note);
}

/* The encoded matrix (malloc'ed) of type at bits (nuq's bits, vq's and
 * tcq's quarter bits) for w, by the converter's encoders (tcq: random
 * bitstreams). */
static unsigned char *bench_nuq_encode(uint32_t type, unsigned bits, const float *w, size_t rows, size_t cols,
                                       size_t *bytes)
{
    pmpd_convert_options options;
    uint64_t size = 0, dims[2];
    unsigned char *out;
    memset(&options, 0, sizeof options);
    options.nuq_bits = type == PMPD_TENSOR_NUQ ? bits : 0;
    options.vq_quarter_bits = type == PMPD_TENSOR_VQ2 ? bits : 0;
    options.tcq_quarter_bits = type == PMPD_TENSOR_TCQ ? bits : 0;
    dims[0] = rows;
    dims[1] = cols;
    if (pmpd_weight_stream_bytes(&options, type, 2, dims, &size) != PMPD_OK ||
        !(out = (unsigned char *)malloc((size_t)size)))
        return NULL;
    if ((type == PMPD_TENSOR_TCQ ? pmpd_tcq_random(rows, cols, bits, PMPD_TCQ_SEED, out, (size_t)size)
                                 : pmpd_weight_encode_matrix(&options, type, NULL, w, rows, cols, out, (size_t)size)) !=
        PMPD_OK) {
        free(out);
        return NULL;
    }
    *bytes = (size_t)size;
    return out;
}

/* "q4", "nuq3", "vq2.5", "tcq2.75". */
static void bench_nuq_name(uint32_t type, unsigned bits, char *name, size_t size)
{
    if (type == PMPD_TENSOR_NUQ)
        snprintf(name, size, "nuq%u", bits);
    else if (type == PMPD_TENSOR_VQ2)
        snprintf(name, size, "vq%g", bits / 4.0);
    else if (type == PMPD_TENSOR_TCQ)
        snprintf(name, size, "tcq%g", bits / 4.0);
    else
        snprintf(name, size, "%s", pmpd_tensor_type_name((pmpd_tensor_type)type));
}

/* One type at one shape; *q4_us is set by the q4 row and compared with by
 * the others. */
static int bench_nuq_shape(bench_context *ctx, const bench_pools *pools, uint32_t type, unsigned bits,
                           const float *w, size_t rows, size_t cols, double q4_us[2])
{
    bench_nuq_job job;
    size_t bytes = 0, copies, i, need = 0;
    unsigned char *one = bench_nuq_encode(type, bits, w, rows, cols, &bytes), *weights = NULL;
    float *x = (float *)malloc(cols * sizeof(float)), *y = (float *)malloc(rows * sizeof(float));
    void *scratch_block = NULL;
    char name[96], note[160], format[16];
    int k;
    double one_thread_us = 0.0;
    memset(&job, 0, sizeof job);
    job.tensor.type = type;
    job.tensor.n_dims = 2;
    job.tensor.dims[0] = rows;
    job.tensor.dims[1] = cols;
    job.tensor.size = bytes;
    job.tensor.data = one; /* its header sizes the scratch (the stored rotation) */
    job.stride = (bytes + 4095) & ~(size_t)4095;
    copies = ctx->stream_bytes / (job.stride ? job.stride : 1) + 1;
    if (copies * job.stride > BENCH_NUQ_MAX_TOTAL)
        copies = BENCH_NUQ_MAX_TOTAL / job.stride;
    if (one && x && y && pmpd_linear_scratch_bytes(&job.tensor, 1, (unsigned)ctx->threads, &need) == PMPD_OK)
        scratch_block = malloc(need + 64);
    if (scratch_block)
        weights = (unsigned char *)malloc(copies * job.stride);
    if (!weights) {
        fprintf(stderr, "pmpd-bench: cannot set up the %s GEMV %zux%zu\n", pmpd_tensor_type_name((pmpd_tensor_type)type),
                rows, cols);
        free(one);
        free(x);
        free(y);
        free(scratch_block);
        return -1;
    }
    for (i = 0; i < copies; i++)
        memcpy(weights + i * job.stride, one, bytes);
    for (i = 0; i < cols; i++)
        x[i] = (float)((int)(i * 2654435761u % 2001) - 1000) / 1000.0f;
    job.base = weights;
    job.x = x;
    job.y = y;
    job.scratch = (unsigned char *)scratch_block + (64 - (uintptr_t)scratch_block % 64) % 64;
    for (k = 0; k < 2 && (k == 0 || ctx->threads > 1); k++) {
        double seconds, gbs, bw = k ? ctx->bw_all_gbs : ctx->bw_one_gbs;
        job.pool = k ? pools->all : pools->single;
        seconds = bench_seconds_per_call(ctx, 1.0, 0.25, copies, bench_nuq_step, &job);
        gbs = (double)bytes / seconds * 1e-9;
        if (type == PMPD_TENSOR_Q4)
            q4_us[k] = seconds * 1e6;
        if (k == 0)
            one_thread_us = seconds * 1e6;
        bench_nuq_name(type, bits, format, sizeof format);
        snprintf(name, sizeof name, "%s GEMV %zux%zu, %d thread%s", format, rows, cols, k ? ctx->threads : 1,
                 k && ctx->threads > 1 ? "s" : "");
        snprintf(note, sizeof note, "%.0f%% of %s bw; %.1f us = %.2fx q4's time; %.3f bits/weight", 100.0 * gbs / bw,
                 k ? "all-thread" : "1-thread", seconds * 1e6, q4_us[k] > 0 ? seconds * 1e6 / q4_us[k] : 0.0,
                 8.0 * (double)bytes / ((double)rows * (double)cols));
        bench_row(ctx, type == PMPD_TENSOR_VQ2 ? "vq" : type == PMPD_TENSOR_TCQ ? "tcq" : "nuq", name, gbs, "GB/s", note);
    }
    if (type == PMPD_TENSOR_NUQ && bits == 4) {
        job.tensor.data = weights;
        bench_nuq_rotation_row(ctx, &job, cols, one_thread_us);
    }
    free(one);
    free(weights);
    free(x);
    free(y);
    free(scratch_block);
    return 0;
}

int bench_nuq(bench_context *ctx)
{
    static const size_t shapes[3][2] = {{4096, 4096}, {5632, 2048}, {2048, 5632}};
    bench_pools pools;
    size_t s, i;
    int status = 0;
    if (bench_pools_start(ctx, &pools) != 0)
        return -1;
    bench_section(ctx, "NUQ, VQ and TCQ GEMV (Hadamard-rotated Lloyd-Max levels, 2-D codebooks and trellis, "
                       "rotation included) vs q4, weights streamed from RAM");
    for (s = 0; s < 3 && status == 0; s++) {
        size_t rows = shapes[s][0], cols = shapes[s][1];
        float *w = (float *)malloc(rows * cols * sizeof(float));
        double q4_us[2] = {0.0, 0.0};
        unsigned bits;
        uint64_t state = 0x9E3779B97F4A7C15ull;
        if (!w) {
            status = -1;
            break;
        }
        /* Sums of 4 uniforms: close enough to normal for timing. */
        for (i = 0; i < rows * cols; i++) {
            int k;
            float v = 0.0f;
            for (k = 0; k < 4; k++) {
                state ^= state << 13, state ^= state >> 7, state ^= state << 17;
                v += (float)(state >> 40) / 16777216.0f - 0.5f;
            }
            w[i] = v * 0.05f;
        }
        status = bench_nuq_shape(ctx, &pools, PMPD_TENSOR_Q4, 0, w, rows, cols, q4_us);
        for (bits = 4; bits >= 2 && status == 0; bits--)
            status = bench_nuq_shape(ctx, &pools, PMPD_TENSOR_NUQ, bits, w, rows, cols, q4_us);
        for (bits = 16; bits >= 8 && status == 0; bits -= 2)
            status = bench_nuq_shape(ctx, &pools, PMPD_TENSOR_VQ2, bits, w, rows, cols, q4_us);
        for (i = 0; i < 4 && status == 0; i++) {
            static const unsigned tcq_quarter_bits[4] = {16, 12, 10, 8};
            status = bench_nuq_shape(ctx, &pools, PMPD_TENSOR_TCQ, tcq_quarter_bits[i], w, rows, cols, q4_us);
        }
        free(w);
    }
    bench_pools_stop(&pools);
    return status;
}

#undef BENCH_NUQ_MAX_TOTAL
