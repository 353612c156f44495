/* The SIMD attention kernels compiled into this build (AVX2 or NEON, and
 * the AVX-512 row kernels where the compiler targets them) give
 * the scalar reference's results within float rounding, for one and two
 * vectors of lanes, odd token counts and both subspace sizes.  Skipped when
 * the build has no SIMD set. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/kvcache/attention_kernels.h"
#include "pmpd_impl/kvcache/pq_lut8.h"
#include "pmpd_impl/kvcache/pq_values_bf16.h"
#include "pmpd_impl/model/f16.h"
#include "tests/support/test_support.h"

#if PMPD_USE_AVX2 || PMPD_KV_USE_NEON
#define KERNELS_SIMD 1
#define SIMD_KERNEL(name) PMPD_KV_KERNEL(name)
#else
#define KERNELS_SIMD 0
#endif

#define DIM 24
#define TOKENS 37

#if KERNELS_SIMD
static float *random_floats(test_rng *rng, size_t n, float scale)
{
    float *x = malloc(n * sizeof(float));
    size_t i;
    assert_non_null(x);
    for (i = 0; i < n; i++)
        x[i] = scale * test_rng_normal(rng);
    return x;
}

/* Within float rounding of sums of `terms` products of magnitude ~1,
 * added in another order (0 for results of a few operations). */
static void assert_close_sum(const float *a, const float *b, size_t n, uint32_t terms)
{
    size_t i;
    for (i = 0; i < n; i++)
        assert_true(fabsf(a[i] - b[i]) <= 1e-5f * (1.0f + fabsf(b[i])) + 1e-6f * (float)terms);
}

static void assert_close(const float *a, const float *b, size_t n)
{
    assert_close_sum(a, b, n, 0);
}

/* Rows of dim elements at a stride of dim + 3 (rows inside a larger
 * record), as f32 and as binary16. */
