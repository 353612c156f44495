/* One decode step of attention (every query head of one layer over the
 * whole context, single-threaded) with the KV cache in f32, f16 and
 * product-quantized codes (2- and 4-dim subspaces, 8-bit codes, a recent
 * window of head_dim tokens), on synthetic K/V of a real head shape:
 * 32 query heads x 64 dims sharing 8 KV heads.  Also the KV bytes per
 * token of every mode, and the f32/f16 row kernels alone on rows in L2.
 *
 * Each step is timed twice: warm (repeated, so a short context stays in
 * the caches) and from memory, with a buffer larger than any last-level
 * cache we measured on (the lent Xeon's 300 MiB) read before each step.
 * The second is what decode sees: between two visits of one layer's cache
 * the other layers' caches and all the weights stream through, read, not
 * written, so the lines they leave in the caches are clean (a buffer
 * written instead would make the step write back a dirty line for each it
 * reads). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/common/bench.h"
#include "pmpd_impl/kvcache/attention_kernels.h"
#include "pmpd_impl/kvcache/attention_partial.h"
#include "pmpd_impl/kvcache/exact_attention.h"
#include "pmpd_impl/kvcache/pq_cache.h"
#include "pmpd_impl/model/f16.h"

#define BENCH_ATTN_HEADS 32
#define BENCH_ATTN_KV_HEADS 8
#define BENCH_ATTN_DIM 64
#define BENCH_ATTN_GROUP (BENCH_ATTN_HEADS / BENCH_ATTN_KV_HEADS)
#define BENCH_ATTN_MAX_CONTEXT 32768

static float bench_attn_random(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*state >> 40) / 16777216.0 * 2.0 - 1.0);
}

/* Exact attention of every head over rows stored as f32 or f16, head-major
 * ([kv_head][position][dim], f16 keys in blocks of 16 positions) as a
 * session's cache keeps them: each KV head's rows are one sequential
 * stream.  The same call sessions make for their f32/f16 caches. */
typedef struct bench_attn_exact {
    pmpd_kv_row_format key_format, value_format;
    const unsigned char *keys, *values;
    size_t element_bytes, n;
    float *scratch, *out;
    const float *q;
} bench_attn_exact;

static void bench_attn_exact_step(bench_attn_exact *e)
{
    uint32_t kv;
    size_t row_bytes = (size_t)BENCH_ATTN_DIM * e->element_bytes;
    for (kv = 0; kv < BENCH_ATTN_KV_HEADS; kv++) {
        pmpd_kv_rows k, v;
        size_t head_offset = (size_t)kv * BENCH_ATTN_MAX_CONTEXT * row_bytes;
        size_t group_offset = (size_t)kv * BENCH_ATTN_GROUP * BENCH_ATTN_DIM;
        k.format = e->key_format;
        v.format = e->value_format;
        k.row_bytes = v.row_bytes = row_bytes;
        k.data = e->keys + head_offset;
        v.data = e->values + head_offset;
        pmpd_attn_exact_group(e->q + group_offset, BENCH_ATTN_GROUP, BENCH_ATTN_DIM, &k, &v, e->n, e->scratch,
                              e->out + group_offset);
    }
}

typedef struct bench_attn_pq {
    pmpd_pq_cache cache;
    void *arena_buffer;
    float *centroids, *scratch;
} bench_attn_pq;

/* A PQ cache of the bench shape, every code and window slot filled
 * (random codes: attention cost does not depend on their values). */
