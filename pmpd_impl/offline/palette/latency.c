#include "pmpd_impl/offline/palette/latency.h"

#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/exec/pool.h"
#include "pmpd_impl/model/linear.h"
#include "pmpd_impl/offline/palette/distortion.h"
#include "platform/platform.h"

#define PALETTE_EVICT_MAX ((size_t)64 << 20)
#define PALETTE_TIMED_RUNS 5

PMPD_INTERNAL void pmpd_palette_timings_init(pmpd_palette_timings *timings, const pmpd_build_model *b)
{
    uint64_t bytes = 0;
    uint32_t i;
    memset(timings, 0, sizeof *timings);
    for (i = 0; i < b->n_tensors; i++)
        if (b->tensors[i].n_dims == 2)
            bytes += b->tensors[i].dims[0] * b->tensors[i].dims[1];
    timings->evict_bytes = bytes < PALETTE_EVICT_MAX ? (size_t)bytes : PALETTE_EVICT_MAX;
}

static int palette_compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The median time of one product with tensor (one thread, scratch and
 * vectors from the heap). */
static pmpd_status palette_time_product(const pmpd_tensor *tensor, size_t evict_bytes, uint64_t *ns)
{
    size_t rows = (size_t)tensor->dims[0], cols = (size_t)tensor->dims[1], pool_bytes = 0, scratch_bytes = 0, i;
    uint64_t runs[PALETTE_TIMED_RUNS];
    unsigned char *evict = NULL, *pool_block = NULL, *scratch_block = NULL;
    float *x = (float *)malloc(cols * sizeof *x), *y = (float *)malloc(rows * sizeof *y);
    pmpd_pool *pool = NULL;
    pmpd_arena arena;
    pmpd_status st = x && y ? PMPD_OK : PMPD_ERR_OUT_OF_MEMORY;
    int r;
    if (st == PMPD_OK)
        st = pmpd_linear_scratch_bytes(tensor, 1, 1, &scratch_bytes);
    if (st == PMPD_OK)
        st = pmpd_pool_plan(1, &pool_bytes);
    if (st == PMPD_OK) {
        evict = (unsigned char *)malloc(evict_bytes ? evict_bytes : 1);
        pool_block = (unsigned char *)malloc(pool_bytes + PMPD_ARENA_ALIGNMENT);
        scratch_block = (unsigned char *)malloc(scratch_bytes + 64);
        st = evict && pool_block && scratch_block ? PMPD_OK : PMPD_ERR_OUT_OF_MEMORY;
    }
    if (st == PMPD_OK) {
        pmpd_arena_init(&arena, pool_block, pool_bytes + PMPD_ARENA_ALIGNMENT);
        st = pmpd_pool_create(&arena, 1, 0, &pool);
    }
    if (st == PMPD_OK) {
        void *scratch = scratch_block + (64 - (uintptr_t)scratch_block % 64) % 64;
        uint32_t state = 12345u;
        for (i = 0; i < cols; i++) {
            state = state * 1664525u + 1013904223u;
            x[i] = (float)(state >> 8) / 8388608.0f - 1.0f;
        }
        pmpd_linear(tensor, x, 1, y, scratch, pool, 0); /* first touch */
        for (r = 0; r < PALETTE_TIMED_RUNS; r++) {
            uint64_t start;
            memset(evict, r + 1, evict_bytes);
            start = pmpd_platform_now_ns();
            pmpd_linear(tensor, x, 1, y, scratch, pool, 0);
            runs[r] = pmpd_platform_now_ns() - start;
        }
        qsort(runs, PALETTE_TIMED_RUNS, sizeof runs[0], palette_compare_u64);
        *ns = runs[PALETTE_TIMED_RUNS / 2];
        pmpd_pool_destroy(pool);
    }
    free(x);
    free(y);
    free(evict);
    free(pool_block);
    free(scratch_block);
    return st;
}

PMPD_INTERNAL pmpd_status pmpd_palette_group_latency(const pmpd_build_model *b, const pmpd_palette_group *g,
                                                     uint32_t type, const pmpd_convert_options *options,
                                                     pmpd_palette_timings *timings, uint64_t *ns)
{
    unsigned bits = type == PMPD_TENSOR_NUQ   ? options->nuq_bits
                    : type == PMPD_TENSOR_VQ2 ? options->vq_quarter_bits
                    : type == PMPD_TENSOR_TCQ ? options->tcq_quarter_bits
                                              : 0;
    uint32_t m, i;
    *ns = 0;
    for (m = 0; m < g->n_tensors; m++) {
        const pmpd_build_tensor *t = &b->tensors[g->tensors[m]];
        pmpd_palette_timing *found = NULL;
        for (i = 0; i < timings->n && !found; i++) {
            pmpd_palette_timing *e = &timings->entries[i];
            if (e->rows == t->dims[0] && e->cols == t->dims[1] && e->type == type && e->bits == bits)
                found = e;
        }
        if (!found) {
            pmpd_tensor tensor;
            void *block;
            uint64_t one = 0;
            pmpd_status st = pmpd_palette_encode(t, type, options, NULL, &block, &tensor);
            if (st == PMPD_OK)
                st = palette_time_product(&tensor, timings->evict_bytes, &one);
            free(block);
            if (st != PMPD_OK)
                return st;
            if (timings->n == PMPD_PALETTE_MAX_TIMINGS) { /* a full table: time again next time */
                *ns += one;
                continue;
            }
            found = &timings->entries[timings->n++];
            found->rows = t->dims[0];
            found->cols = t->dims[1];
            found->type = type;
            found->bits = bits;
            found->ns = one;
        }
        *ns += found->ns;
    }
    return PMPD_OK;
}
