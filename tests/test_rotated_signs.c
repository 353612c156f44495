/* The rotated formats' input signs (pmpd_impl/weights/rotated/rotated.h):
 * the compiled flip (a vector kernel where the target has one) against the
 * sign stream read one bit per column and applied by negation, on widths
 * around the vector and 64-column word boundaries, in place and while
 * copying into a rotation; and the rotation against the scalar Hadamard
 * oracle of the negated, zero-padded row. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd_impl/core/hadamard.h"
#include "pmpd_impl/weights/rotated/rotated.h"
#include "tests/support/test_support.h"

#define MAX_COLS 1100

static const size_t widths[] = {1, 3, 4, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 100, 127, 128, 129, 176, 1000, 1100};

/* x with column c negated where bit c of the seed's sign words is set. */
static void negate_by_signs(uint64_t seed, const float *x, float *out, size_t cols)
{
    uint64_t signs[(MAX_COLS + 63) / 64];
    size_t c;
    pmpd_rotated_signs(seed, signs, (cols + 63) / 64);
    for (c = 0; c < cols; c++)
        out[c] = (signs[c / 64] >> (c % 64) & 1) ? -x[c] : x[c];
}

static void test_flip_matches_the_sign_stream(void **state)
{
    static float x[MAX_COLS + 1], y[MAX_COLS + 1], want[MAX_COLS];
    test_rng rng;
    size_t w, c;
    (void)state;
    test_rng_seed(&rng, 7);
    for (w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        const size_t cols = widths[w];
        const uint64_t seed = 0x1234u + w;
        for (c = 0; c < cols; c++)
            x[c] = test_rng_uniform(&rng);
        x[cols] = 42.0f; /* past the row: must stay as it is */
        memcpy(y, x, sizeof x);
        negate_by_signs(seed, x, want, cols);
        pmpd_rotated_flip(seed, y, cols);
        assert_memory_equal(y, want, cols * sizeof(float));
        assert_true(y[cols] == 42.0f);
    }
}

static void test_rotation_is_hadamard_of_the_flipped_row(void **state)
{
    static float x[MAX_COLS], v[2048], want[2048];
    test_rng rng;
    size_t w, c;
    (void)state;
    test_rng_seed(&rng, 11);
    for (w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        const size_t cols = widths[w], rotation = pmpd_hadamard_size(cols);
        const pmpd_rotated r = pmpd_rotated_make(cols, rotation, (rotation + 31) / 32 * 32, 99u + w);
        if (rotation == 0)
            continue;
        assert_true(r.padded <= 2048);
        for (c = 0; c < cols; c++)
            x[c] = test_rng_uniform(&rng);
        memset(want, 0, sizeof want);
        negate_by_signs(r.seed, x, want, cols);
        pmpd_hadamard_scalar(want, rotation, 0);
        pmpd_rotated_rotate(&r, x, v);
        for (c = 0; c < r.padded; c++)
            assert_float_equal(v[c], want[c], 1e-5f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flip_matches_the_sign_stream),
        cmocka_unit_test(test_rotation_is_hadamard_of_the_flipped_row),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
