/* Prefill GEMM through the table of weight formats: the same random matrix
 * in q4, q8, w8a8, nested 2:4 (at its parent width, as prefill runs it) and
 * nuq4 (its input rotation included),
 * each multiplied by pmpd_linear (activation quantization included, as in a
 * forward pass) at 64 and 512 tokens on 1 and all threads, reported in
 * GFLOP/s and against q4 of the same run. */
#include <stdlib.h>
#include <string.h>

#include "examples/common/bench.h"
#include "pmpd_impl/model/linear.h"
#include "pmpd_impl/offline/nuq/nuq_build.h"
#include "pmpd_impl/offline/quant/quant.h"
#include "pmpd_impl/offline/w8a8/w8a8_build.h"
#include "pmpd_impl/weights/format.h"
#include "pmpd_impl/weights/w8a8/w8a8.h"

typedef struct bench_formats_job {
    pmpd_tensor tensor;
    const float *x;
    float *y;
    size_t n_tokens;
    void *scratch;
    pmpd_pool *pool;
} bench_formats_job;

static void bench_formats_step(void *job_pointer, size_t copy)
{
    bench_formats_job *job = (bench_formats_job *)job_pointer;
    (void)copy;
    pmpd_linear(&job->tensor, job->x, job->n_tokens, job->y, job->scratch, job->pool, 0);
}

/* size bytes at a 64-byte boundary, as the loader places every tensor (a
 * misaligned matrix costs the AVX2 W8A8 GEMM 10% in split loads), inside
 * *block, which the caller frees; NULL on failure. */
static void *bench_formats_aligned(size_t size, void **block)
{
    *block = malloc(size + 64);
    return *block ? (void *)(((uintptr_t)*block + 63) & ~(uintptr_t)63) : NULL;
}

/* The weights of type for w (rows x cols floats) in *block (malloc'ed,
 * 64-byte aligned); NULL on failure. */
static void *bench_formats_encode(uint32_t type, const float *w, size_t rows, size_t cols, uint64_t *bytes,
                                  void **block)
{
    void *out = NULL;
    *block = NULL;
    if (type == PMPD_TENSOR_ANYPREC) {
        size_t size;
        if (pmpd_anyprec_size(rows, cols, 2, 4, &size) != PMPD_OK || !(out = bench_formats_aligned(size, block)))
            return NULL;
        memset(out, 0, size);
        *bytes = size;
        if (pmpd_anyprec_quantize(w, rows, cols, NULL, 2, 4, 0, rows, out, size) == PMPD_OK)
            return out;
    } else if (type == PMPD_TENSOR_W8A8) {
        pmpd_w8a8_layout layout;
        if (pmpd_w8a8_compute_layout(rows, cols, 0, &layout) != PMPD_OK || !(out = bench_formats_aligned(layout.total, block)))
            return NULL;
        *bytes = layout.total;
        /* x below lies in [-1, 1]: the calibrated scale would be 1/127. */
        if (pmpd_w8a8_encode(w, rows, cols, 1.0f / 127.0f, NULL, 0, out, layout.total) == PMPD_OK)
            return out;
    } else if (type == PMPD_TENSOR_NUQ) {
        /* 4 bits: the width q4 is compared with. */
        if (pmpd_nuq_size(rows, cols, 4, bytes) != PMPD_OK || !(out = bench_formats_aligned((size_t)*bytes, block)))
            return NULL;
        if (pmpd_nuq_encode(w, rows, cols, 4, PMPD_NUQ_SEED, NULL, (unsigned char *)out, (size_t)*bytes) == PMPD_OK)
            return out;
    } else {
        uint64_t dims[2];
        dims[0] = rows;
        dims[1] = cols;
        if (pmpd_weight_tensor_bytes(type, 2, dims, bytes) != PMPD_OK || !(out = bench_formats_aligned((size_t)*bytes, block)))
            return NULL;
        if (pmpd_quant_matrix(type, w, rows, cols, 0, out, (size_t)*bytes) == PMPD_OK)
            return out;
    }
    free(*block);
    *block = NULL;
    return NULL;
}