static void check_row_kernels(uint32_t lanes, uint32_t dim)
{
    const size_t stride = (size_t)dim + 3, n_rows = (size_t)TOKENS * stride;
    test_rng rng;
    float *qt, *rows, *widened, *scores_ref, *scores, max_ref[8], max[8], sum_ref[8], sum[8], *acc_ref, *acc, *acc_start;
    uint16_t *halves;
    size_t i;
    uint32_t l;
    test_rng_seed(&rng, lanes * 1000 + dim);
    qt = random_floats(&rng, (size_t)dim * lanes, 0.5f);
    rows = random_floats(&rng, n_rows, 1.0f);
    halves = malloc(n_rows * sizeof *halves);
    widened = malloc(n_rows * sizeof(float));
    scores_ref = malloc(TOKENS * lanes * sizeof(float));
    scores = malloc(TOKENS * lanes * sizeof(float));
    acc_start = random_floats(&rng, (size_t)dim * lanes, 1.0f);
    acc_ref = malloc((size_t)dim * lanes * sizeof(float));
    acc = malloc((size_t)dim * lanes * sizeof(float));
    assert_true(halves && widened && scores_ref && scores && acc_ref && acc);
    for (i = 0; i < n_rows; i++)
        halves[i] = pmpd_f32_to_f16(rows[i]);
    pmpd_kv_f16_to_f32_scalar(halves, n_rows, widened);

    for (l = 0; l < lanes; l++) {
        max_ref[l] = max[l] = -INFINITY;
        sum_ref[l] = sum[l] = 0.5f;
    }
    pmpd_kv_row_scores_scalar(qt, lanes, dim, rows, stride, TOKENS, scores_ref, max_ref);
    PMPD_KV_ROW_KERNEL(pmpd_kv_row_scores)(qt, lanes, dim, rows, stride, TOKENS, scores, max);
    assert_close_sum(scores, scores_ref, TOKENS * lanes, dim);
    assert_close_sum(max, max_ref, lanes, dim);
    pmpd_kv_exp_scalar(scores_ref, lanes, TOKENS, max_ref, sum_ref);
    PMPD_KV_EXP_KERNEL(scores, lanes, TOKENS, max_ref, sum);
    assert_close(scores, scores_ref, TOKENS * lanes);
    assert_close(sum, sum_ref, lanes);
    memcpy(acc_ref, acc_start, (size_t)dim * lanes * sizeof(float));
    memcpy(acc, acc_start, (size_t)dim * lanes * sizeof(float));
    pmpd_kv_row_accumulate_scalar(scores_ref, lanes, dim, rows, stride, TOKENS, acc_ref);
    PMPD_KV_ROW_KERNEL(pmpd_kv_row_accumulate)(scores_ref, lanes, dim, rows, stride, TOKENS, acc);
    assert_close_sum(acc, acc_ref, (size_t)dim * lanes, TOKENS);

    /* Binary16 keys in blocks: the f32 reference over the same values
     * widened, for counts that end a block, end inside one and leave an
     * odd number of blocks; the slots past the last key hold NaNs, which
     * must not reach a score or the maxima. */
    {
        static const size_t counts[] = {1, 15, 16, 17, 32, 33, TOKENS};
        const size_t block_halves = (size_t)PMPD_KV_KEY_BLOCK * dim;
        const size_t n_blocks = (TOKENS + PMPD_KV_KEY_BLOCK - 1) / PMPD_KV_KEY_BLOCK;
        uint16_t *blocks = malloc(n_blocks * block_halves * sizeof *blocks);
        size_t c, t;
        uint32_t d;
        assert_non_null(blocks);
        for (i = 0; i < n_blocks * block_halves; i++)
            blocks[i] = 0x7E00; /* a quiet NaN */
        for (t = 0; t < TOKENS; t++)
            for (d = 0; d < dim; d++)
                blocks[pmpd_kv_key_at(t, d, dim)] = halves[t * stride + d];
        for (c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            const size_t n = counts[c];
            for (l = 0; l < lanes; l++) {
                max_ref[l] = max[l] = -INFINITY;
                scores_ref[l] = scores[l] = 0.0f;
            }
            pmpd_kv_row_scores_scalar(qt, lanes, dim, widened, stride, n, scores_ref, max_ref);
            pmpd_kv_block_scores_f16_scalar(qt, lanes, dim, blocks, n, scores, max);
            assert_memory_equal(scores, scores_ref, n * lanes * sizeof(float));
            assert_memory_equal(max, max_ref, lanes * sizeof(float));
            for (l = 0; l < lanes; l++)
                max[l] = -INFINITY;
            PMPD_KV_ROW_KERNEL(pmpd_kv_block_scores_f16)(qt, lanes, dim, blocks, n, scores, max);
            assert_close_sum(scores, scores_ref, n * lanes, dim);
            assert_close_sum(max, max_ref, lanes, dim);
        }
        free(blocks);
    }
    pmpd_kv_row_scores_scalar(qt, lanes, dim, widened, stride, TOKENS, scores_ref, max_ref);
    memcpy(acc_ref, acc_start, (size_t)dim * lanes * sizeof(float));
    memcpy(acc, acc_start, (size_t)dim * lanes * sizeof(float));
    pmpd_kv_row_accumulate_scalar(scores_ref, lanes, dim, widened, stride, TOKENS, acc_ref);
    PMPD_KV_ROW_KERNEL(pmpd_kv_row_accumulate_f16)(scores_ref, lanes, dim, halves, stride, TOKENS, acc);
    assert_close_sum(acc, acc_ref, (size_t)dim * lanes, TOKENS);
    memcpy(acc, acc_start, (size_t)dim * lanes * sizeof(float));
    pmpd_kv_row_accumulate_f16_scalar(scores_ref, lanes, dim, halves, stride, TOKENS, acc);
    assert_memory_equal(acc, acc_ref, (size_t)dim * lanes * sizeof(float));
    free(qt);
    free(rows);
    free(halves);
    free(widened);
    free(scores_ref);
    free(scores);
    free(acc_start);
    free(acc_ref);
    free(acc);
}

/* The exponential against expf: within a few float roundings of each
 * result (the polynomial's error is ~1e-7 relative), inputs far below the
 * maximum included (clamped at -87: a weight below 2^-125 either way), for
 * lane counts that divide a 512-bit vector and ones that do not, and token
 * counts that leave a partial vector. */
