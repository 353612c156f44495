/* W8A8 (pmpd_impl/weights/w8a8/): the compiled kernel against the scalar
 * oracle, and both against a brute-force sum written here from the layout
 * description, on awkward shapes; the activation rounding at its edges;
 * and the loader's refusal of every malformed header field. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd.h"
#include "pmpd_impl/offline/w8a8/w8a8_build.h"
#include "pmpd_impl/weights/w8a8/w8a8.h"
#include "tests/support/test_support.h"

typedef struct w8a8_case {
    unsigned char *bytes;
    size_t size;
    pmpd_w8a8_matrix m;
} w8a8_case;

/* A matrix whose weights span the whole int8 range, -128 included (the
 * encoder never writes it, but the layout allows it), with scales set by
 * hand. */
static void make_case(w8a8_case *k, size_t rows, size_t cols, float activation_scale, test_rng *rng)
{
    pmpd_w8a8_layout layout;
    float *w = (float *)malloc(rows * cols * sizeof(float));
    size_t i, r;
    pmpd_error err;
    assert_non_null(w);
    for (i = 0; i < rows * cols; i++)
        w[i] = test_rng_normal(rng);
    assert_int_equal(pmpd_w8a8_compute_layout(rows, cols, 0, &layout), PMPD_OK);
    k->size = layout.total;
    k->bytes = (unsigned char *)malloc(layout.total);
    assert_non_null(k->bytes);
    assert_int_equal(pmpd_w8a8_encode(w, rows, cols, activation_scale, NULL, 0, k->bytes, k->size), PMPD_OK);
    for (r = 0; r < rows; r++)
        for (i = 0; i < cols; i++)
            if (test_rng_u32(rng) % 97 == 0)
                k->bytes[layout.weight_offset + r * layout.padded_cols + i] = 0x80; /* -128 */
    assert_int_equal(pmpd_w8a8_view(k->bytes, k->size, rows, cols, 0, &k->m, &err), PMPD_OK);
    free(w);
}

/* The layout read directly: header scale at 20, row scales at 64, weights
 * after the row scales rounded to 64 bytes. */
static double brute_force(const w8a8_case *k, const int8_t *q, size_t t, size_t r)
{
    size_t padded_rows = (k->m.rows + 3) / 4 * 4, padded_cols = (k->m.cols + 63) / 64 * 64;
    size_t weights = 64 + (padded_rows * 4 + 63) / 64 * 64, c;
    float act_scale, row_scale;
    int64_t sum = 0;
    memcpy(&act_scale, k->bytes + 20, 4);
    memcpy(&row_scale, k->bytes + 64 + 4 * r, 4);
    for (c = 0; c < k->m.cols; c++)
        sum += (int64_t)(int8_t)k->bytes[weights + r * padded_cols + c] * q[t * padded_cols + c];
    return (double)sum * act_scale * row_scale;
}

/* The compiled kernel against the scalar oracle and the brute force on x
 * (n_tokens rows of the case's cols), as the pool splits the rows and as
 * one thread takes them all. */
