/* The rotary embedding of each architecture against a rotation written out
 * in double precision here: NeoX halves (i with i + head_dim/2), Meta's
 * adjacent pairs, and Llama 3.1's per-pair frequency divisors
 * (rope_freqs.weight); then the divisors pmpd-mkgguf writes against Llama
 * 3.1's published rule, evaluated here from its definition. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd.h"
#include "pmpd_impl/model/ops.h"
#include "pmpd_impl/offline/synth/synth.h"

#define HEAD_DIM 16
#define HEADS 3

/* A fixed pseudo-random vector (LCG), values in [-1, 1). */
static void fill(float *x, size_t n, uint32_t seed)
{
    size_t i;
    for (i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((double)(seed >> 8) / 8388608.0 - 1.0);
    }
}

/* Angle of pair i at pos: pos * theta^(-2i/d), divided by divisors[i]. */
static double angle_of(size_t pos, size_t i, double theta, const float *divisors)
{
    double a = (double)pos * pow(theta, -(double)(2 * i) / HEAD_DIM);
    return divisors ? a / divisors[i] : a;
}

/* Rotates every head of x (HEADS heads) in place, pairing element a(i) with
 * b(i), where neox picks (i, i + d/2) and otherwise (2i, 2i + 1). */
static void brute_rotate(double *x, size_t pos, double theta, const float *divisors, int neox)
{
    size_t h, i;
    for (h = 0; h < HEADS; h++) {
        for (i = 0; i < HEAD_DIM / 2; i++) {
            size_t a = h * HEAD_DIM + (neox ? i : 2 * i), b = h * HEAD_DIM + (neox ? i + HEAD_DIM / 2 : 2 * i + 1);
            double t = angle_of(pos, i, theta, divisors), xa = x[a], xb = x[b];
            x[a] = xa * cos(t) - xb * sin(t);
            x[b] = xa * sin(t) + xb * cos(t);
        }
    }
}

/* pmpd's angles and rotation of style against the brute force, at
 * several positions; tolerance grows with the angle (float phase). */
static void check_style(uint32_t style, const float *divisors)
{
    static const size_t positions[] = {0, 1, 7, 100, 1000};
    const double theta = 500000.0;
    size_t p, i;
    for (p = 0; p < sizeof positions / sizeof positions[0]; p++) {
        float x[HEADS * HEAD_DIM], c[HEAD_DIM / 2], s[HEAD_DIM / 2];
        double want[HEADS * HEAD_DIM], tolerance = 1e-5 + 2e-7 * (double)positions[p];
        fill(x, HEADS * HEAD_DIM, (uint32_t)(positions[p] + 17 * style));
        for (i = 0; i < HEADS * HEAD_DIM; i++)
            want[i] = x[i];
        brute_rotate(want, positions[p], theta, divisors, style == PMPD_ROPE_NEOX);
        pmpd_ops_rope_angles(c, s, positions[p], HEAD_DIM, (float)theta, divisors);
        for (i = 0; i < HEAD_DIM / 2; i++) {
            assert_true(fabs(c[i] - cos(angle_of(positions[p], i, theta, divisors))) < tolerance);
            assert_true(fabs(s[i] - sin(angle_of(positions[p], i, theta, divisors))) < tolerance);
        }
        pmpd_ops_rope_for(style)(x, HEADS, HEAD_DIM, c, s);
        for (i = 0; i < HEADS * HEAD_DIM; i++)
            if (fabs(x[i] - want[i]) > 2 * tolerance)
                fail_msg("style %u pos %zu element %zu: %.7f, brute force %.7f", (unsigned)style, positions[p], i,
                         (double)x[i], want[i]);
    }
}

static void test_neox_halves(void **state)
{
    (void)state;
    check_style(PMPD_ROPE_NEOX, NULL);
}

static void test_adjacent_pairs(void **state)
{
    (void)state;
    check_style(PMPD_ROPE_ADJACENT, NULL);
}