static void check_exp(uint32_t lanes, size_t n)
{
    test_rng rng;
    float *x = malloc(n * lanes * sizeof(float)), *ref = malloc(n * lanes * sizeof(float));
    float max[32], sum[32], sum_ref[32];
    size_t i;
    uint32_t l;
    assert_true(x && ref && lanes <= 32);
    test_rng_seed(&rng, 700 + lanes * 100 + n);
    for (l = 0; l < lanes; l++) {
        max[l] = 3.0f * test_rng_normal(&rng);
        sum[l] = sum_ref[l] = 0.25f;
    }
    for (i = 0; i < n * lanes; i++) {
        float below = (i % 7 == 3 ? 75.0f : 10.0f) * (1.0f + test_rng_uniform(&rng)); /* [0, 150) or [0, 20) */
        x[i] = ref[i] = i % 11 == 5 ? max[i % lanes] : max[i % lanes] - below;
    }
    pmpd_kv_exp_scalar(ref, lanes, n, max, sum_ref);
    PMPD_KV_EXP_KERNEL(x, lanes, n, max, sum);
    for (i = 0; i < n * lanes; i++)
        assert_true(fabsf(x[i] - ref[i]) <= 1e-6f * ref[i] + 1e-30f);
    for (l = 0; l < lanes; l++)
        assert_true(fabsf(sum[l] - sum_ref[l]) <= 1e-6f * (float)n * sum_ref[l]);
    free(x);
    free(ref);
}

/* dim and tokens: with and without a tail of the AVX2 kernels' passes of
 * four or eight subspaces and their blocks of 128 tokens. */
static void check_pq_kernels(uint32_t lanes, uint32_t sub_dim, uint32_t bits, uint32_t dim, size_t tokens)
{
    test_rng rng;
    pmpd_pq_codebook book;
    size_t lut_floats, code_bytes, i;
    float *centroids, *qt, *lut_ref, *lut, *scores_ref, *scores, *bins_ref, *bins, *acc_start, *acc_ref, *acc;
    float max_ref[16], max[16];
    uint8_t *codes;
    uint32_t l;
    test_rng_seed(&rng, 100 + lanes * sub_dim + bits + dim);
    assert_int_equal(pmpd_pq_layout_init(&book.layout, dim, sub_dim, bits), PMPD_OK);
    centroids = random_floats(&rng, pmpd_pq_codebook_floats(&book.layout), 1.0f);
    book.centroids = centroids;
    lut_floats = (size_t)book.layout.n_sub * book.layout.n_centroids * lanes;
    qt = random_floats(&rng, (size_t)dim * lanes, 0.5f);
    lut_ref = malloc(lut_floats * sizeof(float));
    lut = malloc(lut_floats * sizeof(float));
    scores_ref = malloc(tokens * lanes * sizeof(float));
    scores = malloc(tokens * lanes * sizeof(float));
    bins_ref = calloc(lut_floats, sizeof(float));
    bins = calloc(lut_floats, sizeof(float));
    acc_start = random_floats(&rng, (size_t)dim * lanes, 1.0f);
    acc_ref = malloc((size_t)dim * lanes * sizeof(float));
    acc = malloc((size_t)dim * lanes * sizeof(float));
    /* Whole blocks of codes, as the cache allocates them. */
    code_bytes = (tokens + PMPD_PQ_BLOCK - 1) / PMPD_PQ_BLOCK * PMPD_PQ_BLOCK * book.layout.code_bytes;
    codes = malloc(code_bytes);
    assert_true(lut_ref && lut && scores_ref && scores && bins_ref && bins && acc_ref && acc && codes);
    memcpy(acc_ref, acc_start, (size_t)dim * lanes * sizeof(float));
    memcpy(acc, acc_start, (size_t)dim * lanes * sizeof(float));
    /* Packed layouts hold a code in each nibble. */
    for (i = 0; i < code_bytes; i++) {
        uint32_t low = test_rng_u32(&rng) % book.layout.n_centroids, high = test_rng_u32(&rng) % book.layout.n_centroids;
        codes[i] = (uint8_t)(book.layout.packed ? low | high << 4 : low);
    }
    for (l = 0; l < lanes; l++)
        max_ref[l] = max[l] = -INFINITY;

    pmpd_pq_lut_scalar(&book, qt, lanes, lut_ref);
    SIMD_KERNEL(pmpd_pq_lut)(&book, qt, lanes, lut);
    assert_close(lut, lut_ref, lut_floats);
    pmpd_pq_scores_scalar(lut_ref, &book.layout, lanes, codes, tokens, scores_ref, max_ref);
    SIMD_KERNEL(pmpd_pq_scores)(lut_ref, &book.layout, lanes, codes, tokens, scores, max);
    assert_close(scores, scores_ref, tokens * lanes);
    assert_close(max, max_ref, lanes);
    pmpd_pq_bins_scalar(scores_ref, lanes, &book.layout, codes, tokens, bins_ref);
    SIMD_KERNEL(pmpd_pq_bins)(scores_ref, lanes, &book.layout, codes, tokens, bins);
    assert_close(bins, bins_ref, lut_floats);
    pmpd_pq_bins_times_codebook_scalar(bins_ref, &book, lanes, acc_ref);
    SIMD_KERNEL(pmpd_pq_bins_times_codebook)(bins_ref, &book, lanes, acc);
    assert_close(acc, acc_ref, (size_t)dim * lanes);
    /* The whole value side (the SIMD set may skip the bins): the scalar
     * bins, then the scalar bins x codebook, are its oracle. */
    memcpy(acc, acc_start, (size_t)dim * lanes * sizeof(float));
    SIMD_KERNEL(pmpd_pq_values)(scores_ref, lanes, &book, codes, tokens, bins, acc);
    assert_close_sum(acc, acc_ref, (size_t)dim * lanes, (uint32_t)tokens);
    free(centroids);
    free(qt);
    free(lut_ref);
    free(lut);
    free(scores_ref);
    free(scores);
    free(bins_ref);
    free(bins);
    free(acc_start);
    free(acc_ref);
    free(acc);
    free(codes);
}
#endif