static void compare_kernel(const w8a8_case *k, const float *x, size_t n_tokens)
{
    size_t rows = k->m.rows, cols = k->m.cols;
    float *y = (float *)malloc(n_tokens * rows * sizeof(float));
    float *yref = (float *)malloc(n_tokens * rows * sizeof(float));
    float *yall = (float *)malloc(n_tokens * rows * sizeof(float));
    int8_t *q = (int8_t *)malloc(n_tokens * k->m.padded_cols);
    void *act;
    size_t r, t, begin, act_size;
    assert_true(y && yref && yall && q);
    assert_int_equal(pmpd_w8a8_act_size(n_tokens, k->m.padded_cols, &act_size), PMPD_OK);
    act = malloc(act_size + 1);
    assert_non_null(act);
    pmpd_w8a8_act_quantize(&k->m, x, 0, n_tokens, act);
    pmpd_w8a8_act_quantize_scalar(&k->m, x, 0, n_tokens, q);
    /* Row ranges as the pool splits them: blocks of 4 from any start. */
    for (begin = 0; begin < rows; begin += 4) {
        size_t end = begin + 8 < rows ? begin + 8 : rows;
        pmpd_w8a8_matmul(&k->m, act, n_tokens, begin, end, y, rows);
        pmpd_w8a8_matmul_scalar(&k->m, q, n_tokens, begin, end, yref, rows);
    }
    /* And all rows in one call, as one thread takes them (kernels block
     * rows beyond 8: AMX by 32). */
    pmpd_w8a8_matmul(&k->m, act, n_tokens, 0, rows, yall, rows);
    for (t = 0; t < n_tokens; t++)
        for (r = 0; r < rows; r++) {
            double exact = brute_force(k, q, t, r);
            /* Integer sums are exact in every path: the outputs agree to the
             * last bit, and with the brute force up to the float product. */
            if (y[t * rows + r] != yref[t * rows + r] || yall[t * rows + r] != yref[t * rows + r] || fabs(yref[t * rows + r] - exact) > 1e-5 * fabs(exact) + 1e-30)
                fail_msg("%zux%zu x%zu, token %zu row %zu: kernel %.9g, oracle %.9g, brute force %.9g", rows, cols,
                         n_tokens, t, r, (double)y[t * rows + r], (double)yref[t * rows + r], exact);
        }
    free(y);
    free(yref);
    free(yall);
    free(q);
    free(act);
}

static void check_shape(size_t rows, size_t cols, size_t n_tokens, test_rng *rng)
{
    w8a8_case k;
    float *x = (float *)malloc(n_tokens * cols * sizeof(float));
    size_t i;
    assert_non_null(x);
    make_case(&k, rows, cols, 0.02f, rng);
    /* Mostly in range, some far outside (saturating), some exact zeros. */
    for (i = 0; i < n_tokens * cols; i++)
        x[i] = i % 41 == 0 ? 40.0f * test_rng_normal(rng) : i % 13 == 0 ? 0.0f : test_rng_normal(rng);
    compare_kernel(&k, x, n_tokens);
    free(k.bytes);
    free(x);
}

/* The largest products every kernel must sum without saturating: weights
 * of -128 and 127 against activations clamped to +-127, with the signs
 * set so that adjacent columns (the pairs a 16-bit multiply-add forms)
 * add up, in every combination: 2 x 128 x 127 = 32512 per pair. */
static void test_extreme_products(void **state)
{
    const size_t rows = 8, cols = 130, n_tokens = 4;
    w8a8_case k;
    test_rng rng;
    float x[4 * 130];
    size_t r, c, t;
    (void)state;
    test_rng_seed(&rng, 3);
    make_case(&k, rows, cols, 0.5f, &rng);
    for (r = 0; r < rows; r++)
        for (c = 0; c < cols; c++) {
            /* Rows 0-3: all -128, all 127, alternating, in pairs; rows 4-7
             * the same negated where 127 allows. */
            int pattern[4] = {-128, 127, c % 2 ? 127 : -128, c / 2 % 2 ? 127 : -128};
            int value = pattern[r % 4];
            if (r >= 4)
                value = value == -128 ? 127 : -128;
            k.bytes[(size_t)((const unsigned char *)k.m.weights - k.bytes) + r * k.m.padded_cols + c] =
                (unsigned char)(int8_t)value;
        }
    for (t = 0; t < n_tokens; t++)
        for (c = 0; c < cols; c++) {
            /* All +127, all -127, alternating, in pairs. */
            int negative[4] = {0, 1, (int)(c % 2), (int)(c / 2 % 2)};
            x[t * cols + c] = negative[t] ? -1e3f : 1e3f;
        }
    compare_kernel(&k, x, n_tokens);
    free(k.bytes);
}

