/* q8 / q4 / q2cb packing: sizes, round-trip error against the original
 * floats, and q2cb's shared codebooks against plain uniform 2-bit groups
 * (computed here, independently) on Gaussian data and on the projections
 * of the real stories260K checkpoint. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd_impl/weights/grouped/qformat.h"
#include "pmpd_impl/model/f16.h"
#include "pmpd_impl/offline/quant/quant.h"
#include "tests/support/test_support.h"

static void test_sizes(void **state)
{
    uint64_t bytes = 0;
    (void)state;
    assert_int_equal(pmpd_qformat_tensor_bytes(PMPD_TENSOR_Q8, 4, 32, &bytes), PMPD_OK);
    assert_true(bytes == 136);
    assert_int_equal(pmpd_qformat_tensor_bytes(PMPD_TENSOR_Q4, 5, 33, &bytes), PMPD_OK);
    assert_true(bytes == 2 * 2 * 72);
    assert_int_equal(pmpd_qformat_tensor_bytes(PMPD_TENSOR_Q2CB, 4096, 4096, &bytes), PMPD_OK);
    assert_true(bytes == 64 + 1024ull * 128 * 42);
    assert_int_equal(pmpd_qformat_tensor_bytes(PMPD_TENSOR_Q4, 0, 32, &bytes), PMPD_ERR_FORMAT_SHAPE);
    assert_int_equal(pmpd_qformat_tensor_bytes(PMPD_TENSOR_F32, 4, 32, &bytes), PMPD_ERR_FORMAT_VALUE);
    assert_int_equal(pmpd_qformat_tensor_bytes(PMPD_TENSOR_Q8, UINT64_MAX, UINT64_MAX, &bytes),
                     PMPD_ERR_FORMAT_SHAPE);
    assert_int_equal(pmpd_qformat_tensor_bytes(PMPD_TENSOR_Q2CB, UINT64_MAX / 2, 64, &bytes),
                     PMPD_ERR_FORMAT_SHAPE);
}

/* Quantizes w with type and returns the dequantized copy. */
static float *qf_round_trip(uint32_t type, const float *w, size_t rows, size_t cols)
{
    uint64_t bytes;
    unsigned char *data;
    float *out = (float *)malloc(rows * cols * sizeof(float));
    pmpd_qmatrix m;
    size_t r;
    assert_int_equal(pmpd_qformat_tensor_bytes(type, rows, cols, &bytes), PMPD_OK);
    data = (unsigned char *)malloc((size_t)bytes);
    assert_int_equal(pmpd_quant_matrix(type, w, rows, cols, 1, data, (size_t)bytes - 1), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_quant_matrix(type, w, rows, cols, 1, data, (size_t)bytes), PMPD_OK);
    m.type = type;
    m.data = data;
    m.rows = rows;
    m.cols = cols;
    for (r = 0; r < rows; r++)
        pmpd_qformat_dequantize_row(&m, r, out + r * cols);
    free(data);
    return out;
}

/* Every q8 weight within half a step, every q4 weight within one step
 * (the value of largest magnitude sets the step), steps from the group's
 * extreme value. */
static void test_uniform_round_trip(void **state)
{
    const size_t rows = 7, cols = 77;
    float w[7 * 77];
    test_rng rng;
    size_t t, r, g, k;
    (void)state;
    test_rng_seed(&rng, 21);
    for (k = 0; k < rows * cols; k++)
        w[k] = test_rng_normal(&rng) * (k % 5 == 0 ? 3.0f : 0.5f);
    for (k = 0; k < 32; k++)
        w[cols + k] = 0.0f; /* an all-zero group */
    for (t = 0; t < 2; t++) {
        uint32_t type = t == 0 ? PMPD_TENSOR_Q8 : PMPD_TENSOR_Q4;
        float *d = qf_round_trip(type, w, rows, cols);
        for (r = 0; r < rows; r++) {
            for (g = 0; g * 32 < cols; g++) {
                float amax = 0.0f, step;
                for (k = g * 32; k < cols && k < g * 32 + 32; k++)
                    amax = fabsf(w[r * cols + k]) > amax ? fabsf(w[r * cols + k]) : amax;
                step = type == PMPD_TENSOR_Q8 ? amax / 127.0f : amax / 8.0f;
                for (k = g * 32; k < cols && k < g * 32 + 32; k++) {
                    float bound = (type == PMPD_TENSOR_Q8 ? 0.5f : 1.0f) * step * 1.002f + 1e-30f;
                    if (fabsf(d[r * cols + k] - w[r * cols + k]) > bound)
                        fail_msg("type %u row %zu col %zu: %g -> %g (step %g)", (unsigned)type, r, k,
                                 (double)w[r * cols + k], (double)d[r * cols + k], (double)step);
                }
            }
        }
        free(d);
    }
}

