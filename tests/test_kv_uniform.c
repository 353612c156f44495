/* The KV baselines and the exact-attention path: per-row uniform int8 /
 * int4 / int2 quantization stays within half a step of the input; exact
 * attention over f32 rows equals double-precision softmax attention; over
 * int8 rows it stays close; and the bytes per token of every mode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd.h"
#include "pmpd_impl/kvcache/exact_attention.h"
#include "pmpd_impl/kvcache/uniform_quant.h"
#include "tests/support/test_support.h"

#define DIM 20
#define ROWS 45
#define HEADS 3

static void test_uniform_error_bound(void **state)
{
    static const uint32_t widths[3] = {8, 4, 2};
    test_rng rng;
    float x[DIM], y[DIM];
    unsigned char row[64];
    int w, trial, i;
    (void)state;
    test_rng_seed(&rng, 11);
    assert_int_equal(pmpd_kv_uniform_row_bytes(DIM, 8), 8 + DIM);
    assert_int_equal(pmpd_kv_uniform_row_bytes(DIM, 4), 8 + DIM / 2);
    assert_int_equal(pmpd_kv_uniform_row_bytes(DIM, 2), 8 + DIM / 4);
    assert_int_equal(pmpd_kv_uniform_row_bytes(DIM, 3), 0);
    for (w = 0; w < 3; w++)
        for (trial = 0; trial < 20; trial++) {
            float lo = INFINITY, hi = -INFINITY, step;
            for (i = 0; i < DIM; i++) {
                x[i] = test_rng_normal(&rng) * (trial == 0 ? 0.0f : 1.0f);
                lo = x[i] < lo ? x[i] : lo;
                hi = x[i] > hi ? x[i] : hi;
            }
            step = (hi - lo) / (float)((1u << widths[w]) - 1);
            pmpd_kv_uniform_encode(x, DIM, widths[w], row);
            pmpd_kv_uniform_decode(row, DIM, widths[w], y);
            for (i = 0; i < DIM; i++)
                assert_true(fabsf(x[i] - y[i]) <= 0.5f * step + 1e-6f);
        }
}

static void test_exact_attention(void **state)
{
    test_rng rng;
    float q[HEADS * DIM], k[ROWS * DIM], v[ROWS * DIM], qt[DIM * 4], out[HEADS * DIM];
    float max[4], sum[4], acc[DIM * 4], *scratch;
    unsigned char kq[ROWS * (8 + DIM)], vq[ROWS * (8 + DIM)];
    double expect[HEADS * DIM];
    size_t i, scratch_floats, n;
    pmpd_kv_rows keys, values;
    pmpd_attn_partial part;
    (void)state;
    test_rng_seed(&rng, 12);
    for (i = 0; i < HEADS * DIM; i++)
        q[i] = 2.0f * test_rng_normal(&rng);
    for (i = 0; i < ROWS * DIM; i++) {
        k[i] = test_rng_normal(&rng);
        v[i] = test_rng_normal(&rng);
    }
    for (i = 0; i < ROWS; i++) {
        pmpd_kv_uniform_encode(k + i * DIM, DIM, 8, kq + i * (8 + DIM));
        pmpd_kv_uniform_encode(v + i * DIM, DIM, 8, vq + i * (8 + DIM));
    }
    assert_true(pmpd_attn_exact_scratch_floats(ROWS, 4, DIM, &scratch_floats));
    scratch = malloc(scratch_floats * sizeof(float));
    assert_non_null(scratch);
    part.max = max;
    part.sum = sum;
    part.acc = acc;
    pmpd_attn_transpose_query(q, DIM, HEADS, DIM, 1.0f / sqrtf((float)DIM), qt);
    for (n = 1; n <= ROWS; n += 11) {
        keys.format = values.format = PMPD_KV_ROW_F32;
        keys.row_bytes = values.row_bytes = DIM * sizeof(float);
        keys.data = (const unsigned char *)k;
        values.data = (const unsigned char *)v;
        pmpd_attn_exact_partial(qt, 4, DIM, &keys, &values, n, scratch, &part);
        pmpd_attn_partial_finish(&part, HEADS, DIM, out, DIM);
        test_softmax_attention(q, HEADS, DIM, k, v, DIM, n, expect);
        for (i = 0; i < HEADS * DIM; i++)
            assert_true(fabs(out[i] - expect[i]) <= 1e-5 * (1.0 + fabs(expect[i])));
        /* int8 rows: close to the exact result, not equal. */
        keys.format = values.format = PMPD_KV_ROW_INT8;
        keys.row_bytes = values.row_bytes = 8 + DIM;
        keys.data = kq;
        values.data = vq;
        pmpd_attn_exact_partial(qt, 4, DIM, &keys, &values, n, scratch, &part);
        pmpd_attn_partial_finish(&part, HEADS, DIM, out, DIM);
        for (i = 0; i < HEADS * DIM; i++)
            assert_true(fabs(out[i] - expect[i]) <= 0.05);
    }
    free(scratch);
}

static void test_bytes_per_token(void **state)
{
    size_t b = 0;
    (void)state;
    /* 8 KV heads of 64 dims, K and V. */
    assert_int_equal(pmpd_kv_bytes_per_token(PMPD_KV_F32, 8, 64, 0, 0, 0, &b), PMPD_OK);
    assert_int_equal(b, 8 * 2 * 64 * 4);
    assert_int_equal(pmpd_kv_bytes_per_token(PMPD_KV_F16, 8, 64, 0, 0, 0, &b), PMPD_OK);
    assert_int_equal(b, 8 * 2 * 64 * 2);
    assert_int_equal(pmpd_kv_bytes_per_token(PMPD_KV_PQ, 8, 64, 2, 2, 8, &b), PMPD_OK);
    assert_int_equal(b, 8 * 2 * 32);
    assert_int_equal(pmpd_kv_bytes_per_token(PMPD_KV_PQ, 8, 64, 4, 4, 8, &b), PMPD_OK);
    assert_int_equal(b, 8 * 2 * 16);
    assert_int_equal(pmpd_kv_bytes_per_token(PMPD_KV_INT8, 8, 64, 0, 0, 0, &b), PMPD_OK);
    assert_int_equal(b, 8 * 2 * (64 + 8));
    assert_int_equal(pmpd_kv_bytes_per_token(PMPD_KV_INT4, 8, 64, 0, 0, 0, &b), PMPD_OK);
    assert_int_equal(b, 8 * 2 * (32 + 8));
    assert_int_equal(pmpd_kv_bytes_per_token(PMPD_KV_PQ, 8, 64, 2, 2, 4, &b), PMPD_OK);
    assert_int_equal(b, 8 * 2 * 16); /* two 4-bit codes per byte */
    assert_int_equal(pmpd_kv_bytes_per_token(PMPD_KV_PQ, 8, 64, 4, 4, 4, &b), PMPD_OK);
    assert_int_equal(b, 8 * 2 * 8);
    assert_int_equal(pmpd_kv_bytes_per_token(PMPD_KV_PQ, 8, 64, 3, 2, 8, &b), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_kv_bytes_per_token(PMPD_KV_PQ, 8, 64, 2, 2, 9, &b), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_kv_bytes_per_token(99, 8, 64, 2, 2, 8, &b), PMPD_ERR_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uniform_error_bound),
        cmocka_unit_test(test_exact_attention),
        cmocka_unit_test(test_bytes_per_token),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