#if PMPD_PQ_USE_LUT8
/* The 8-bit key tables: the SIMD build and scores give the scalar ones'
 * bytes and floats exactly, and the scores stay within the documented
 * bound of the float tables' (n_sub * step / 2, plus float rounding). */
static void check_lut8(uint32_t lanes, uint32_t sub_dim, uint32_t bits, uint32_t dim, size_t tokens, int hulls,
                       const float *given)
{
    test_rng rng;
    pmpd_pq_codebook book;
    pmpd_pq_lut8 ref, simd;
    size_t table_floats, code_bytes, i;
    float *centroids, *tables, *qt, *lut, *exact, *scores_ref, *scores, max_ref[16], max[16], max_exact[16];
    uint8_t *codes;
    uint32_t l;
    pmpd_pq_lut8 *both[2];
    test_rng_seed(&rng, 300 + lanes * sub_dim + bits + dim);
    assert_int_equal(pmpd_pq_layout_init(&book.layout, dim, sub_dim, bits), PMPD_OK);
    assert_true(pmpd_pq_lut8_fits(&book.layout));
    centroids = random_floats(&rng, pmpd_pq_codebook_floats(&book.layout), 1.0f);
    if (given)
        memcpy(centroids, given, pmpd_pq_codebook_floats(&book.layout) * sizeof(float));
    book.centroids = centroids;
    /* The tables a cache makes at init; both builds take the ranges over
     * the hulls (hulls) or over every centroid. */
    tables = malloc(pmpd_pq_lut8_book_floats(&book.layout) * sizeof(float));
    assert_non_null(tables);
    pmpd_pq_lut8_book(&book, tables);
    qt = random_floats(&rng, (size_t)dim * lanes, 0.5f);
    table_floats = (size_t)book.layout.n_sub * book.layout.n_centroids * lanes;
    lut = malloc(table_floats * sizeof(float));
    exact = malloc(tokens * lanes * sizeof(float));
    scores_ref = malloc(tokens * lanes * sizeof(float));
    scores = malloc(tokens * lanes * sizeof(float));
    code_bytes = (tokens + PMPD_PQ_BLOCK - 1) / PMPD_PQ_BLOCK * PMPD_PQ_BLOCK * book.layout.code_bytes;
    codes = malloc(code_bytes);
    assert_true(lut && exact && scores_ref && scores && codes);
    for (i = 0; i < code_bytes; i++)
        codes[i] = (uint8_t)(test_rng_u32(&rng) % book.layout.n_centroids);
    both[0] = &ref;
    both[1] = &simd;
    for (i = 0; i < 2; i++) {
        pmpd_pq_lut8_book_view(&book.layout, tables, both[i]);
        if (!hulls)
            both[i]->hull_count = NULL;
        both[i]->minimum = malloc((size_t)book.layout.n_sub * lanes * sizeof(float));
        both[i]->step = malloc(lanes * sizeof(float));
        both[i]->offset = malloc(lanes * sizeof(float));
        both[i]->table = malloc((size_t)book.layout.n_sub * lanes * 256);
        assert_true(both[i]->minimum && both[i]->step && both[i]->offset && both[i]->table);
        /* Bytes past n_centroids must be written too. */
        memset(both[i]->table, 0xa5, (size_t)book.layout.n_sub * lanes * 256);
    }
    for (l = 0; l < lanes; l++)
        max_ref[l] = max[l] = max_exact[l] = -INFINITY;

    pmpd_pq_lut8_build_scalar(&book, qt, lanes, &ref);
    PMPD_PQ_LUT8_KERNEL(pmpd_pq_lut8_build)(&book, qt, lanes, &simd);
    assert_memory_equal(simd.minimum, ref.minimum, (size_t)book.layout.n_sub * lanes * sizeof(float));
    assert_memory_equal(simd.step, ref.step, lanes * sizeof(float));
    assert_memory_equal(simd.offset, ref.offset, lanes * sizeof(float));
    assert_memory_equal(simd.table, ref.table, (size_t)book.layout.n_sub * lanes * 256);
    pmpd_pq_lut8_scores_scalar(&ref, &book.layout, lanes, codes, tokens, scores_ref, max_ref);
    PMPD_PQ_LUT8_KERNEL(pmpd_pq_lut8_scores)(&simd, &book.layout, lanes, codes, tokens, scores, max);
    assert_memory_equal(scores, scores_ref, tokens * lanes * sizeof(float));
    assert_memory_equal(max, max_ref, lanes * sizeof(float));

    pmpd_pq_lut_scalar(&book, qt, lanes, lut);
    pmpd_pq_scores_scalar(lut, &book.layout, lanes, codes, tokens, exact, max_exact);
    for (i = 0; i < tokens * lanes; i++) {
        float bound = (float)book.layout.n_sub * ref.step[i % lanes] * 0.5f;
        assert_true(fabsf(scores[i] - exact[i]) <= bound * 1.001f + 1e-5f * (1.0f + fabsf(exact[i])));
    }
    for (i = 0; i < 2; i++) {
        free(both[i]->minimum);
        free(both[i]->step);
        free(both[i]->offset);
        free(both[i]->table);
    }
    free(centroids);
    free(tables);
    free(qt);
    free(lut);
    free(exact);
    free(scores_ref);
    free(scores);
    free(codes);
}
#endif