/* The two styles really differ: element 1 moves with 0 in one, with 9 in
 * the other, so a model run with the wrong one would be caught. */
static void test_styles_differ(void **state)
{
    float a[HEAD_DIM], b[HEAD_DIM], c[HEAD_DIM / 2], s[HEAD_DIM / 2];
    size_t i, differ = 0;
    (void)state;
    fill(a, HEAD_DIM, 5);
    memcpy(b, a, sizeof a);
    pmpd_ops_rope_angles(c, s, 3, HEAD_DIM, 10000.0f, NULL);
    pmpd_ops_rope_apply(a, 1, HEAD_DIM, c, s);
    pmpd_ops_rope_apply_neox(b, 1, HEAD_DIM, c, s);
    for (i = 0; i < HEAD_DIM; i++)
        differ += fabsf(a[i] - b[i]) > 1e-3f;
    assert_true(differ > HEAD_DIM / 2);
}

/* Divisors 1..8 and fractions, with both pairings. */
static void test_rope_freqs_divisors(void **state)
{
    static const float divisors[HEAD_DIM / 2] = {1.0f, 1.0f, 1.25f, 2.0f, 3.5f, 5.0f, 8.0f, 8.0f};
    (void)state;
    check_style(PMPD_ROPE_ADJACENT, divisors);
    check_style(PMPD_ROPE_NEOX, divisors);
}

/* Without divisors the angles are llama2.c's expression, bit for bit (the
 * llama2.c vectors depend on it). */
static void test_plain_angles_are_llama2c(void **state)
{
    float c[32], s[32];
    size_t i, pos = 37;
    (void)state;
    pmpd_ops_rope_angles(c, s, pos, 64, 10000.0f, NULL);
    for (i = 0; i < 32; i++) {
        float freq = 1.0f / powf(10000.0f, (float)(2 * i) / 64.0f), val = (float)pos * freq;
        assert_true(c[i] == cosf(val) && s[i] == sinf(val));
    }
}

/* pmpd-mkgguf's factors against Llama 3.1's rope_scaling rule (factor 8,
 * low_freq_factor 1, high_freq_factor 4, original context 8192):
 * wavelength 2 pi / freq below 8192/4 keeps factor 1, above 8192 takes 8,
 * between them 1 / ((1 - smooth) / 8 + smooth) with
 * smooth = (8192 / wavelength - 1) / 3. */
static void test_mkgguf_llama3_factors(void **state)
{
    pmpd_synth_options o;
    float got[64];
    size_t i, ones = 0, eights = 0, between = 0;
    (void)state;
    pmpd_synth_options_default(&o);
    o.dim = 2048;
    o.n_heads = 16;
    o.head_dim = 128;
    o.rope_theta = 500000.0f;
    pmpd_synth_rope_factors(&o, got);
    for (i = 0; i < 64; i++) {
        double freq = pow(500000.0, -(double)(2 * i) / 128.0), wavelength = 2 * 3.14159265358979323846 / freq, want;
        if (wavelength < 2048.0) {
            want = 1.0;
            ones++;
        } else if (wavelength > 8192.0) {
            want = 8.0;
            eights++;
        } else {
            double smooth = (8192.0 / wavelength - 1.0) / 3.0;
            want = 1.0 / ((1.0 - smooth) / 8.0 + smooth);
            between++;
        }
        assert_true(fabs(got[i] - want) <= 1e-6 * want);
    }
    /* Llama 3.1 8B's head size and base exercise all three bands. */
    assert_true(ones > 0 && eights > 0 && between > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_neox_halves),
        cmocka_unit_test(test_adjacent_pairs),
        cmocka_unit_test(test_styles_differ),
        cmocka_unit_test(test_rope_freqs_divisors),
        cmocka_unit_test(test_plain_angles_are_llama2c),
        cmocka_unit_test(test_mkgguf_llama3_factors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
