/* q4 GEMV timing for the any-precision rows: copies of one random q4
 * matrix streamed in turn, as the kernel section streams them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/common/bench_anyprec_q4.h"
#include "pmpd_impl/weights/grouped/qact.h"
#include "pmpd_impl/weights/grouped/qmatmul.h"

typedef struct bench_anyprec_q4_job {
    pmpd_qmatrix w;
    pmpd_qact act;
    const float *x;
    float *y;
    const unsigned char *base;
    size_t stride;
    pmpd_pool *pool;
} bench_anyprec_q4_job;

static void bench_anyprec_q4_rows(void *ctx, size_t begin, size_t end, unsigned worker)
{
    bench_anyprec_q4_job *job = (bench_anyprec_q4_job *)ctx;
    (void)worker;
    pmpd_qmatmul(&job->w, &job->act, begin, end, job->y, job->w.rows);
}

static void bench_anyprec_q4_product(void *raw, size_t copy)
{
    bench_anyprec_q4_job *job = (bench_anyprec_q4_job *)raw;
    job->w.data = job->base + copy * job->stride;
    pmpd_qact_quantize(&job->act, job->x, job->w.cols, 1, job->w.cols);
    pmpd_pool_run(job->pool, bench_anyprec_q4_rows, job, job->w.rows, PMPD_QROWS);
}

int bench_anyprec_q4_seconds(const bench_context *ctx, pmpd_pool *single, pmpd_pool *all, uint32_t rows,
                             uint32_t cols, double *one, double *every)
{
    bench_anyprec_q4_job job;
    uint64_t bytes = 0;
    size_t copies, i, act_bytes = 0;
    unsigned char *weights = NULL;
    void *act_buffer = NULL;
    float *x = NULL;
    pmpd_arena arena;
    int status = -1;
    memset(&job, 0, sizeof job);
    if (pmpd_qformat_tensor_bytes(PMPD_TENSOR_Q4, rows, cols, &bytes) == PMPD_OK &&
        pmpd_qact_bytes(1, cols, &act_bytes) == PMPD_OK) {
        job.stride = ((size_t)bytes + 4095) & ~(size_t)4095;
        copies = ctx->stream_bytes / job.stride + 1;
        weights = (unsigned char *)malloc(copies * job.stride);
        act_buffer = malloc(act_bytes + PMPD_ARENA_ALIGNMENT);
        x = (float *)malloc(cols * sizeof(float));
        job.y = (float *)malloc(rows * sizeof(float));
        if (weights && act_buffer && x && job.y &&
            pmpd_arena_init(&arena, act_buffer, act_bytes + PMPD_ARENA_ALIGNMENT) == PMPD_OK &&
            pmpd_qact_alloc(&arena, 1, cols, &job.act) == PMPD_OK) {
            /* Random nibbles; every block's 4 f16 scales 2^-7. */
            bench_random_bytes(weights, (size_t)bytes, 0x243F6A8885A308D3ull);
            for (i = 0; i < (size_t)bytes; i += PMPD_Q4_BLOCK_BYTES)
                memcpy(weights + i, "\0\x20\0\x20\0\x20\0\x20", 2 * PMPD_QROWS);
            for (i = 1; i < copies; i++)
                memcpy(weights + i * job.stride, weights, (size_t)bytes);
            for (i = 0; i < cols; i++)
                x[i] = (float)((int)(i % 17) - 8) * 0.125f;
            job.w.type = PMPD_TENSOR_Q4;
            job.w.rows = rows;
            job.w.cols = cols;
            job.x = x;
            job.base = weights;
            job.pool = single;
            *one = bench_seconds_per_call(ctx, 0.4, 0.05, copies, bench_anyprec_q4_product, &job);
            job.pool = all;
            *every = bench_seconds_per_call(ctx, 0.4, 0.05, copies, bench_anyprec_q4_product, &job);
            status = 0;
        }
    }
    if (status != 0)
        fprintf(stderr, "pmpd-bench: cannot set up the q4 reference GEMV %ux%u\n", rows, cols);
    free(weights);
    free(act_buffer);
    free(x);
    free(job.y);
    return status;
}