#if PMPD_PQ_USE_VALUES_BF16
/* The bfloat16 value side: the SIMD kernel gives the scalar reference's
 * sums within float rounding (another order), and both stay within 2^-8
 * of sum |w c| of the float value side's. */
static void check_values_bf16(uint32_t lanes, uint32_t sub_dim, uint32_t bits, uint32_t dim, size_t tokens)
{
    test_rng rng;
    pmpd_pq_codebook book;
    size_t code_bytes, acc_floats = (size_t)dim * lanes, i, t;
    float *centroids, *weights, *acc_ref, *acc, *acc_float, *bins, scratch[PMPD_PQ_BF16_SCRATCH_FLOATS];
    uint8_t *codes, *planes;
    test_rng_seed(&rng, 500 + lanes * sub_dim + bits + dim);
    assert_int_equal(pmpd_pq_layout_init(&book.layout, dim, sub_dim, bits), PMPD_OK);
    assert_true(pmpd_pq_bf16_fits(&book.layout));
    centroids = random_floats(&rng, pmpd_pq_codebook_floats(&book.layout), 1.0f);
    book.centroids = centroids;
    weights = malloc(tokens * lanes * sizeof(float));
    acc_ref = calloc(acc_floats, sizeof(float));
    acc = calloc(acc_floats, sizeof(float));
    acc_float = calloc(acc_floats, sizeof(float));
    bins = malloc((size_t)book.layout.n_sub * book.layout.n_centroids * lanes * sizeof(float));
    planes = malloc(pmpd_pq_bf16_plane_bytes(&book.layout));
    code_bytes = (tokens + PMPD_PQ_BLOCK - 1) / PMPD_PQ_BLOCK * PMPD_PQ_BLOCK * book.layout.code_bytes;
    codes = malloc(code_bytes);
    assert_true(weights && acc_ref && acc && acc_float && bins && planes && codes);
    for (i = 0; i < tokens * lanes; i++)
        weights[i] = (float)(test_rng_u32(&rng) % 10000) / 10000.0f;
    for (i = 0; i < code_bytes; i++)
        codes[i] = (uint8_t)(test_rng_u32(&rng) % book.layout.n_centroids);
    pmpd_pq_bf16_planes(&book, planes);
    pmpd_pq_values_bf16_scalar(weights, lanes, &book.layout, planes, codes, tokens, scratch, acc_ref);
    PMPD_PQ_VALUES_BF16_KERNEL(pmpd_pq_values_bf16)(weights, lanes, &book.layout, planes, codes, tokens, scratch,
                                                    acc);
    assert_close_sum(acc, acc_ref, acc_floats, (uint32_t)tokens);
    pmpd_pq_values_scalar(weights, lanes, &book, codes, tokens, bins, acc_float);
    for (i = 0; i < acc_floats; i++) {
        uint32_t s = (uint32_t)(i / lanes) / sub_dim, j = (uint32_t)(i / lanes) % sub_dim, l = (uint32_t)(i % lanes);
        double bound = 0.0;
        for (t = 0; t < tokens; t++)
            bound += fabs(weights[t * lanes + l] *
                          centroids[((size_t)s * book.layout.n_centroids + pmpd_pq_code(&book.layout, codes, t, s)) *
                                        sub_dim + j]);
        assert_true(fabs(acc[i] - acc_float[i]) <= bound / 256.0 + 1e-5 * tokens);
    }
    free(centroids);
    free(weights);
    free(acc_ref);
    free(acc);
    free(acc_float);
    free(bins);
    free(planes);
    free(codes);
}
#endif

