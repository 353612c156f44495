/* Quantized GEMV/GEMM kernels (pmpd_qmatmul: the SIMD kernel this build
 * selects) against the scalar reference, and the scalar reference against
 * a brute-force double-precision product of the dequantized operands.
 *
 * Exact mode: integer weights and activations with unit scales make every
 * partial sum an integer below 2^24, so SIMD and scalar results must be
 * bit-identical (the integer dot products are exact).  Float mode: random
 * weights and scales; SIMD and scalar differ only in the order of the
 * per-group float additions, bounded by 2^-20 * (groups + 4) * sum|terms|. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd_impl/weights/grouped/qmatmul.h"
#include "pmpd_impl/offline/quant/quant.h"
#include "tests/support/test_support.h"

typedef struct shape {
    size_t rows, cols, tokens;
} shape;

/* 1 row, rows not a multiple of 4, K not a multiple of 32, K = 32, large K,
 * more tokens than a GEMM token block (135 = 2 x 64 + 7); one-token (GEMV)
 * shapes with an even and an odd number of row blocks, so kernels that walk
 * several row blocks side by side meet their remainder. */
static const shape qmm_shapes[] = {
    {1, 32, 1},   {1, 33, 1},    {3, 40, 2},    {4, 32, 4},   {5, 64, 3},  {7, 31, 5},
    {9, 100, 8},  {13, 257, 9},  {2, 4096, 1},  {6, 4096, 3}, {33, 160, 17}, {37, 544, 12},
    {9, 96, 135}, {12, 96, 1},   {21, 200, 1},  {45, 1000, 1}, {64, 4096, 1},
};
static const uint32_t qmm_types[] = {PMPD_TENSOR_Q8, PMPD_TENSOR_Q4, PMPD_TENSOR_Q2CB};

static unsigned char *qmm_alloc_tensor(uint32_t type, size_t rows, size_t cols, size_t *bytes)
{
    uint64_t size;
    assert_int_equal(pmpd_qformat_tensor_bytes(type, rows, cols, &size), PMPD_OK);
    *bytes = (size_t)size;
    return (unsigned char *)malloc(*bytes);
}

/* Random valid bytes with every scale 1.0 (f16 0x3C00). */
static void qmm_fill_exact(uint32_t type, unsigned char *data, size_t bytes, size_t rows, size_t cols,
                           test_rng *rng)
{
    size_t header = pmpd_qformat_header_bytes(type), block = pmpd_qformat_block_bytes(type), i, b;
    size_t n_blocks = (bytes - header) / block;
    (void)rows;
    (void)cols;
    for (i = 0; i < header; i++)
        data[i] = (unsigned char)(signed char)((int)(test_rng_u32(rng) % 129) - 64);
    for (b = 0; b < n_blocks; b++) {
        unsigned char *p = data + header + b * block;
        for (i = 0; i < block; i++)
            p[i] = (unsigned char)test_rng_u32(rng);
        for (i = 0; i < PMPD_QROWS; i++) {
            p[2 * i] = 0x00;
            p[2 * i + 1] = 0x3C;
        }
        if (type == PMPD_TENSOR_Q8)
            for (i = 2 * PMPD_QROWS; i < block; i++)
                if (p[i] == 0x80)
                    p[i] = 0x81;
    }
}

/* Integers in [-127, 127] with 127 first in every group: scale exactly 1. */
static void qmm_fill_exact_x(float *x, size_t tokens, size_t cols, test_rng *rng)
{
    size_t t, c;
    for (t = 0; t < tokens; t++)
        for (c = 0; c < cols; c++)
            x[t * cols + c] = c % 32 == 0 ? 127.0f : (float)((int)(test_rng_u32(rng) % 255) - 127);
}

static pmpd_qact qmm_quantize_x(const float *x, size_t tokens, size_t cols, void **buffer)
{
    pmpd_arena arena;
    pmpd_qact act;
    size_t bytes;
    assert_int_equal(pmpd_qact_bytes(tokens, cols, &bytes), PMPD_OK);
    *buffer = malloc(bytes + PMPD_ARENA_ALIGNMENT);
    assert_non_null(*buffer);
    assert_int_equal(pmpd_arena_init(&arena, *buffer, bytes + PMPD_ARENA_ALIGNMENT), PMPD_OK);
    assert_int_equal(pmpd_qact_alloc(&arena, tokens, cols, &act), PMPD_OK);
    pmpd_qact_quantize(&act, x, cols, tokens, cols);
    return act;
}