static int bench_attn_pq_init(bench_attn_pq *p, uint32_t sub_dim, uint64_t *rng)
{
    pmpd_pq_codebook book;
    pmpd_arena arena;
    size_t i, floats, scratch_floats, codes;
    memset(p, 0, sizeof *p);
    if (pmpd_pq_layout_init(&book.layout, BENCH_ATTN_DIM, sub_dim, 8) != PMPD_OK)
        return -1;
    floats = pmpd_pq_codebook_floats(&book.layout);
    p->centroids = (float *)malloc(floats * sizeof(float));
    if (!p->centroids)
        return -1;
    for (i = 0; i < floats; i++)
        p->centroids[i] = bench_attn_random(rng);
    book.centroids = p->centroids;
    pmpd_arena_init(&arena, NULL, SIZE_MAX);
    if (pmpd_pq_cache_init(&p->cache, &book, &book, BENCH_ATTN_KV_HEADS, BENCH_ATTN_MAX_CONTEXT, BENCH_ATTN_DIM,
                           &arena) != PMPD_OK)
        return -1;
    i = arena.used + PMPD_ARENA_ALIGNMENT;
    p->arena_buffer = malloc(i);
    if (!p->arena_buffer)
        return -1;
    pmpd_arena_init(&arena, p->arena_buffer, i);
    if (pmpd_pq_cache_init(&p->cache, &book, &book, BENCH_ATTN_KV_HEADS, BENCH_ATTN_MAX_CONTEXT, BENCH_ATTN_DIM,
                           &arena) != PMPD_OK ||
        pmpd_pq_attention_scratch_floats(&p->cache, BENCH_ATTN_HEADS, &scratch_floats) != PMPD_OK)
        return -1;
    p->scratch = (float *)malloc(scratch_floats * sizeof(float));
    if (!p->scratch)
        return -1;
    codes = (size_t)BENCH_ATTN_KV_HEADS * p->cache.code_capacity * book.layout.code_bytes;
    for (i = 0; i < codes; i++) {
        p->cache.key_codes[i] = (uint8_t)(bench_attn_random(rng) * 127.0f + 128.0f);
        p->cache.value_codes[i] = (uint8_t)(bench_attn_random(rng) * 127.0f + 128.0f);
    }
    for (i = 0; i < (size_t)BENCH_ATTN_KV_HEADS * BENCH_ATTN_DIM * BENCH_ATTN_DIM; i++) {
        p->cache.key_recent[i] = bench_attn_random(rng);
        p->cache.value_recent[i] = bench_attn_random(rng);
    }
    return 0;
}

static void bench_attn_pq_free(bench_attn_pq *p)
{
    free(p->arena_buffer);
    free(p->centroids);
    free(p->scratch);
}

#define BENCH_ATTN_EVICT_BYTES ((size_t)384 << 20)

/* What the evict buffer's reads sum to, kept so that they are made. */
static volatile unsigned bench_attn_sink;

/* Reads one byte of every cache line of the evict buffer (filled once when
 * allocated), as decode streams the weights. */
static void bench_attn_stream(const unsigned char *evict)
{
    unsigned sum = 0;
    size_t i;
    for (i = 0; i < BENCH_ATTN_EVICT_BYTES; i += 64)
        sum += evict[i];
    bench_attn_sink += sum;
}

/* Shortest of repeated runs: the figure least disturbed by other load.
 * With evict, that buffer is read before each run (not timed). */
static double bench_attn_time(const bench_context *ctx, bench_attn_exact *exact, bench_attn_pq *pq, const float *q,
                              float *out, unsigned char *evict)
{
    double best = 1e30, start = bench_now_seconds(), budget = ctx->quick ? 0.05 : 0.5;
    int runs = 0;
    do {
        double t0, t;
        if (evict)
            bench_attn_stream(evict);
        t0 = bench_now_seconds();
        if (exact)
            bench_attn_exact_step(exact);
        else
            pmpd_pq_cache_attend(&pq->cache, q, BENCH_ATTN_HEADS, (size_t)pq->cache.n_coded + pq->cache.n_recent,
                                 out, pq->scratch);
        t = bench_now_seconds() - t0;
        best = t < best ? t : best;
        runs++;
    } while (evict ? runs < 5 : runs < 3 || bench_now_seconds() - start < budget);
    return best;
}

static void bench_attn_bytes(const bench_context *ctx)
{
    static const struct {
        const char *name;
        uint32_t type, sub_dim;
    } modes[] = {{"f32", PMPD_KV_F32, 0}, {"f16", PMPD_KV_F16, 0},   {"int8 (uniform)", PMPD_KV_INT8, 0},
                 {"int4 (uniform)", PMPD_KV_INT4, 0}, {"pq 2-dim 8-bit", PMPD_KV_PQ, 2}, {"pq 4-dim 8-bit", PMPD_KV_PQ, 4}};
    size_t f16 = 0, bytes = 0, i;
    char name[64], note[64];
    pmpd_kv_bytes_per_token(PMPD_KV_F16, BENCH_ATTN_KV_HEADS, BENCH_ATTN_DIM, 0, 0, 0, &f16);
    for (i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        if (pmpd_kv_bytes_per_token(modes[i].type, BENCH_ATTN_KV_HEADS, BENCH_ATTN_DIM, modes[i].sub_dim,
                                    modes[i].sub_dim, 8, &bytes) != PMPD_OK)
            continue;
        snprintf(name, sizeof name, "KV bytes/token/layer %s", modes[i].name);
        snprintf(note, sizeof note, "%.2fx smaller than f16", (double)f16 / (double)bytes);
        bench_row(ctx, "kv bytes", name, (double)bytes, "B", note);
    }
}