/* Squared error of plain uniform 2-bit groups of 32: levels {-2,-1,0,1}
 * times an f16 scale, the value of largest magnitude mapping to -2 (the q4
 * rule at 2 bits), 2.5 bits per weight. */
static double qf_uniform2_error(const float *w, size_t rows, size_t cols)
{
    double error = 0.0;
    size_t r, g, k;
    for (r = 0; r < rows; r++) {
        for (g = 0; g * 32 < cols; g++) {
            float extreme = 0.0f, scale;
            size_t end = g * 32 + 32 < cols ? g * 32 + 32 : cols;
            for (k = g * 32; k < end; k++)
                if (fabsf(w[r * cols + k]) > fabsf(extreme))
                    extreme = w[r * cols + k];
            scale = pmpd_f16_to_f32(pmpd_f32_to_f16(extreme / -2.0f));
            for (k = g * 32; k < end; k++) {
                float q = scale != 0.0f ? rintf(w[r * cols + k] / scale) : 0.0f;
                double e;
                q = q < -2.0f ? -2.0f : q > 1.0f ? 1.0f : q;
                e = (double)w[r * cols + k] - (double)q * scale;
                error += e * e;
            }
        }
    }
    return error;
}

/* Squared error of asymmetric uniform 2-bit groups of 32: levels
 * min + {0,1,2,3} x (max - min) / 3 with an f16 scale and an f16 minimum,
 * 3 bits per weight (more than q2cb's 2.625). */
static double qf_uniform2_minmax_error(const float *w, size_t rows, size_t cols)
{
    double error = 0.0;
    size_t r, g, k;
    for (r = 0; r < rows; r++) {
        for (g = 0; g * 32 < cols; g++) {
            size_t end = g * 32 + 32 < cols ? g * 32 + 32 : cols;
            float lo = w[r * cols + g * 32], hi = lo, scale, base;
            for (k = g * 32; k < end; k++) {
                lo = w[r * cols + k] < lo ? w[r * cols + k] : lo;
                hi = w[r * cols + k] > hi ? w[r * cols + k] : hi;
            }
            scale = pmpd_f16_to_f32(pmpd_f32_to_f16((hi - lo) / 3.0f));
            base = pmpd_f16_to_f32(pmpd_f32_to_f16(lo));
            for (k = g * 32; k < end; k++) {
                float q = scale != 0.0f ? rintf((w[r * cols + k] - base) / scale) : 0.0f;
                double e;
                q = q < 0.0f ? 0.0f : q > 3.0f ? 3.0f : q;
                e = (double)w[r * cols + k] - ((double)base + (double)q * scale);
                error += e * e;
            }
        }
    }
    return error;
}

static double qf_error(const float *a, const float *b, size_t n)
{
    double error = 0.0;
    size_t i;
    for (i = 0; i < n; i++)
        error += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return error;
}

static double qf_energy(const float *a, size_t n)
{
    double e = 0.0;
    size_t i;
    for (i = 0; i < n; i++)
        e += (double)a[i] * a[i];
    return e;
}

static void test_q2cb_beats_uniform_gaussian(void **state)
{
    const size_t rows = 96, cols = 256;
    float *w = (float *)malloc(rows * cols * sizeof(float)), *d;
    double cb, uniform, minmax, energy;
    test_rng rng;
    size_t k;
    (void)state;
    test_rng_seed(&rng, 22);
    for (k = 0; k < rows * cols; k++)
        w[k] = 0.02f * test_rng_normal(&rng);
    d = qf_round_trip(PMPD_TENSOR_Q2CB, w, rows, cols);
    cb = qf_error(w, d, rows * cols);
    uniform = qf_uniform2_error(w, rows, cols);
    minmax = qf_uniform2_minmax_error(w, rows, cols);
    energy = qf_energy(w, rows * cols);
    print_message("gaussian: normalized MSE q2cb %.4f (2.625 bits), uniform 2-bit %.4f (2.5), min/max %.4f (3)\n",
                  cb / energy, uniform / energy, minmax / energy);
    /* Lloyd-Max 2-bit on a Gaussian is 0.1175; per-group scales do a little better. */
    assert_true(cb < uniform);
    assert_true(cb < minmax);
    assert_true(cb / energy < 0.13);
    free(w);
    free(d);
}