static void test_values_bf16(void **state)
{
    (void)state;
#if PMPD_PQ_USE_VALUES_BF16
    /* Partial tiles and blocks, several tiles, one and three lane quads. */
    check_values_bf16(4, 2, 8, 64, 300);
    check_values_bf16(4, 4, 8, 64, 64);
    check_values_bf16(12, 2, 6, 24, 37);
    check_values_bf16(8, 4, 8, 16, 4500);
    check_values_bf16(4, 2, 8, 8, 1);
#else
    skip();
#endif
}

static void test_lut8(void **state)
{
    (void)state;
#if PMPD_PQ_USE_LUT8
    /* Partial and whole 64-token blocks, one and three quads of lanes,
     * 2- and 4-dim subspaces, 256 and 32 centroids. */
    check_lut8(4, 2, 8, 64, 300, 1, NULL);
    check_lut8(4, 2, 8, 64, 300, 0, NULL);
    check_lut8(4, 4, 8, 64, 64, 1, NULL);
    check_lut8(12, 2, 8, 24, 37, 1, NULL);
    check_lut8(8, 4, 5, 20, 129, 1, NULL);
    check_lut8(4, 2, 8, 128, 1, 1, NULL);
    check_lut8(8, 2, 5, 16, 70, 1, NULL);
#else
    skip();
#endif
}

/* Awkward 2-dim codebooks for the hulls (pq_lut8_book.c): subspace 0
 * random, 1 on a line, 2 one point repeated, 3 on a circle (more vertices
 * than kept: every centroid is read), 4 a 16 x 16 grid (edges full of
 * points that are no vertices), 5 a random cloud with duplicates. */