/* The decode path's only encoding work: one full window (head_dim tokens
 * of every KV head, keys and values) coded as a batch, once per head_dim
 * tokens. */
static void bench_attn_flush(const bench_context *ctx, bench_attn_pq *pq, const char *name)
{
    size_t vectors = (size_t)BENCH_ATTN_DIM * BENCH_ATTN_KV_HEADS;
    double best = 1e30, start = bench_now_seconds(), budget = ctx->quick ? 0.05 : 0.3;
    char note[96];
    int runs = 0;
    do {
        double t0 = bench_now_seconds(), t;
        pmpd_pq_encode(&pq->cache.keys, pq->cache.key_recent, BENCH_ATTN_DIM, vectors, 0, pq->cache.key_codes);
        pmpd_pq_encode(&pq->cache.values, pq->cache.value_recent, BENCH_ATTN_DIM, vectors, 0,
                       pq->cache.value_codes);
        t = bench_now_seconds() - t0;
        best = t < best ? t : best;
        runs++;
    } while (runs < 3 || bench_now_seconds() - start < budget);
    snprintf(note, sizeof note, "%.1f us per decoded token", best * 1e6 / BENCH_ATTN_DIM);
    bench_row(ctx, "attention", name, best * 1e3, "ms", note);
}

#define BENCH_ATTN_ROWS 512

/* The exact step's two row kernels alone (scores, then the weighted value
 * sum), one KV head's 512 rows of 64 dims for its four query heads, in L2:
 * ns per row, the compute each format needs once its bytes are near.
 * which: 0 f32 scores, 1 f32 values, 2 f16 scores, 3 f16 values. */
static double bench_attn_row_kernel(const bench_context *ctx, int which, const float *k32, const uint16_t *k16,
                                    const uint16_t *v16, const float *qt, float *scores, float *acc)
{
    double best = 1e30, start = bench_now_seconds(), budget = ctx->quick ? 0.02 : 0.2;
    float max[BENCH_ATTN_GROUP];
    size_t i;
    int runs = 0;
    for (i = 0; i < (size_t)BENCH_ATTN_ROWS * BENCH_ATTN_GROUP; i++)
        scores[i] = 1.0f / BENCH_ATTN_ROWS;
    do {
        double t0 = bench_now_seconds(), t;
        for (i = 0; i < BENCH_ATTN_GROUP; i++)
            max[i] = -INFINITY;
        if (which == 0)
            PMPD_KV_ROW_KERNEL(pmpd_kv_row_scores)(qt, BENCH_ATTN_GROUP, BENCH_ATTN_DIM, k32, BENCH_ATTN_DIM,
                                                   BENCH_ATTN_ROWS, scores, max);
        else if (which == 1)
            PMPD_KV_ROW_KERNEL(pmpd_kv_row_accumulate)(scores, BENCH_ATTN_GROUP, BENCH_ATTN_DIM, k32, BENCH_ATTN_DIM,
                                                       BENCH_ATTN_ROWS, acc);
        else if (which == 2)
            PMPD_KV_ROW_KERNEL(pmpd_kv_block_scores_f16)(qt, BENCH_ATTN_GROUP, BENCH_ATTN_DIM, k16, BENCH_ATTN_ROWS,
                                                         scores, max);
        else
            PMPD_KV_ROW_KERNEL(pmpd_kv_row_accumulate_f16)(scores, BENCH_ATTN_GROUP, BENCH_ATTN_DIM, v16,
                                                           BENCH_ATTN_DIM, BENCH_ATTN_ROWS, acc);
        t = bench_now_seconds() - t0;
        best = t < best ? t : best;
        if (which == 0 || which == 2)
            for (i = 0; i < (size_t)BENCH_ATTN_ROWS * BENCH_ATTN_GROUP; i++)
                scores[i] = 1.0f / BENCH_ATTN_ROWS;
        runs++;
    } while (runs < 3 || bench_now_seconds() - start < budget);
    return best * 1e9 / BENCH_ATTN_ROWS;
}

