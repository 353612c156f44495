/* The nested conversion gives the same bytes whatever the thread count:
 * stories260K and random matrices of awkward shapes (rows not a multiple
 * of the 4-row blocks or the 64-row steps threads take, columns not a
 * multiple of the 256-column superblocks, values with ties and signed
 * zeros) converted on 1 thread and on several are byte-identical, and
 * equal to one call of the public pmpd_anyprec_quantize over all rows.
 * The quantizer's radix sort gives exactly a comparison sort's order on
 * (value, column), so its output does not depend on the sort either.
 * Progress comes from the calling thread, rising, ending at the total. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd.h"
#include "pmpd_impl/offline/format/builder.h"
#include "pmpd_impl/offline/precision/anyprec_build.h"
#include "pmpd_impl/offline/precision/anyprec_sort.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

/* Shapes: rows below one step, across steps and blocks; columns below one
 * superblock, just above one, several with a tail. */
static const uint32_t thr_shapes[][2] = {{67, 300}, {130, 517}, {5, 1000}, {200, 33}, {64, 256}, {129, 64}};
#define THR_SHAPES (sizeof thr_shapes / sizeof thr_shapes[0])

static const float *thr_sort_values;

static int thr_compare(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    float vx = thr_sort_values[x], vy = thr_sort_values[y];
    if (vx != vy)
        return vx < vy ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Values with many ties, both zeros, tiny and huge magnitudes. */
static float thr_value(test_rng *rng)
{
    uint32_t kind = test_rng_u32(rng) % 8;
    if (kind == 0)
        return (float)((int)(test_rng_u32(rng) % 7) - 3) * 0.25f;
    if (kind == 1)
        return test_rng_u32(rng) % 2 ? 0.0f : -0.0f;
    if (kind == 2)
        return test_rng_normal(rng) * 1e-30f;
    if (kind == 3)
        return test_rng_normal(rng) * 1e30f;
    return test_rng_normal(rng) * 0.02f;
}

static void test_sort_is_comparison_order(void **state)
{
    static const size_t sizes[] = {0, 1, 2, 33, 256, 517, 5000};
    test_rng rng;
    size_t s, i;
    (void)state;
    test_rng_seed(&rng, 11);
    for (s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        float *row = (float *)malloc((n + 1) * sizeof *row);
        uint32_t *got = (uint32_t *)malloc((n + 1) * sizeof *got), *want = (uint32_t *)malloc((n + 1) * sizeof *want);
        uint64_t *scratch = (uint64_t *)malloc((2 * n + 1) * sizeof *scratch);
        assert_true(row && got && want && scratch);
        for (i = 0; i < n; i++) {
            row[i] = thr_value(&rng);
            want[i] = (uint32_t)i;
        }
        thr_sort_values = row;
        qsort(want, n, sizeof *want, thr_compare);
        pmpd_anyprec_sort_row(row, n, got, scratch);
        if (n)
            assert_memory_equal(got, want, n * sizeof *got);
        free(row);
        free(got);
        free(want);
        free(scratch);
    }
}

typedef struct thr_progress {
    uint64_t calls, last, total;
    int falling;
} thr_progress;

static void thr_progress_record(void *context, uint64_t done, uint64_t total)
{
    thr_progress *p = (thr_progress *)context;
    p->falling |= done < p->last;
    p->calls++;
    p->last = done;
    p->total = total;
}

static void thr_convert(pmpd_build_model *b, unsigned threads)
{
    thr_progress progress;
    uint64_t rows = 0;
    uint32_t i;
    memset(&progress, 0, sizeof progress);
    for (i = 0; i < b->n_tensors; i++)
        if (b->tensors[i].n_dims == 2 && strcmp(b->tensors[i].name, "token_embd.weight") != 0 &&
            strcmp(b->tensors[i].name, "output.weight") != 0)
            rows += b->tensors[i].dims[0];
    assert_int_equal(pmpd_anyprec_build_convert(b, 2, 4, NULL, threads, thr_progress_record, &progress), PMPD_OK);
    assert_true(progress.calls > 0);
    assert_false(progress.falling);
    assert_int_equal(progress.last, rows);
    assert_int_equal(progress.total, rows);
}

static void thr_assert_same(const pmpd_build_model *a, const pmpd_build_model *b)
{
    uint32_t i;
    assert_int_equal(a->n_tensors, b->n_tensors);
    for (i = 0; i < a->n_tensors; i++) {
        assert_string_equal(a->tensors[i].name, b->tensors[i].name);
        assert_int_equal(a->tensors[i].type, b->tensors[i].type);
        assert_true(a->tensors[i].size == b->tensors[i].size);
        assert_memory_equal(a->tensors[i].data, b->tensors[i].data, (size_t)a->tensors[i].size);
    }
}

static void test_stories_any_thread_count(void **state)
{
    static const unsigned threads[] = {2, 3, 8};
    pmpd_build_model one, many;
    unsigned t, anyprec = 0;
    uint32_t i;
    (void)state;
    assert_int_equal(test_import_shared("models/stories260K.bin", "models/tok512.bin", &one), PMPD_OK);
    thr_convert(&one, 1);
    for (i = 0; i < one.n_tensors; i++)
        anyprec += one.tensors[i].type == PMPD_TENSOR_ANYPREC;
    assert_true(anyprec >= 7 * 5); /* every layer's 7 matrices */
    for (t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        assert_int_equal(test_import_shared("models/stories260K.bin", "models/tok512.bin", &many), PMPD_OK);
        thr_convert(&many, threads[t]);
        thr_assert_same(&one, &many);
        pmpd_build_free(&many);
    }
    pmpd_build_free(&one);
}

static void thr_random_model(pmpd_build_model *b, float **w)
{
    test_rng rng;
    size_t s, i;
    pmpd_build_init(b);
    test_rng_seed(&rng, 5);
    for (s = 0; s < THR_SHAPES; s++) {
        uint64_t dims[2];
        char name[32];
        size_t n = (size_t)thr_shapes[s][0] * thr_shapes[s][1];
        w[s] = (float *)malloc(n * sizeof *w[s]);
        assert_non_null(w[s]);
        for (i = 0; i < n; i++)
            w[s][i] = thr_value(&rng);
        dims[0] = thr_shapes[s][0];
        dims[1] = thr_shapes[s][1];
        sprintf(name, "blk.%u.ffn_up.weight", (unsigned)s);
        assert_int_equal(pmpd_build_add_f32(b, name, 2, dims, w[s]), PMPD_OK);
    }
}

static void test_awkward_shapes_any_thread_count(void **state)
{
    static const unsigned threads[] = {2, 3, 7};
    pmpd_build_model one, many;
    float *w[THR_SHAPES], *unused[THR_SHAPES];
    unsigned t;
    size_t s;
    (void)state;
    thr_random_model(&one, w);
    thr_convert(&one, 1);
    /* One public call over all rows gives the same bytes. */
    for (s = 0; s < THR_SHAPES; s++) {
        uint64_t size = 0;
        unsigned char *direct;
        assert_int_equal(pmpd_anyprec_size(thr_shapes[s][0], thr_shapes[s][1], 2, 4, &size), PMPD_OK);
        direct = (unsigned char *)calloc((size_t)size, 1);
        assert_non_null(direct);
        assert_int_equal(pmpd_anyprec_quantize(w[s], thr_shapes[s][0], thr_shapes[s][1], NULL, 2, 4, 0,
                                               thr_shapes[s][0], direct, (size_t)size),
                         PMPD_OK);
        assert_int_equal(one.tensors[s].type, PMPD_TENSOR_ANYPREC);
        assert_true(one.tensors[s].size == size);
        assert_memory_equal(one.tensors[s].data, direct, (size_t)size);
        free(direct);
    }
    for (t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        thr_random_model(&many, unused);
        thr_convert(&many, threads[t]);
        thr_assert_same(&one, &many);
        pmpd_build_free(&many);
        for (s = 0; s < THR_SHAPES; s++)
            free(unused[s]);
    }
    pmpd_build_free(&one);
    for (s = 0; s < THR_SHAPES; s++)
        free(w[s]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sort_is_comparison_order),
        cmocka_unit_test(test_stories_any_thread_count),
        cmocka_unit_test(test_awkward_shapes_any_thread_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
