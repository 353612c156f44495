/* binary16 conversions used by f16 weights and the f16 KV cache, against a
 * decoding written from the IEEE 754 definition (ldexp in double) and a
 * brute-force nearest-value search. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "pmpd_impl/model/f16.h"
#include "tests/support/test_support.h"

/* The value of a binary16 bit pattern, straight from the definition. */
static double half_value(unsigned h)
{
    unsigned exponent = (h >> 10) & 31, mantissa = h & 1023;
    double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (exponent == 31)
        return mantissa ? NAN : sign * INFINITY;
    if (exponent == 0)
        return sign * ldexp((double)mantissa, -24);
    return sign * ldexp((double)(1024 + mantissa), (int)exponent - 25);
}

static void test_every_half_decodes_exactly(void **state)
{
    unsigned h;
    (void)state;
    for (h = 0; h < 65536; h++) {
        double want = half_value(h);
        float got = pmpd_f16_to_f32((uint16_t)h);
        if (isnan(want)) {
            assert_true(isnan(got));
            assert_true(isnan(pmpd_f16_to_f32(pmpd_f32_to_f16(got))));
        } else {
            assert_true((double)got == want);
            assert_true(!signbit(got) == !signbit(want));
            /* Every half survives the round trip. */
            assert_int_equal(pmpd_f32_to_f16(got), h);
        }
    }
}

static void test_midpoints_round_to_even(void **state)
{
    unsigned h;
    (void)state;
    /* Between consecutive finite positive halves (and past the largest). */
    for (h = 0; h < 0x7BFF; h++) {
        float mid = (float)((half_value(h) + half_value(h + 1)) / 2.0);
        unsigned even = (h & 1) ? h + 1 : h;
        assert_int_equal(pmpd_f32_to_f16(mid), even);
        assert_int_equal(pmpd_f32_to_f16(-mid), even | 0x8000);
    }
    assert_int_equal(pmpd_f32_to_f16(65520.0f), 0x7C00);
    assert_int_equal(pmpd_f32_to_f16(65519.0f), 0x7BFF);
    assert_int_equal(pmpd_f32_to_f16(1e30f), 0x7C00);
    assert_int_equal(pmpd_f32_to_f16(-INFINITY), 0xFC00);
    assert_int_equal(pmpd_f32_to_f16(1e-30f), 0x0000);
    assert_int_equal(pmpd_f32_to_f16(-1e-30f), 0x8000);
}

static void test_random_floats_go_to_the_nearest_half(void **state)
{
    test_rng rng;
    int i;
    (void)state;
    test_rng_seed(&rng, 7);
    for (i = 0; i < 200000; i++) {
        /* Magnitudes from subnormal halves to the top of the range. */
        float x = test_rng_uniform(&rng) * (float)ldexp(1.0, (int)(test_rng_u32(&rng) % 40) - 24);
        unsigned h = pmpd_f32_to_f16(x), below = h & 0x7FFF;
        double err = fabs(half_value(h) - (double)x);
        if (below > 0)
            assert_true(err <= fabs(half_value((h & 0x8000) | (below - 1)) - (double)x));
        if (below < 0x7BFF)
            assert_true(err <= fabs(half_value((h & 0x8000) | (below + 1)) - (double)x));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_half_decodes_exactly),
        cmocka_unit_test(test_midpoints_round_to_even),
        cmocka_unit_test(test_random_floats_go_to_the_nearest_half),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