static float *hull_codebook(test_rng *rng)
{
    float *c = malloc(6 * 256 * 2 * sizeof(float));
    uint32_t i;
    assert_non_null(c);
    for (i = 0; i < 6 * 256 * 2; i++)
        c[i] = (float)(test_rng_u32(rng) / 2147483648.0 - 1.0);
    for (i = 0; i < 256; i++) {
        float *p = c + 2 * (1 * 256 + i), *same = c + 2 * (2 * 256 + i), *circle = c + 2 * (3 * 256 + i);
        float *grid = c + 2 * (4 * 256 + i), *dup = c + 2 * (5 * 256 + i);
        p[0] = 0.25f * (float)(i % 37) - 3.0f;
        p[1] = -0.5f * (float)(i % 37) + 1.0f;
        same[0] = 0.75f;
        same[1] = -0.25f;
        circle[0] = (float)cos(i * 6.283185307179586 / 256.0);
        circle[1] = (float)sin(i * 6.283185307179586 / 256.0);
        grid[0] = (float)(i % 16) * 0.125f;
        grid[1] = (float)(i / 16) * 0.5f;
        if (i >= 128) {
            dup[0] = c[2 * (5 * 256 + i - 128)];
            dup[1] = c[2 * (5 * 256 + i - 128) + 1];
        }
    }
    return c;
}

/* The hulls hold every subspace's least and largest q . c, in counts of
 * whole vectors, and the byte tables built over them match the scalar
 * reference bit for bit. */
static void test_lut8_hull(void **state)
{
    test_rng rng;
    pmpd_pq_codebook book;
    pmpd_pq_lut8 view;
    float *c, *tables;
    uint32_t s, i, k;
    (void)state;
    test_rng_seed(&rng, 77);
    c = hull_codebook(&rng);
    assert_int_equal(pmpd_pq_layout_init(&book.layout, 12, 2, 8), PMPD_OK);
    book.centroids = c;
    tables = malloc(pmpd_pq_lut8_book_floats(&book.layout) * sizeof(float));
    assert_non_null(tables);
    pmpd_pq_lut8_book(&book, tables);
    pmpd_pq_lut8_book_view(&book.layout, tables, &view);
    assert_int_equal(view.hull_count[2], 16);
    assert_int_equal(view.hull_count[3], 0);
    assert_int_equal(view.hull_count[4], 16);
    for (s = 0; s < 6; s++) {
        uint32_t n = view.hull_count[s] ? view.hull_count[s] : 256;
        const float *h = view.hull + (size_t)s * 2 * PMPD_PQ_LUT8_HULL;
        assert_true(n % 16 == 0 && (n <= PMPD_PQ_LUT8_HULL || !view.hull_count[s]));
        for (k = 0; k < 500 && view.hull_count[s]; k++) {
            double q0 = test_rng_u32(&rng) / 4294967296.0 - 0.5, q1 = test_rng_u32(&rng) / 4294967296.0 - 0.5;
            double lo = INFINITY, hi = -INFINITY, hull_lo = INFINITY, hull_hi = -INFINITY, x;
            for (i = 0; i < 256; i++) {
                x = q0 * c[2 * (s * 256 + i)] + q1 * c[2 * (s * 256 + i) + 1];
                lo = x < lo ? x : lo;
                hi = x > hi ? x : hi;
            }
            for (i = 0; i < n; i++) {
                x = q0 * h[i] + q1 * h[PMPD_PQ_LUT8_HULL + i];
                hull_lo = x < hull_lo ? x : hull_lo;
                hull_hi = x > hull_hi ? x : hull_hi;
            }
            assert_true(fabs(hull_lo - lo) <= 1e-12 && fabs(hull_hi - hi) <= 1e-12);
        }
    }
#if PMPD_PQ_USE_LUT8
    check_lut8(4, 2, 8, 12, 200, 1, c);
    check_lut8(8, 2, 8, 12, 65, 1, c);
#endif
    free(tables);
    free(c);
}

static void test_row_kernels(void **state)
{
    (void)state;
#if KERNELS_SIMD
    /* Head dims with and without a tail of 8 and 16 elements, the two the
     * kernels have constant-size copies of, one whose last 64-dim value
     * slice is partial, and one longer than the 256-dimension query pass. */
    static const uint32_t dims[] = {24, 13, 64, 128, 80, 300};
    size_t i;
    for (i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        check_row_kernels(4, dims[i]);
        check_row_kernels(8, dims[i]);
    }
#else
    skip();
#endif
}

