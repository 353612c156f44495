/* Linear layers: y = W x for f32 and f16 weights against a double-precision
 * brute-force product, on awkward shapes (rows and columns not multiples of
 * the vector width, one row, one column); batched results equal per-token
 * results exactly; thread counts change nothing.  Covers the compiled-in
 * vector kernel (through pmpd_linear), the scalar reference and the
 * embedding row lookup. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd.h"
#include "pmpd_impl/exec/pool.h"
#include "pmpd_impl/model/f16.h"
#include "pmpd_impl/model/linear.h"
#include "pmpd_impl/weights/float/linear_float.h"
#include "tests/support/test_support.h"

typedef struct matrix {
    pmpd_tensor tensor;
    float *values;   /* the weights as floats (after f16 rounding) */
    void *storage;
} matrix;

static void make_matrix(matrix *m, uint32_t type, size_t rows, size_t cols, test_rng *rng)
{
    size_t i, n = rows * cols;
    memset(&m->tensor, 0, sizeof m->tensor);
    m->values = (float *)malloc(n * sizeof(float) + 1);
    m->storage = malloc(n * (type == PMPD_TENSOR_F16 ? 2 : 4) + 1);
    for (i = 0; i < n; i++) {
        float v = test_rng_normal(rng);
        if (type == PMPD_TENSOR_F16) {
            ((uint16_t *)m->storage)[i] = pmpd_f32_to_f16(v);
            v = pmpd_f16_to_f32(((uint16_t *)m->storage)[i]);
        } else {
            ((float *)m->storage)[i] = v;
        }
        m->values[i] = v;
    }
    m->tensor.type = type;
    m->tensor.n_dims = 2;
    m->tensor.dims[0] = rows;
    m->tensor.dims[1] = cols;
    m->tensor.data = m->storage;
    m->tensor.size = n * (type == PMPD_TENSOR_F16 ? 2 : 4);
}

static void free_matrix(matrix *m)
{
    free(m->values);
    free(m->storage);
}

static unsigned char pool_memory[1 << 14];

static pmpd_pool *make_pool(unsigned n_threads)
{
    pmpd_arena arena;
    pmpd_pool *pool = NULL;
    pmpd_arena_init(&arena, pool_memory, sizeof pool_memory);
    assert_int_equal(pmpd_pool_create(&arena, n_threads, 0, &pool), PMPD_OK);
    return pool;
}

static void check_shape(uint32_t type, size_t rows, size_t cols, size_t n_tokens, pmpd_pool *pool,
                        test_rng *rng)
{
    matrix m;
    float *x = (float *)malloc(n_tokens * cols * sizeof(float));
    float *y = (float *)malloc(n_tokens * rows * sizeof(float));
    float *y1 = (float *)malloc((rows > cols ? rows : cols) * sizeof(float));
    float *yref = (float *)malloc(n_tokens * rows * sizeof(float));
    size_t t, r, c, scratch_bytes = 1;
    make_matrix(&m, type, rows, cols, rng);
    for (t = 0; t < n_tokens * cols; t++)
        x[t] = test_rng_normal(rng);
    assert_int_equal(pmpd_linear_scratch_bytes(&m.tensor, n_tokens, pmpd_pool_threads(pool), &scratch_bytes),
                     PMPD_OK);
    assert_int_equal(scratch_bytes, 0);
    pmpd_linear(&m.tensor, x, n_tokens, y, NULL, pool, 0);
    pmpd_linear_float_reference(&m.tensor, x, n_tokens, yref);
    for (t = 0; t < n_tokens; t++) {
        /* One token at a time gives the same bits. */
        pmpd_linear(&m.tensor, x + t * cols, 1, y1, NULL, pool, 0);
        assert_memory_equal(y1, y + t * rows, rows * sizeof(float));
        for (r = 0; r < rows; r++) {
            double exact = 0, magnitude = 0;
            for (c = 0; c < cols; c++) {
                exact += (double)m.values[r * cols + c] * x[t * cols + c];
                magnitude += fabs((double)m.values[r * cols + c] * x[t * cols + c]);
            }
            /* Float summation error bound, with room for any order; the
             * compiled-in kernel and the scalar reference both meet it. */
            double bound = 1e-6 * (double)cols * magnitude + 1e-30;
            if (fabs(y[t * rows + r] - exact) > bound || fabs(yref[t * rows + r] - exact) > bound)
                fail_msg("%s %zux%zu, token %zu row %zu: %g (reference %g) vs %g",
                         type == PMPD_TENSOR_F16 ? "f16" : "f32", rows, cols, t, r, (double)y[t * rows + r],
                         (double)yref[t * rows + r], exact);
        }
    }
    for (r = 0; r < rows; r += rows > 3 ? rows / 3 : 1) {
        pmpd_linear_row(&m.tensor, r, y1);
        assert_memory_equal(y1, m.values + r * cols, cols * sizeof(float));
    }
    free_matrix(&m);
    free(x);
    free(y);
    free(y1);
    free(yref);
}

static void test_awkward_shapes_match_brute_force(void **state)
{
    static const size_t rows[] = {1, 3, 4, 5, 17, 64};
    static const size_t cols[] = {1, 3, 4, 7, 8, 9, 31, 64, 65, 172};
    static const size_t tokens[] = {1, 2, 5};
    test_rng rng;
    pmpd_pool *pool = make_pool(1);
    size_t ri, ci, ti, k;
    (void)state;
    test_rng_seed(&rng, 3);
    for (k = 0; k < 2; k++)
        for (ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
            for (ci = 0; ci < sizeof cols / sizeof cols[0]; ci++)
                for (ti = 0; ti < sizeof tokens / sizeof tokens[0]; ti++)
                    check_shape(k ? PMPD_TENSOR_F16 : PMPD_TENSOR_F32, rows[ri], cols[ci], tokens[ti], pool, &rng);
    pmpd_pool_destroy(pool);
}

static void test_threads_change_nothing(void **state)
{
    test_rng rng;
    matrix m;
    size_t rows = 37, cols = 100, n_tokens = 6, t;
    float x[6 * 100], y1[6 * 37], y3[6 * 37];
    pmpd_pool *pool;
    (void)state;
    test_rng_seed(&rng, 9);
    make_matrix(&m, PMPD_TENSOR_F16, rows, cols, &rng);
    for (t = 0; t < n_tokens * cols; t++)
        x[t] = test_rng_normal(&rng);
    pool = make_pool(1);
    pmpd_linear(&m.tensor, x, n_tokens, y1, NULL, pool, 0);
    pmpd_pool_destroy(pool);
    pool = make_pool(PMPD_MAX_THREADS < 3 ? PMPD_MAX_THREADS : 3);
    pmpd_linear(&m.tensor, x, n_tokens, y3, NULL, pool, 0);
    pmpd_pool_destroy(pool);
    assert_memory_equal(y1, y3, sizeof y1);
    free_matrix(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_awkward_shapes_match_brute_force),
        cmocka_unit_test(test_threads_change_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
