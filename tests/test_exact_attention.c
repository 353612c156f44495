/* Grouped exact attention (pmpd_attn_exact_group, which sessions use for
 * f32/f16/int8/int4 caches) against a double-precision softmax computed
 * here: 3 query heads sharing rows stored at a stride (another head's rows
 * in between, as in a [position][kv_dim] cache), f32 and f16 rows (f16
 * keys in blocks of 16 positions, as the cache keeps them), context
 * lengths on both sides of the pass boundaries at 512 and 1024 rows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>

#include <cmocka.h>

#include "pmpd.h"
#include "pmpd_impl/kvcache/attention_kernels.h"
#include "pmpd_impl/kvcache/exact_attention.h"
#include "pmpd_impl/model/f16.h"
#include "tests/support/test_support.h"

#define EA_HEADS 3
#define EA_DIM 64
#define EA_ROWS 1300
#define EA_STRIDE (2 * EA_DIM) /* floats from one row to the next */

static void test_group_matches_double_softmax(void **state)
{
    static const size_t lengths[] = {1, 2, 511, 512, 513, 1024, 1025, EA_ROWS};
    static float k[EA_ROWS * EA_STRIDE], v[EA_ROWS * EA_STRIDE];
    static uint16_t k16[EA_ROWS * EA_STRIDE], v16[EA_ROWS * EA_STRIDE];
    /* the f16 keys as a cache keeps them: blocks of 16 positions */
    static uint16_t key_blocks[(EA_ROWS + PMPD_KV_KEY_BLOCK - 1) / PMPD_KV_KEY_BLOCK * PMPD_KV_KEY_BLOCK * EA_DIM];
    static double expect[EA_HEADS * EA_DIM];
    float q[EA_HEADS * EA_DIM], out[EA_HEADS * EA_DIM], *scratch;
    size_t i, c, scratch_floats;
    test_rng rng;
    int f16;
    (void)state;
    test_rng_seed(&rng, 31);
    for (i = 0; i < EA_HEADS * EA_DIM; i++)
        q[i] = 3.0f * test_rng_normal(&rng);
    for (i = 0; i < EA_ROWS * EA_STRIDE; i++) {
        k16[i] = pmpd_f32_to_f16(test_rng_normal(&rng));
        v16[i] = pmpd_f32_to_f16(test_rng_normal(&rng));
        /* The f32 rows hold the same values, so one oracle serves both. */
        k[i] = pmpd_f16_to_f32(k16[i]);
        v[i] = pmpd_f16_to_f32(v16[i]);
    }
    for (i = 0; i < EA_ROWS * EA_DIM; i++)
        key_blocks[pmpd_kv_key_at(i / EA_DIM, i % EA_DIM, EA_DIM)] = k16[i / EA_DIM * EA_STRIDE + i % EA_DIM];
    assert_true(pmpd_attn_exact_group_scratch_floats(EA_ROWS, EA_HEADS, EA_DIM, &scratch_floats));
    scratch = (float *)malloc(scratch_floats * sizeof(float));
    assert_non_null(scratch);
    for (c = 0; c < sizeof lengths / sizeof lengths[0]; c++) {
        size_t n = lengths[c];
        test_softmax_attention(q, EA_HEADS, EA_DIM, k, v, EA_STRIDE, n, expect);
        for (f16 = 0; f16 <= 1; f16++) {
            pmpd_kv_rows keys, values;
            keys.format = f16 ? PMPD_KV_ROW_F16_KEY_BLOCKS : PMPD_KV_ROW_F32;
            values.format = f16 ? PMPD_KV_ROW_F16 : PMPD_KV_ROW_F32;
            keys.row_bytes = f16 ? EA_DIM * sizeof(uint16_t) : EA_STRIDE * sizeof(float);
            values.row_bytes = EA_STRIDE * (f16 ? sizeof(uint16_t) : sizeof(float));
            keys.data = f16 ? (const unsigned char *)key_blocks : (const unsigned char *)k;
            values.data = f16 ? (const unsigned char *)v16 : (const unsigned char *)v;
            pmpd_attn_exact_group(q, EA_HEADS, EA_DIM, &keys, &values, n, scratch, out);
            for (i = 0; i < EA_HEADS * EA_DIM; i++)
                assert_true(fabs(out[i] - expect[i]) <= 2e-5 * (1.0 + fabs(expect[i])));
        }
    }
    free(scratch);
}

/* The scratch stops growing once the context exceeds one pass. */
static void test_scratch_is_bounded(void **state)
{
    size_t small = 0, large = 0, huge = 0;
    (void)state;
    assert_true(pmpd_attn_exact_group_scratch_floats(512, 4, EA_DIM, &small));
    assert_true(pmpd_attn_exact_group_scratch_floats(32768, 4, EA_DIM, &large));
    assert_true(pmpd_attn_exact_group_scratch_floats((size_t)1 << 30, 4, EA_DIM, &huge));
    assert_int_equal(small, large);
    assert_int_equal(large, huge);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_group_matches_double_softmax),
        cmocka_unit_test(test_scratch_is_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