static void test_exp(void **state)
{
    (void)state;
#if KERNELS_SIMD
    static const uint32_t lanes[] = {4, 8, 12, 16, 20};
    static const size_t counts[] = {1, 2, 3, 5, 37, 300};
    size_t i, j;
    for (i = 0; i < sizeof lanes / sizeof lanes[0]; i++)
        for (j = 0; j < sizeof counts / sizeof counts[0]; j++)
            check_exp(lanes[i], counts[j]);
#else
    skip();
#endif
}

static void test_pq_kernels(void **state)
{
    (void)state;
#if KERNELS_SIMD
    check_pq_kernels(4, 2, 8, DIM, TOKENS);
    check_pq_kernels(8, 4, 8, DIM, TOKENS);
    check_pq_kernels(4, 4, 5, DIM, TOKENS);
    check_pq_kernels(4, 2, 4, DIM, TOKENS);
    check_pq_kernels(8, 4, 3, DIM, TOKENS);
    check_pq_kernels(4, 2, 8, 64, 300);
    check_pq_kernels(8, 2, 6, 64, 300);
    check_pq_kernels(4, 4, 8, 64, 300);
    check_pq_kernels(12, 4, 7, 20, 129);
#else
    skip();
#endif
}

/* Nearest-centroid search: the same index as the scalar search, including
 * on exact ties (duplicated centroids, and equal distances on the coarse
 * grid), for 16, 32 and 256 centroids. */
static void test_nearest(void **state)
{
    static const uint32_t counts[3] = {16, 32, 256}, sub_dims[2] = {2, 4};
    test_rng rng;
    float columns[4 * 256], x[4];
    uint32_t k, d, trial, c, j;
    (void)state;
    test_rng_seed(&rng, 77);
    for (k = 0; k < 3; k++)
        for (d = 0; d < 2; d++)
            for (trial = 0; trial < 200; trial++) {
                uint32_t n = counts[k], sub = sub_dims[d], expect;
                for (c = 0; c < n; c++)
                    for (j = 0; j < sub; j++)
                        /* Every value twice (c and c ^ 1 share a centroid), on a coarse grid. */
                        columns[j * n + c] = (float)((test_rng_u32(&rng) % 5) * (c % 2 == 0)) +
                                             (c % 2 ? columns[j * n + c - 1] : 0.0f);
                for (j = 0; j < sub; j++)
                    x[j] = (float)(test_rng_u32(&rng) % 9) * 0.5f;
                expect = pmpd_pq_nearest_scalar(columns, n, sub, x);
                assert_true(expect % 2 == 0); /* ties go to the lower index */
#if KERNELS_SIMD
                assert_int_equal(PMPD_PQ_NEAREST_KERNEL(columns, n, sub, x), expect);
#endif
            }
}

/* Half-precision widening: every finite pattern class against values the
 * test computes from the definition. */
static void test_f16_to_f32(void **state)
{
    uint16_t src[11] = {0x0000, 0x8000, 0x3c00, 0xbc00, 0x7bff, 0x0001, 0x03ff, 0x0400, 0x3555, 0xc248, 0x7c00};
    float expect[11], out[11];
    size_t i;
    (void)state;
    for (i = 0; i < 11; i++) {
        int exponent = (src[i] >> 10) & 31, mantissa = src[i] & 1023;
        double v = exponent == 31 ? INFINITY
                   : exponent ? ldexp(1.0 + mantissa / 1024.0, exponent - 15)
                              : ldexp(mantissa / 1024.0, -14);
        expect[i] = (float)((src[i] & 0x8000) ? -v : v);
    }
    pmpd_kv_f16_to_f32_scalar(src, 11, out);
    for (i = 0; i < 11; i++)
        assert_true(out[i] == expect[i]);
#if KERNELS_SIMD
    SIMD_KERNEL(pmpd_kv_f16_to_f32)(src, 11, out);
    for (i = 0; i < 11; i++)
        assert_true(out[i] == expect[i]);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_row_kernels),
        cmocka_unit_test(test_exp),
        cmocka_unit_test(test_pq_kernels),
        cmocka_unit_test(test_lut8),
        cmocka_unit_test(test_lut8_hull),
        cmocka_unit_test(test_values_bf16),
        cmocka_unit_test(test_f16_to_f32),
        cmocka_unit_test(test_nearest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
