/* Hadamard transforms (pmpd_impl/core/hadamard.h) against a brute-force
 * product with the matrix built independently: Sylvester's recursion
 * H_2p = [[H_p, H_p], [H_p, -H_p]] for the power-of-two part, times the
 * Paley matrices (checked orthogonal here) for 12, 20, 28 and 44, on every size
 * from 1 to 4096 the transform takes; the compiled kernel against the
 * scalar oracle bit for bit; and the padding sizes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd_impl/core/hadamard.h"
#include "tests/support/test_support.h"

#define MAX_N 4096

static signed char *sylvester; /* [MAX_P][MAX_P], MAX_P = 4096 */

static void build_sylvester(void)
{
    size_t p, i, j;
    sylvester = (signed char *)malloc((size_t)MAX_N * MAX_N);
    assert_non_null(sylvester);
    sylvester[0] = 1;
    for (p = 1; p < MAX_N; p *= 2)
        for (i = 0; i < p; i++)
            for (j = 0; j < p; j++) {
                signed char v = sylvester[i * MAX_N + j];
                sylvester[i * MAX_N + j + p] = v;
                sylvester[(i + p) * MAX_N + j] = v;
                sylvester[(i + p) * MAX_N + j + p] = (signed char)-v;
            }
}

static int small_entry(unsigned m, unsigned i, unsigned j)
{
    return m == 1 ? 1 : (pmpd_hadamard_small_row(m, i) >> j & 1) ? -1 : 1;
}

static void test_small_matrices_are_hadamard(void **state)
{
    static const unsigned orders[4] = {12, 20, 28, 44};
    unsigned k, i, j, l;
    (void)state;
    for (k = 0; k < 4; k++) {
        unsigned m = orders[k];
        for (i = 0; i < m; i++) {
            assert_int_equal(pmpd_hadamard_small_row(m, i) >> m, 0);
            for (j = 0; j < m; j++) {
                int dot = 0;
                for (l = 0; l < m; l++)
                    dot += small_entry(m, i, l) * small_entry(m, j, l);
                assert_int_equal(dot, i == j ? (int)m : 0);
            }
        }
    }
}

static void test_sizes(void **state)
{
    (void)state;
    assert_int_equal(pmpd_hadamard_order(64), 1);
    assert_int_equal(pmpd_hadamard_order(192), 12);
    assert_int_equal(pmpd_hadamard_order(14336), 28);
    assert_int_equal(pmpd_hadamard_order(2560), 20);
    assert_int_equal(pmpd_hadamard_order(5632), 44); /* TinyLlama's feed-forward width */
    assert_int_equal(pmpd_hadamard_order(172), 0);
    assert_int_equal(pmpd_hadamard_order(88 * 3), 0);
    assert_int_equal(pmpd_hadamard_order(36), 0);
    assert_int_equal(pmpd_hadamard_order(0), 0);
    assert_int_equal(pmpd_hadamard_order(PMPD_HADAMARD_MAX * 2), 0);
    assert_int_equal(pmpd_hadamard_size(1), 1);
    assert_int_equal(pmpd_hadamard_size(5), 8);
    assert_int_equal(pmpd_hadamard_size(13), 16);
    assert_int_equal(pmpd_hadamard_size(172), 176); /* stories260K's feed-forward width */
    assert_int_equal(pmpd_hadamard_size(11008), 11264); /* Llama 2 7B's */
    assert_int_equal(pmpd_hadamard_size(5632), 5632);
    assert_int_equal(pmpd_hadamard_size(4096), 4096);
    assert_int_equal(pmpd_hadamard_size(PMPD_HADAMARD_MAX), PMPD_HADAMARD_MAX);
    assert_int_equal(pmpd_hadamard_size(PMPD_HADAMARD_MAX + 1), 0);
    assert_int_equal(pmpd_hadamard_size(0), 0);
}

static void test_against_brute_force(void **state)
{
    float *x = (float *)malloc(MAX_N * sizeof(float)), *y = (float *)malloc(MAX_N * sizeof(float));
    float *z = (float *)malloc(MAX_N * sizeof(float));
    test_rng rng;
    size_t n, i, j, checked = 0;
    int transpose;
    (void)state;
    assert_true(x && y && z);
    build_sylvester();
    test_rng_seed(&rng, 2);
    for (n = 1; n <= MAX_N; n++) {
        unsigned m = pmpd_hadamard_order(n);
        size_t p;
        if (!m)
            continue;
        p = n / m;
        checked++;
        for (transpose = 0; transpose < 2; transpose++) {
            double norm = 0;
            for (i = 0; i < n; i++) {
                x[i] = test_rng_normal(&rng);
                norm += (double)x[i] * x[i];
            }
            memcpy(y, x, n * sizeof(float));
            memcpy(z, x, n * sizeof(float));
            pmpd_hadamard_scalar(y, n, transpose);
            pmpd_hadamard(z, n, transpose);
            assert_memory_equal(y, z, n * sizeof(float));
            for (i = 0; i < n; i++) {
                double exact = 0;
                for (j = 0; j < n; j++) {
                    /* Entry (i, j) of H_m (x) H_p, or (j, i) for H^T. */
                    size_t a = transpose ? j : i, b = transpose ? i : j;
                    int sign = small_entry(m, (unsigned)(a / p), (unsigned)(b / p)) *
                               sylvester[(a % p) * MAX_N + b % p];
                    exact += sign * (double)x[j];
                }
                exact /= sqrt((double)n);
                if (fabs(exact - y[i]) > 1e-5 * sqrt(norm) + 1e-30)
                    fail_msg("n %zu transpose %d element %zu: %g, brute force %g", n, transpose, i, (double)y[i],
                             exact);
            }
            /* Orthonormal: H^T undoes H. */
            pmpd_hadamard(z, n, !transpose);
            for (i = 0; i < n; i++)
                assert_true(fabs(z[i] - x[i]) <= 1e-5 * sqrt(norm));
        }
    }
    /* 13 powers of two, 9 + 8 + 8 + 7 multiples of 12, 20, 28, 44. */
    assert_int_equal(checked, 45);
    free(sylvester);
    free(x);
    free(y);
    free(z);
}

/* Sizes beyond the brute force: the kernel still equals the oracle. */
static void test_large_sizes_match_the_oracle(void **state)
{
    static const size_t sizes[5] = {16384, 12288, 14336, 11264, PMPD_HADAMARD_MAX};
    float *y = (float *)malloc(PMPD_HADAMARD_MAX * sizeof(float));
    float *z = (float *)malloc(PMPD_HADAMARD_MAX * sizeof(float));
    test_rng rng;
    size_t k, i;
    (void)state;
    assert_true(y && z);
    test_rng_seed(&rng, 3);
    for (k = 0; k < 5; k++) {
        for (i = 0; i < sizes[k]; i++)
            y[i] = z[i] = test_rng_normal(&rng);
        pmpd_hadamard_scalar(y, sizes[k], 1);
        pmpd_hadamard(z, sizes[k], 1);
        assert_memory_equal(y, z, sizes[k] * sizeof(float));
    }
    free(y);
    free(z);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_matrices_are_hadamard),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_against_brute_force),
        cmocka_unit_test(test_large_sizes_match_the_oracle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