/* The scalar reference into ref and the kernel this build selects into got,
 * over all rows of the type's tensor in data. */
static pmpd_qmatrix qmm_run_both(uint32_t type, const unsigned char *data, const shape *s, const pmpd_qact *act,
                                 float *ref, float *got)
{
    pmpd_qmatrix w;
    w.type = type;
    w.data = data;
    w.rows = s->rows;
    w.cols = s->cols;
    pmpd_qmatmul_scalar(&w, act, 0, s->rows, ref, s->rows);
    pmpd_qmatmul(&w, act, 0, s->rows, got, s->rows);
    return w;
}

/* Every type at every shape, drawing from one generator seeded with seed. */
static void qmm_each_case(uint64_t seed, void (*run_case)(uint32_t type, const shape *s, test_rng *rng))
{
    test_rng rng;
    size_t t, s;
    test_rng_seed(&rng, seed);
    for (t = 0; t < sizeof qmm_types / sizeof qmm_types[0]; t++)
        for (s = 0; s < sizeof qmm_shapes / sizeof qmm_shapes[0]; s++)
            run_case(qmm_types[t], &qmm_shapes[s], &rng);
}

static void qmm_exact_case(uint32_t type, const shape *s, test_rng *rng)
{
    size_t bytes, i;
    unsigned char *data = qmm_alloc_tensor(type, s->rows, s->cols, &bytes);
    float *x = (float *)malloc(s->tokens * s->cols * sizeof(float));
    float *ref = (float *)malloc(s->tokens * s->rows * sizeof(float));
    float *got = (float *)malloc(s->tokens * s->rows * sizeof(float));
    void *act_buffer;
    pmpd_qmatrix w;
    pmpd_qact act;
    qmm_fill_exact(type, data, bytes, s->rows, s->cols, rng);
    qmm_fill_exact_x(x, s->tokens, s->cols, rng);
    act = qmm_quantize_x(x, s->tokens, s->cols, &act_buffer);
    w = qmm_run_both(type, data, s, &act, ref, got);
    for (i = 0; i < s->tokens * s->rows; i++) {
        if (got[i] != ref[i])
            fail_msg("type %u shape %zux%zu t%zu: element %zu is %.1f, scalar %.1f", (unsigned)type, s->rows,
                     s->cols, s->tokens, i, (double)got[i], (double)ref[i]);
    }
    /* Splitting the rows (at row blocks) changes nothing. */
    memset(got, 0, s->tokens * s->rows * sizeof(float));
    for (i = 0; i < s->rows; i += 8)
        pmpd_qmatmul(&w, &act, i, i + 8 < s->rows ? i + 8 : s->rows, got, s->rows);
    assert_memory_equal(got, ref, s->tokens * s->rows * sizeof(float));
    free(act_buffer);
    free(data);
    free(x);
    free(ref);
    free(got);
}

static void test_exact_integer_products(void **state)
{
    (void)state;
    qmm_each_case(11, qmm_exact_case);
}