static void bench_attn_rows(const bench_context *ctx, const float *k32, const uint16_t *k16, const uint16_t *v16,
                            const float *q)
{
    static const char *names[4] = {"f32 row scores, 512 rows in L2", "f32 row values, 512 rows in L2",
                                   "f16 row scores, 512 rows in L2", "f16 row values, 512 rows in L2"};
    float qt[BENCH_ATTN_DIM * BENCH_ATTN_GROUP], scores[BENCH_ATTN_ROWS * BENCH_ATTN_GROUP];
    float acc[BENCH_ATTN_DIM * BENCH_ATTN_GROUP];
    int which;
    memset(acc, 0, sizeof acc);
    pmpd_attn_transpose_query(q, BENCH_ATTN_DIM, BENCH_ATTN_GROUP, BENCH_ATTN_DIM, 0.125f, qt);
    for (which = 0; which < 4; which++)
        bench_row(ctx, "attention", names[which], bench_attn_row_kernel(ctx, which, k32, k16, v16, qt, scores, acc),
                  "ns/row", "4 query heads x 64 dims, one KV head");
}

int bench_attention(bench_context *ctx)
{
    static const size_t contexts[] = {1024, 4096, 16384, 32768};
    size_t n_contexts = ctx->quick ? 2 : 4, i, c;
    size_t elements = (size_t)BENCH_ATTN_MAX_CONTEXT * BENCH_ATTN_KV_HEADS * BENCH_ATTN_DIM, scratch_floats;
    uint64_t rng = 7;
    /* K and V of both formats in one block, 64-byte aligned as a session's
     * arena places its cache (malloc's 16 bytes would split every 512-bit
     * load of a row across two cache lines). */
    unsigned char *kv_block = (unsigned char *)malloc(elements * 2 * (sizeof(float) + sizeof(uint16_t)) + 64);
    float *k32 = kv_block ? (float *)(void *)(kv_block + (64 - (uintptr_t)kv_block % 64)) : NULL;
    float *v32 = k32 + (k32 ? elements : 0);
    uint16_t *k16 = (uint16_t *)(void *)(v32 + (k32 ? elements : 0)), *v16 = k16 + (k32 ? elements : 0);
    float q[BENCH_ATTN_HEADS * BENCH_ATTN_DIM], out[BENCH_ATTN_HEADS * BENCH_ATTN_DIM];
    bench_attn_pq pq2, pq4;
    bench_attn_exact exact;
    /* NULL (no from-memory rows) where 384 MiB cannot be had; written once
     * so that every page is its own (untouched pages would all read one
     * zero page). */
    unsigned char *evict = ctx->quick ? NULL : (unsigned char *)malloc(BENCH_ATTN_EVICT_BYTES);
    int status = 0;
    bench_section(ctx, "KV-cache attention: one decode step, 32 heads x 64 dims, 8 KV heads, 1 thread");
    bench_attn_bytes(ctx);
    if (!k32 || !v32 || !k16 || !v16 || bench_attn_pq_init(&pq2, 2, &rng) != 0 || bench_attn_pq_init(&pq4, 4, &rng) != 0 ||
        !pmpd_attn_exact_group_scratch_floats(BENCH_ATTN_MAX_CONTEXT, BENCH_ATTN_GROUP, BENCH_ATTN_DIM,
                                              &scratch_floats) ||
        !(exact.scratch = (float *)malloc(scratch_floats * sizeof(float)))) {
        fprintf(stderr, "pmpd-bench: attention buffers do not fit\n");
        return 1;
    }
    for (i = 0; i < elements; i++) {
        /* element d of position t of KV head h: i = (h context + t) dim + d */
        size_t row = i / BENCH_ATTN_DIM, head_start = row / BENCH_ATTN_MAX_CONTEXT * BENCH_ATTN_MAX_CONTEXT;
        k32[i] = bench_attn_random(&rng);
        v32[i] = bench_attn_random(&rng);
        k16[head_start * BENCH_ATTN_DIM + pmpd_kv_key_at(row - head_start, i % BENCH_ATTN_DIM, BENCH_ATTN_DIM)] =
            pmpd_f32_to_f16(k32[i]);
        v16[i] = pmpd_f32_to_f16(v32[i]);
    }
    if (evict)
        memset(evict, 1, BENCH_ATTN_EVICT_BYTES);
    for (i = 0; i < BENCH_ATTN_HEADS * BENCH_ATTN_DIM; i++)
        q[i] = 2.0f * bench_attn_random(&rng);
    exact.q = q;
    exact.out = out;
    for (c = 0; c < n_contexts * 2; c++) {
        size_t n = contexts[c % n_contexts];
        unsigned char *from_memory = c < n_contexts ? NULL : evict;
        double t32, t16, tpq2, tpq4;
        char name[80], note[96];
        const char *how = from_memory ? ", from memory" : "";
        if (c == n_contexts && !evict)
            break;
        exact.n = n;
        exact.key_format = exact.value_format = PMPD_KV_ROW_F32;
        exact.element_bytes = sizeof(float);
        exact.keys = (const unsigned char *)k32;
        exact.values = (const unsigned char *)v32;
        t32 = bench_attn_time(ctx, &exact, NULL, q, out, from_memory);
        exact.key_format = PMPD_KV_ROW_F16_KEY_BLOCKS;
        exact.value_format = PMPD_KV_ROW_F16;
        exact.element_bytes = sizeof(uint16_t);
        exact.keys = (const unsigned char *)k16;
        exact.values = (const unsigned char *)v16;
        t16 = bench_attn_time(ctx, &exact, NULL, q, out, from_memory);
        pq2.cache.n_coded = pq4.cache.n_coded = (uint32_t)(n - BENCH_ATTN_DIM);
        pq2.cache.n_recent = pq4.cache.n_recent = BENCH_ATTN_DIM;
        tpq2 = bench_attn_time(ctx, NULL, &pq2, q, out, from_memory);
        tpq4 = bench_attn_time(ctx, NULL, &pq4, q, out, from_memory);
        {
            /* Bytes of K+V each mode reads per step (PQ: codes of the
             * history plus the f32 window; its tables stay in cache). */
            double rows = (double)n * BENCH_ATTN_KV_HEADS, f32_bytes = rows * BENCH_ATTN_DIM * 8.0;
            double pq_window = (double)BENCH_ATTN_DIM * BENCH_ATTN_KV_HEADS * BENCH_ATTN_DIM * 8.0;
            double pq2_bytes = (rows - BENCH_ATTN_DIM * BENCH_ATTN_KV_HEADS) * (BENCH_ATTN_DIM / 2) * 2.0 + pq_window;
            double pq4_bytes = (rows - BENCH_ATTN_DIM * BENCH_ATTN_KV_HEADS) * (BENCH_ATTN_DIM / 4) * 2.0 + pq_window;
            snprintf(name, sizeof name, "f32 cache, context %zuK%s", n / 1024, how);
            snprintf(note, sizeof note, "%.1f GB/s of K+V", f32_bytes / t32 * 1e-9);
            bench_row(ctx, "attention", name, t32 * 1e3, "ms", note);
            snprintf(name, sizeof name, "f16 cache, context %zuK%s", n / 1024, how);
            snprintf(note, sizeof note, "%.2fx f32, %.1f GB/s of K+V", t32 / t16, f32_bytes / 2.0 / t16 * 1e-9);
            bench_row(ctx, "attention", name, t16 * 1e3, "ms", note);
            snprintf(name, sizeof name, "pq 2-dim cache, context %zuK%s", n / 1024, how);
            snprintf(note, sizeof note, "%.2fx f32, %.2fx f16, %.1f GB/s", t32 / tpq2, t16 / tpq2,
                     pq2_bytes / tpq2 * 1e-9);
            bench_row(ctx, "attention", name, tpq2 * 1e3, "ms", note);
            snprintf(name, sizeof name, "pq 4-dim cache, context %zuK%s", n / 1024, how);
            snprintf(note, sizeof note, "%.2fx f32, %.2fx f16, %.1f GB/s", t32 / tpq4, t16 / tpq4,
                     pq4_bytes / tpq4 * 1e-9);
            bench_row(ctx, "attention", name, tpq4 * 1e3, "ms", note);
        }
    }
    bench_attn_rows(ctx, k32, k16, v16, q);
    bench_attn_flush(ctx, &pq2, "pq 2-dim window flush (64 tok x 8 heads)");
    bench_attn_flush(ctx, &pq4, "pq 4-dim window flush (64 tok x 8 heads)");
    free(kv_block);
    free(exact.scratch);
    free(evict);
    bench_attn_pq_free(&pq2);
    bench_attn_pq_free(&pq4);
    return status;
}