/* The seven projections of every layer of stories260K (llama2.c legacy
 * checkpoint: 7 int32 header fields, then f32 tensors in a fixed order). */
static void test_q2cb_beats_uniform_stories260k(void **state)
{
    char path[512];
    size_t size, l, p;
    unsigned char *file = test_read_file(test_shared_path(path, sizeof path, "models/stories260K.bin"), &size);
    int32_t h[7];
    size_t dim, hidden, layers, kv_dim, vocab;
    const float *base;
    double cb = 0.0, uniform = 0.0, minmax = 0.0, energy = 0.0;
    (void)state;
    if (!file)
        skip();
    memcpy(h, file, sizeof h);
    dim = (size_t)h[0];
    hidden = (size_t)h[1];
    layers = (size_t)h[2];
    kv_dim = dim * (size_t)h[4] / (size_t)h[3];
    vocab = (size_t)(h[5] < 0 ? -h[5] : h[5]);
    base = (const float *)(const void *)(file + sizeof h) + vocab * dim + layers * dim;
    for (p = 0; p < 7; p++) {
        /* wq, wk, wv, wo, then (after the ffn norms) w1, w2, w3 */
        static const int shapes_rows[7] = {0, 1, 1, 0, 2, 0, 2};
        static const int shapes_cols[7] = {0, 0, 0, 0, 0, 2, 0};
        size_t rows = shapes_rows[p] == 0 ? dim : shapes_rows[p] == 1 ? kv_dim : hidden;
        size_t cols = shapes_cols[p] == 0 ? dim : hidden;
        for (l = 0; l < layers; l++) {
            const float *w = base + l * rows * cols;
            float *d = qf_round_trip(PMPD_TENSOR_Q2CB, w, rows, cols);
            cb += qf_error(w, d, rows * cols);
            uniform += qf_uniform2_error(w, rows, cols);
            minmax += qf_uniform2_minmax_error(w, rows, cols);
            energy += qf_energy(w, rows * cols);
            free(d);
        }
        base += layers * rows * cols;
        if (p == 3)
            base += layers * dim; /* rms_ffn_weight */
    }
    print_message("stories260K projections: normalized MSE q2cb %.4f, uniform 2-bit %.4f, min/max %.4f\n",
                  cb / energy, uniform / energy, minmax / energy);
    assert_true(cb < 0.8 * uniform);
    assert_true(cb < minmax);
    free(file);
}

/* q2cb spread over threads writes the bytes one thread writes: more
 * learning groups (1,310) and row blocks (33) than one step of each,
 * a last row block of 3 rows, a last group of 12 columns. */
static void test_q2cb_threads_same_bytes(void **state)
{
    const size_t rows = 131, cols = 300;
    float *w = (float *)malloc(rows * cols * sizeof(float));
    unsigned char *one, *several;
    uint64_t bytes;
    test_rng rng;
    size_t k;
    unsigned threads;
    (void)state;
    assert_non_null(w);
    test_rng_seed(&rng, 7);
    for (k = 0; k < rows * cols; k++)
        w[k] = test_rng_normal(&rng) * (k % 7 == 0 ? 2.0f : 0.5f);
    assert_int_equal(pmpd_qformat_tensor_bytes(PMPD_TENSOR_Q2CB, rows, cols, &bytes), PMPD_OK);
    one = (unsigned char *)malloc((size_t)bytes);
    several = (unsigned char *)malloc((size_t)bytes);
    assert_non_null(one);
    assert_non_null(several);
    assert_int_equal(pmpd_quant_matrix(PMPD_TENSOR_Q2CB, w, rows, cols, 1, one, (size_t)bytes), PMPD_OK);
    for (threads = 2; threads <= 5; threads += 3) {
        memset(several, 0xA5, (size_t)bytes);
        assert_int_equal(pmpd_quant_matrix(PMPD_TENSOR_Q2CB, w, rows, cols, threads, several, (size_t)bytes),
                         PMPD_OK);
        assert_memory_equal(one, several, (size_t)bytes);
    }
    free(one);
    free(several);
    free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_uniform_round_trip),
        cmocka_unit_test(test_q2cb_beats_uniform_gaussian),
        cmocka_unit_test(test_q2cb_beats_uniform_stories260k),
        cmocka_unit_test(test_q2cb_threads_same_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
