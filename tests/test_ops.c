/* The element-wise operations of the forward pass against double-precision
 * formulas: SwiGLU's vector loops (core/vexp.h's exp) and RMSNorm's vector
 * sum of squares, with their scalar tails. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "pmpd_impl/core/splitmix.h"
#include "pmpd_impl/model/ops.h"

/* Worst |got - want| / (|want| + 1e-30) of SwiGLU over gate and up: below
 * g = -87 the exp is clamped, so outputs under about 1e-36 are only that
 * small, not exact. */
static double swiglu_worst(const float *gate, const float *up, size_t n)
{
    float *out = malloc((n ? n : 1) * sizeof *out);
    double worst = 0.0;
    size_t i;
    assert_non_null(out);
    for (i = 0; i < n; i++)
        out[i] = gate[i];
    pmpd_ops_swiglu(out, up, n);
    for (i = 0; i < n; i++) {
        const double g = gate[i], want = g / (1.0 + exp(-g)) * up[i];
        const double err = fabs(out[i] - want) / (fabs(want) + 1e-30);
        worst = err > worst ? err : worst;
    }
    free(out);
    return worst;
}

static void test_swiglu_matches_formula(void **state)
{
    /* Lengths around every vector width (4, 8, 16) and a real hidden size. */
    static const size_t lengths[] = {1, 3, 4, 7, 8, 15, 16, 17, 33, 63, 5632};
    static const float special[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 20.0f, -20.0f, 87.0f, -87.0f, 88.5f, -88.5f,
                                    100.0f, -100.0f, 0.5f, -0.5f, 3.0e-8f, -3.0e-8f};
    uint64_t rng = 77;
    size_t l, i;
    (void)state;
    for (l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
        const size_t n = lengths[l];
        float *gate = malloc(n * sizeof *gate), *up = malloc(n * sizeof *up);
        double worst;
        assert_non_null(gate);
        assert_non_null(up);
        for (i = 0; i < n; i++) {
            /* Mostly the activations' range, every 9th from +-100. */
            const double u = pmpd_splitmix64_unit(&rng) * 2.0 - 1.0;
            gate[i] = (float)(i % 9 == 8 ? 100.0 * u : 8.0 * u);
            up[i] = (float)(pmpd_splitmix64_unit(&rng) * 4.0 - 2.0);
            if (n > 64 && i < sizeof special / sizeof special[0])
                gate[i] = special[i];
        }
        worst = swiglu_worst(gate, up, n);
        printf("swiglu n=%zu: worst relative error %.3g\n", n, worst);
        /* A few float roundings: the exp's 2^-22 plus the products'. */
        assert_true(worst <= 4e-6);
        free(gate);
        free(up);
    }
}

static void test_rmsnorm_matches_formula(void **state)
{
    static const size_t lengths[] = {1, 5, 8, 16, 31, 32, 33, 64, 100, 2048};
    uint64_t rng = 5;
    size_t l, i;
    (void)state;
    for (l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
        const size_t n = lengths[l];
        float *x = malloc(n * sizeof *x), *w = malloc(n * sizeof *w), *out = malloc(n * sizeof *out);
        double ss = 0.0, worst = 0.0;
        assert_non_null(x);
        assert_non_null(w);
        assert_non_null(out);
        for (i = 0; i < n; i++) {
            x[i] = (float)(pmpd_splitmix64_unit(&rng) * 6.0 - 3.0);
            w[i] = (float)(pmpd_splitmix64_unit(&rng) * 2.0);
            ss += (double)x[i] * x[i];
        }
        pmpd_ops_rmsnorm(out, x, w, n, 1e-5f);
        for (i = 0; i < n; i++) {
            const double want = w[i] * (x[i] / sqrt(ss / (double)n + 1e-5));
            const double err = fabs(out[i] - want) / (fabs(want) + 1e-30);
            worst = err > worst ? err : worst;
        }
        printf("rmsnorm n=%zu: worst relative error %.3g\n", n, worst);
        assert_true(worst <= 2e-6);
        free(x);
        free(w);
        free(out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_swiglu_matches_formula),
        cmocka_unit_test(test_rmsnorm_matches_formula),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