static void qmm_float_case(uint32_t type, const shape *s, test_rng *rng)
{
    size_t bytes, i, t, r, c, n_groups = pmpd_qformat_groups(s->cols);
    unsigned char *data = qmm_alloc_tensor(type, s->rows, s->cols, &bytes);
    float *wf = (float *)malloc(s->rows * s->cols * sizeof(float));
    float *wd = (float *)malloc(s->cols * sizeof(float));
    float *x = (float *)malloc(s->tokens * s->cols * sizeof(float));
    float *ref = (float *)malloc(s->tokens * s->rows * sizeof(float));
    float *got = (float *)malloc(s->tokens * s->rows * sizeof(float));
    void *act_buffer;
    pmpd_qmatrix w;
    pmpd_qact act;
    for (i = 0; i < s->rows * s->cols; i++)
        wf[i] = 0.02f * test_rng_normal(rng) * (1.0f + (float)(i / s->cols % 3));
    for (i = 0; i < s->tokens * s->cols; i++)
        x[i] = test_rng_normal(rng) * (i % 17 == 0 ? 6.0f : 1.0f);
    assert_int_equal(pmpd_quant_matrix(type, wf, s->rows, s->cols, 0, data, bytes), PMPD_OK);
    act = qmm_quantize_x(x, s->tokens, s->cols, &act_buffer);
    w = qmm_run_both(type, data, s, &act, ref, got);
    for (r = 0; r < s->rows; r++) {
        pmpd_qformat_dequantize_row(&w, r, wd);
        for (t = 0; t < s->tokens; t++) {
            double exact = 0.0, magnitude = 0.0, tolerance;
            for (c = 0; c < s->cols; c++) {
                double xd = (double)pmpd_qact_chunk(&act, t, c / 8)[c % 8] * act.scale[t * n_groups + c / 32];
                exact += (double)wd[c] * xd;
                magnitude += fabs((double)wd[c] * xd);
            }
            tolerance = ldexp((double)(n_groups + 4), -20) * magnitude + 1e-30;
            if (fabs((double)ref[t * s->rows + r] - exact) > tolerance)
                fail_msg("scalar: type %u shape %zux%zu row %zu token %zu: %g, exact %g", (unsigned)type, s->rows,
                         s->cols, r, t, (double)ref[t * s->rows + r], exact);
            if (fabs((double)got[t * s->rows + r] - (double)ref[t * s->rows + r]) > tolerance)
                fail_msg("simd: type %u shape %zux%zu row %zu token %zu: %g, scalar %g", (unsigned)type, s->rows,
                         s->cols, r, t, (double)got[t * s->rows + r], (double)ref[t * s->rows + r]);
        }
    }
    free(act_buffer);
    free(data);
    free(wf);
    free(wd);
    free(x);
    free(ref);
    free(got);
}

static void test_float_products(void **state)
{
    (void)state;
    qmm_each_case(12, qmm_float_case);
}

/* Activation quantization against its definition. */
static void test_activation_quantization(void **state)
{
    const size_t tokens = 3, cols = 70, n_groups = 3;
    float x[3 * 70];
    void *buffer;
    pmpd_qact act;
    test_rng rng;
    size_t t, c, g;
    (void)state;
    test_rng_seed(&rng, 13);
    for (c = 0; c < tokens * cols; c++)
        x[c] = 3.0f * test_rng_uniform(&rng);
    x[5] = 0.0f;
    for (c = 32; c < 64; c++)
        x[c] = 0.0f; /* an all-zero group */
    /* Token 1, group 0: absmax 127 (scale 1) and halves, so every value is
     * a rounding tie (nearest even: 2.5 -> 2, 3.5 -> 4, -2.5 -> -2). */
    x[cols] = -127.0f;
    for (c = 1; c < 32; c++)
        x[cols + c] = (float)((int)c - 16) + 0.5f;
    act = qmm_quantize_x(x, tokens, cols, &buffer);
    assert_int_equal(act.n_tokens, tokens);
    assert_int_equal(act.n_groups, n_groups);
    for (t = 0; t < tokens + 1; t++) {
        for (g = 0; g < n_groups; g++) {
            float amax = 0.0f;
            int32_t sum = 0;
            for (c = g * 32; c < g * 32 + 32 && c < cols && t < tokens; c++)
                amax = fabsf(x[t * cols + c]) > amax ? fabsf(x[t * cols + c]) : amax;
            assert_true(act.scale[t * n_groups + g] == amax / 127.0f);
            for (c = g * 32; c < g * 32 + 32; c++) {
                int8_t q = pmpd_qact_chunk(&act, t, c / 8)[c % 8];
                long want = (c < cols && t < tokens && amax > 0.0f) ? lrintf(x[t * cols + c] * (127.0f / amax)) : 0;
                assert_int_equal(q, want);
                sum += q;
            }
            assert_int_equal(act.sum[t * n_groups + g], sum);
        }
    }
    free(buffer);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_activation_quantization),
        cmocka_unit_test(test_exact_integer_products),
        cmocka_unit_test(test_float_products),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