static void test_kernel_matches_oracle(void **state)
{
    static const size_t rows[] = {1, 3, 4, 5, 17, 20, 64, 100};
    static const size_t cols[] = {1, 15, 16, 63, 64, 65, 200, 1000};
    static const size_t tokens[] = {1, 2, 3, 4, 5, 7, 16, 25, 50};
    test_rng rng;
    size_t ri, ci, ti;
    (void)state;
    test_rng_seed(&rng, 88);
    for (ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
        for (ci = 0; ci < sizeof cols / sizeof cols[0]; ci++)
            for (ti = 0; ti < sizeof tokens / sizeof tokens[0]; ti++)
                check_shape(rows[ri], cols[ci], tokens[ti], &rng);
}

/* The compiled representation holds exactly the oracle's q values, edge
 * cases included (halves, the clamp, NaN, infinities, padding), for every
 * token of several token groups. */
static void test_activation_representation(void **state)
{
    static const float edges[] = {0.5f, -0.5f, 1.5f, -2.5f, 126.5f, 127.49f, 127.5f, -127.5f, 1e30f, -0.0f,
                                  0.49999997f, 3.0f};
    const size_t rows = 4, cols = 200, n_tokens = 37;
    w8a8_case k;
    test_rng rng;
    float *x = (float *)malloc(n_tokens * cols * sizeof(float));
    int8_t *q;
    void *act;
    size_t i, t, c, act_size;
    (void)state;
    test_rng_seed(&rng, 7);
    make_case(&k, rows, cols, 0.5f, &rng);
    q = (int8_t *)malloc(n_tokens * k.m.padded_cols);
    for (i = 0; i < n_tokens * cols; i++)
        x[i] = i % 5 ? 30.0f * test_rng_normal(&rng) : 0.5f * edges[i / 5 % (sizeof edges / sizeof edges[0])];
    x[3] = NAN;
    x[8] = INFINITY;
    x[13] = -INFINITY;
    assert_int_equal(pmpd_w8a8_act_size(n_tokens, k.m.padded_cols, &act_size), PMPD_OK);
    act = malloc(act_size);
    assert_non_null(act);
    pmpd_w8a8_act_quantize(&k.m, x, 0, n_tokens, act);
    pmpd_w8a8_act_quantize_scalar(&k.m, x, 0, n_tokens, q);
    for (t = 0; t < n_tokens; t++)
        for (c = 0; c < k.m.padded_cols; c++)
            if (pmpd_w8a8_act_value(&k.m, act, t, c) != q[t * k.m.padded_cols + c])
                fail_msg("token %zu column %zu (x %.9g): representation %d, oracle %d", t, c,
                         c < cols ? (double)x[t * cols + c] : 0.0, pmpd_w8a8_act_value(&k.m, act, t, c),
                         q[t * k.m.padded_cols + c]);
    free(k.bytes);
    free(x);
    free(q);
    free(act);
}

static void test_activation_rounding(void **state)
{
    float inverse = 1.0f / 0.5f;
    (void)state;
    assert_int_equal(pmpd_w8a8_quantize_one(0.0f, inverse), 0);
    assert_int_equal(pmpd_w8a8_quantize_one(0.25f, inverse), 1);   /* 0.5 rounds away from zero */
    assert_int_equal(pmpd_w8a8_quantize_one(-0.25f, inverse), -1);
    assert_int_equal(pmpd_w8a8_quantize_one(0.24f, inverse), 0);
    assert_int_equal(pmpd_w8a8_quantize_one(63.5f, inverse), 127);
    assert_int_equal(pmpd_w8a8_quantize_one(64.0f, inverse), 127);  /* saturates */
    assert_int_equal(pmpd_w8a8_quantize_one(-1e30f, inverse), -127);
    assert_int_equal(pmpd_w8a8_quantize_one(INFINITY, inverse), 127);
    assert_int_equal(pmpd_w8a8_quantize_one(-INFINITY, inverse), -127);
    assert_int_equal(pmpd_w8a8_quantize_one(NAN, inverse), 0);
}

/* Each header field broken alone gets its own status and a message naming
 * the field; the untouched tensor is accepted. */
static void test_view_refuses_malformed(void **state)
{
    w8a8_case k;
    test_rng rng;
    pmpd_w8a8_matrix m;
    pmpd_error err;
    unsigned char *copy;
    float bad = -1.0f, nan_value = NAN;
    struct {
        size_t at;
        unsigned char value;
        pmpd_status status;
        const char *word;
    } fields[] = {
        {0, 'X', PMPD_ERR_FORMAT_MAGIC, "magic"},
        {4, 2, PMPD_ERR_FORMAT_VERSION, "version"},
        {8, 6, PMPD_ERR_FORMAT_SHAPE, "header says"},
        {12, 99, PMPD_ERR_FORMAT_SHAPE, "header says"},
        {16, 192, PMPD_ERR_FORMAT_SHAPE, "padded_cols"},
        {40, 1, PMPD_ERR_FORMAT_VALUE, "header byte"},
        {24, 71, PMPD_ERR_FORMAT_VALUE, "n_hot"},
    };
    size_t i;
    (void)state;
    test_rng_seed(&rng, 5);
    make_case(&k, 5, 70, 0.1f, &rng);
    copy = (unsigned char *)malloc(k.size);
    assert_non_null(copy);
    for (i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        memcpy(copy, k.bytes, k.size);
        copy[fields[i].at] = fields[i].value;
        assert_int_equal(pmpd_w8a8_view(copy, k.size, 5, 70, 1000, &m, &err), fields[i].status);
        assert_non_null(strstr(err.message, fields[i].word));
        assert_true(err.offset >= 1000);
    }
    memcpy(copy, k.bytes, k.size);
    memcpy(copy + 20, &bad, 4);
    assert_int_equal(pmpd_w8a8_view(copy, k.size, 5, 70, 0, &m, &err), PMPD_ERR_FORMAT_VALUE);
    assert_non_null(strstr(err.message, "activation scale"));
    memcpy(copy + 20, &nan_value, 4);
    assert_int_equal(pmpd_w8a8_view(copy, k.size, 5, 70, 0, &m, &err), PMPD_ERR_FORMAT_VALUE);
    memcpy(copy, k.bytes, k.size);
    memcpy(copy + 64 + 4 * 2, &nan_value, 4); /* row 2's scale */
    assert_int_equal(pmpd_w8a8_view(copy, k.size, 5, 70, 0, &m, &err), PMPD_ERR_FORMAT_VALUE);
    assert_int_equal(err.offset, 64 + 8);
    memcpy(copy, k.bytes, k.size);
    memcpy(copy + 64 + 4 * 6, &bad, 4); /* a padding row (rows 5..7) */
    assert_int_equal(pmpd_w8a8_view(copy, k.size, 5, 70, 0, &m, &err), PMPD_ERR_FORMAT_VALUE);
    bad = 1.0f;
    memcpy(copy + 64 + 4 * 6, &bad, 4); /* positive is still wrong there */
    assert_int_equal(pmpd_w8a8_view(copy, k.size, 5, 70, 0, &m, &err), PMPD_ERR_FORMAT_VALUE);
    assert_int_equal(pmpd_w8a8_view(k.bytes, k.size - 1, 5, 70, 0, &m, &err), PMPD_ERR_FORMAT_SHAPE);
    assert_int_equal(pmpd_w8a8_view(k.bytes, 63, 5, 70, 0, &m, &err), PMPD_ERR_FORMAT_SHAPE);
    assert_int_equal(pmpd_w8a8_view(k.bytes, k.size, 5, 70, 0, &m, &err), PMPD_OK);
    /* Too wide for exact int32 sums. */
    assert_int_equal(pmpd_w8a8_compute_layout(1, (UINT64_C(1) << 17) + 1, 0, &(pmpd_w8a8_layout){0}),
                     PMPD_ERR_INVALID_ARGUMENT);
    free(copy);
    free(k.bytes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_activation_rounding),
        cmocka_unit_test(test_activation_representation),
        cmocka_unit_test(test_view_refuses_malformed),
        cmocka_unit_test(test_kernel_matches_oracle),
        cmocka_unit_test(test_extreme_products),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