int bench_formats(bench_context *ctx)
{
    static const uint32_t types[5] = {PMPD_TENSOR_Q4, PMPD_TENSOR_Q8, PMPD_TENSOR_W8A8, PMPD_TENSOR_ANYPREC,
                                      PMPD_TENSOR_NUQ};
    static const size_t shapes[3][2] = {{4096, 4096}, {5632, 2048}, {2048, 5632}};
    static const size_t token_counts[2] = {64, 512};
    bench_pools pools;
    size_t s, i, k, c;
    int rc = 0;
    if (bench_pools_start(ctx, &pools) != 0)
        return -1;
    bench_section(ctx, "prefill GEMM through the format table (activation quantization included), vs q4");
    for (s = 0; s < 3 && rc == 0; s++) {
        size_t rows = shapes[s][0], cols = shapes[s][1];
        float *w = (float *)malloc(rows * cols * sizeof(float));
        float *x = (float *)malloc(512 * cols * sizeof(float));
        float *y = (float *)malloc(512 * rows * sizeof(float));
        double q4_rate[2][2] = {{0, 0}, {0, 0}};
        if (!w || !x || !y) {
            rc = -1;
        } else {
            for (c = 0; c < rows * cols; c++)
                w[c] = (float)((int)(c * 2654435761u % 2001) - 1000) / 50000.0f;
            for (c = 0; c < 512 * cols; c++)
                x[c] = (float)((int)(c * 40503u % 2001) - 1000) / 1000.0f;
        }
        for (i = 0; i < 5 && rc == 0; i++) {
            bench_formats_job job;
            uint64_t bytes = 0;
            size_t scratch_bytes = 0;
            void *scratch_block = NULL, *weight_block = NULL;
            memset(&job, 0, sizeof job);
            job.tensor.data = bench_formats_encode(types[i], w, rows, cols, &bytes, &weight_block);
            job.tensor.type = types[i];
            job.tensor.n_dims = 2;
            job.tensor.dims[0] = rows;
            job.tensor.dims[1] = cols;
            job.tensor.size = bytes;
            job.x = x;
            job.y = y;
            if (!job.tensor.data || pmpd_linear_scratch_bytes(&job.tensor, 512, pools.all ? 64 : 1, &scratch_bytes) ||
                !(scratch_block = malloc(scratch_bytes + 64))) {
                free(weight_block);
                rc = -1;
                break;
            }
            job.scratch = (void *)(((uintptr_t)scratch_block + 63) & ~(uintptr_t)63);
            for (k = 0; k < 2; k++) {
                double flops = 2.0 * (double)rows * (double)cols * (double)token_counts[k], rate[2];
                char name[96], note[128];
                int p;
                job.n_tokens = token_counts[k];
                for (p = 0; p < 2; p++) {
                    job.pool = p ? pools.all : pools.single;
                    rate[p] = flops / bench_seconds_per_call(ctx, 1.0, 0.2, 1, bench_formats_step, &job) * 1e-9;
                    if (types[i] == PMPD_TENSOR_Q4)
                        q4_rate[k][p] = rate[p];
                }
                snprintf(name, sizeof name, "%s GEMM %zux%zu x%zu 1 thread", pmpd_tensor_type_name(types[i]), rows,
                         cols, token_counts[k]);
                snprintf(note, sizeof note, "%.2fx q4; %d threads: %.1f GFLOP/s, %.2fx q4", rate[0] / q4_rate[k][0],
                         ctx->threads, rate[1], rate[1] / q4_rate[k][1]);
                bench_row(ctx, "formats", name, rate[0], "GFLOP/s", note);
            }
            free(weight_block);
            free(scratch_block);
        }
        free(w);
        free(x);
        free(y);
    }
    bench_pools_stop(&pools);
    return rc;
}
