/* NUQ weights (pmpd_impl/weights/nuq/): the quantizer's normalized MSE on
 * Gaussian data against seed 002's Lloyd-Max table; the compiled kernel
 * against the scalar oracle on awkward shapes; the oracle against a
 * brute-force product with weights dequantized here from the layout
 * description (own index decoder, own Hadamard entries), within the
 * activations' int8 rounding; every malformed
 * header field, scale and padding refused with its status; and stories260K
 * end to end: KL against the f32 model at 4, 3 and 2 bits, and a streamed
 * pmpd_convert_file at 3 bits. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pmpd.h"
#include "pmpd_impl/core/hadamard.h"
#include "pmpd_impl/core/splitmix.h"
#include "pmpd_impl/format/le.h"
#include "pmpd_impl/offline/format/builder.h"
#include "pmpd_impl/offline/nuq/nuq_build.h"
#include "pmpd_impl/offline/weights/encoders.h"
#include "pmpd_impl/weights/nuq/nuq.h"
#include "tests/support/test_models.h"
#include "tests/support/test_rotated.h"
#include "tests/support/test_support.h"

/* Encodes a rows x cols Gaussian matrix (scaled per row, with one outlier
 * column) at bits into a malloc'ed tensor. */
static unsigned char *encode_random(size_t rows, size_t cols, unsigned bits, test_rng *rng, float **values,
                                    size_t *size)
{
    uint64_t bytes = 0;
    unsigned char *out;
    float *w = (float *)malloc(rows * cols * sizeof(float));
    size_t r, c;
    assert_non_null(w);
    for (r = 0; r < rows; r++)
        for (c = 0; c < cols; c++)
            w[r * cols + c] = test_rng_normal(rng) * (0.5f + (float)(r % 3)) * (c == cols / 3 ? 8.0f : 1.0f);
    assert_int_equal(pmpd_nuq_size(rows, cols, bits, &bytes), PMPD_OK);
    out = (unsigned char *)malloc((size_t)bytes);
    assert_non_null(out);
    assert_int_equal(pmpd_nuq_encode(w, rows, cols, bits, PMPD_NUQ_SEED + cols, NULL, out, (size_t)bytes), PMPD_OK);
    *size = (size_t)bytes;
    if (values)
        *values = w;
    else
        free(w);
    return out;
}

/* (a) Seed 002's table of Lloyd-Max MSE on N(0, 1): within 5%. */
static void test_gaussian_mse(void **state)
{
    static const double expected[3] = {0.1175, 0.0345, 0.0095};
    const size_t rows = test_reduced() ? 64 : 256, cols = 4096;
    float *w = (float *)malloc(rows * cols * sizeof(float));
    test_rng rng;
    unsigned bits;
    size_t i;
    (void)state;
    assert_non_null(w);
    test_rng_seed(&rng, 2002);
    for (i = 0; i < rows * cols; i++)
        w[i] = test_rng_normal(&rng);
    for (bits = 2; bits <= 4; bits++) {
        uint64_t bytes = 0;
        unsigned char *out;
        double mse;
        assert_int_equal(pmpd_nuq_size(rows, cols, bits, &bytes), PMPD_OK);
        out = (unsigned char *)malloc((size_t)bytes);
        assert_non_null(out);
        assert_int_equal(pmpd_nuq_encode(w, rows, cols, bits, PMPD_NUQ_SEED, NULL, out, (size_t)bytes), PMPD_OK);
        mse = test_rotated_error(PMPD_TENSOR_NUQ, w, rows, cols, out, (size_t)bytes);
        print_message("nuq%u on %zu x %zu N(0,1): normalized MSE %.5f (seed 002: %.4f), %.3f bits per weight\n", bits,
                      rows, cols, mse, expected[bits - 2], 8.0 * (double)bytes / (double)(rows * cols));
        assert_true(fabs(mse - expected[bits - 2]) <= 0.05 * expected[bits - 2]);
        free(out);
    }
    free(w);
}

/* The index of rotated column c, decoded from nuq.h's layout text. */
static unsigned layout_index(const unsigned char *row, size_t c, unsigned bits)
{
    const unsigned char *block = row + (c / 32) * 4 * bits;
    size_t j = c % 32;
    if (bits == 4)
        return j < 16 ? block[j] & 15u : block[j - 16] >> 4;
    if (bits == 2)
        return (block[j % 8] >> (2 * (j / 8))) & 3u;
    return ((block[j % 8] >> (2 * (j / 8))) & 3u) | ((pmpd_le_u32(block + 8) >> (4 * (j % 8) + j / 8)) & 1u) << 2;
}

static int popcount_odd(size_t v)
{
    int odd = 0;
    for (; v; v >>= 1)
        odd ^= (int)(v & 1);
    return odd;
}

/* Row r of W dequantized by brute force: w[c] = s[c] sum_k H[k][c] q[k],
 * H = H_m (x) Sylvester / sqrt(n), signs from splitmix64 in order. */
static void brute_row(const pmpd_nuq_matrix *m, size_t r, double *w)
{
    const float *levels = pmpd_nuq_levels(m->bits);
    const unsigned char *row = m->index + r * m->row_bytes;
    unsigned order = pmpd_hadamard_order(m->rotation);
    size_t p = m->rotation / order, c, k;
    uint64_t state = m->seed, word = 0;
    for (c = 0; c < m->cols; c++) {
        double sum = 0;
        for (k = 0; k < m->rotation; k++) {
            int negative = popcount_odd((k % p) & (c % p));
            if (order > 1)
                negative ^= (int)(pmpd_hadamard_small_row(order, (unsigned)(k / p)) >> (c / p) & 1);
            sum += (negative ? -1.0 : 1.0) * levels[layout_index(row, k, m->bits)];
        }
        if (c % 64 == 0)
            word = pmpd_splitmix64_next(&state);
        w[c] = (word >> (c % 64) & 1 ? -1.0 : 1.0) * m->scale[r] * sum / sqrt((double)m->rotation);
    }
}

static const size_t shape_rows[] = {1, 3, 5, 7, 13};
/* Rotations of 1 to 32 blocks, odd counts among them (20: 1, 90 -> 96: 3,
 * 160: 5, 200 -> 224: 7), padded ones (172 -> 176 = 44 * 4), and for the AVX-512
 * kernel's steps wide ones (8 blocks at 2 bits, 4 at 4) followed by pairs
 * and a lone block (160, 192, 200, 300 -> 320, 1000 -> 1024). */
static const size_t shape_cols[] = {1, 5, 12, 20, 28, 33, 64, 90, 100, 160, 172, 192, 200, 300, 1000};

/* (b) and (c): compiled kernel == oracle (tails, 1 row, odd rows, sub-ranges,
 * 1-5 tokens); oracle == brute force over the dequantized, unrotated rows;
 * the format's row lookup == the brute-force row. */
static void test_kernels_and_oracles(void **state)
{
    test_rng rng;
    size_t ri, ci, r, c, t;
    unsigned bits;
    (void)state;
    test_rng_seed(&rng, 14);
    for (bits = 2; bits <= 4; bits++)
        for (ri = 0; ri < sizeof shape_rows / sizeof shape_rows[0]; ri++)
            for (ci = 0; ci < sizeof shape_cols / sizeof shape_cols[0]; ci++) {
                const size_t rows = shape_rows[ri], cols = shape_cols[ci], n_tokens = 1 + (ri + ci) % 5;
                /* The brute-force rows (a Hadamard product per weight, the
                 * same arithmetic on every host) under an emulator only up
                 * to 256 columns; the kernels meet the scalar oracle on
                 * every shape everywhere. */
                const int brute = !test_emulated() || cols <= 256;
                size_t size, begin = rows > 4 ? 4 : 0;
                pmpd_nuq_matrix m;
                pmpd_error err;
                unsigned char *data = encode_random(rows, cols, bits, &rng, NULL, &size);
                float *x, *y, *oracle, *row;
                void *act;
                float *work;
                double *w;
                assert_int_equal(pmpd_nuq_view(data, size, rows, cols, 0, &m, &err), PMPD_OK);
                x = (float *)malloc(n_tokens * cols * sizeof(float));
                act = malloc(pmpd_nuq_act_bytes(&m, n_tokens));
                work = (float *)malloc(n_tokens * m.padded * sizeof(float));
                y = (float *)malloc(n_tokens * rows * sizeof(float));
                oracle = (float *)malloc(n_tokens * rows * sizeof(float));
                row = (float *)malloc(cols * sizeof(float));
                w = (double *)malloc(rows * cols * sizeof(double));
                assert_true(x && act && work && y && oracle && row && w);
                for (c = 0; c < n_tokens * cols; c++)
                    x[c] = test_rng_normal(&rng);
                /* One token at a time, each into its own work row (its x'). */
                for (t = 0; t < n_tokens; t++)
                    pmpd_nuq_prepare_tokens(&m, x, t, t + 1, n_tokens, act, work + t * m.padded);
                for (c = 0; c < n_tokens * rows; c++)
                    y[c] = oracle[c] = -1.0f;
                pmpd_nuq_matmul_scalar(&m, act, n_tokens, 0, rows, oracle, rows);
                pmpd_nuq_matmul(&m, act, n_tokens, begin, rows, y, rows);
                if (begin)
                    pmpd_nuq_matmul(&m, act, n_tokens, 0, begin, y, rows);
                for (r = 0; r < rows; r++) {
                    double wn = 0;
                    if (brute) {
                        brute_row(&m, r, w + r * cols);
                        pmpd_nuq_row(&m, r, row);
                    }
                    for (c = 0; c < cols && brute; c++) {
                        wn += w[r * cols + c] * w[r * cols + c];
                        if (fabs(row[c] - w[r * cols + c]) > 1e-5 * (fabs(w[r * cols + c]) + m.scale[r]))
                            fail_msg("nuq%u %zux%zu row %zu col %zu: row lookup %g, brute force %g", bits, rows,
                                     cols, r, c, (double)row[c], w[r * cols + c]);
                    }
                    for (t = 0; t < n_tokens; t++) {
                        const float *xr = work + t * m.padded;
                        const float *d = pmpd_nuq_act_d(&m, act, n_tokens) + t * (m.padded / 32);
                        double exact = 0, xn = 0, magnitude = 0, rounding = 0;
                        for (c = 0; c < cols && brute; c++) {
                            exact += w[r * cols + c] * x[t * cols + c];
                            xn += (double)x[t * cols + c] * x[t * cols + c];
                        }
                        /* Half an activation step per rotated column. */
                        for (c = 0; c < m.rotation; c++) {
                            double level = fabs((double)pmpd_nuq_levels(bits)[layout_index(
                                               m.index + r * m.row_bytes, c, bits)]) * m.scale[r];
                            magnitude += level * fabs(xr[c]);
                            rounding += 0.5 * level * d[c / 32];
                        }
                        if (fabs(y[t * rows + r] - oracle[t * rows + r]) > 1e-5 * magnitude + 1e-30)
                            fail_msg("nuq%u %zux%zu row %zu token %zu: kernel %g, oracle %g", bits, rows, cols, r, t,
                                     (double)y[t * rows + r], (double)oracle[t * rows + r]);
                        if (brute &&
                            fabs(oracle[t * rows + r] - exact) > rounding * 1.0001 + 1e-5 * (magnitude + sqrt(wn * xn)) + 1e-30)
                            fail_msg("nuq%u %zux%zu row %zu token %zu: oracle %g, brute force %g (bound %g)", bits,
                                     rows, cols, r, t, (double)oracle[t * rows + r], exact, rounding);
                    }
                }
                free(data);
                free(x);
                free(act);
                free(work);
                free(y);
                free(oracle);
                free(row);
                free(w);
            }
    print_message("kernel: %s\n", PMPD_NUQ_KERNEL);
}

/* The prepared input's int8 blocks, as rotated.h defines them: a block's
 * step d = max |x'| / 127, q = x' / d rounded half away from zero, zeros
 * for an all-zero block and for NaN. */
static void reference_block(const float *x, int8_t *q, float *d)
{
    float absmax = 0.0f, inverse;
    int c;
    for (c = 0; c < 32; c++)
        if (fabsf(x[c]) > absmax)
            absmax = fabsf(x[c]);
    *d = absmax / 127.0f;
    inverse = absmax > 0.0f ? 127.0f / absmax : 0.0f;
    for (c = 0; c < 32; c++) {
        const float v = x[c] * inverse;
        q[c] = (int8_t)(isnan(v) ? 0 : (int)(v < 0.0f ? v - 0.5f : v + 0.5f));
    }
}

/* The prepared input: pmpd_nuq_prepare_tokens gives exactly the
 * reference's bytes and steps (x' from the signs drawn here and the
 * library's Hadamard transform), for Gaussian tokens, a zero token, one
 * with a NaN and one with an infinity (their rotation groups turn NaN), at
 * padded and unpadded widths. */
static void test_prepared_input(void **state)
{
    static const size_t widths[] = {20, 172, 1000, 4096};
    const size_t n_tokens = 5;
    test_rng rng;
    size_t wi, t, c;
    (void)state;
    test_rng_seed(&rng, 15);
    for (wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
        size_t size;
        pmpd_nuq_matrix m;
        pmpd_error err;
        unsigned char *data = encode_random(1, widths[wi], 4, &rng, NULL, &size);
        float *x, *work, *rotated;
        void *act;
        assert_int_equal(pmpd_nuq_view(data, size, 1, widths[wi], 0, &m, &err), PMPD_OK);
        x = (float *)malloc(n_tokens * m.cols * sizeof(float));
        work = (float *)malloc(m.padded * sizeof(float));
        rotated = (float *)malloc(m.padded * sizeof(float));
        act = malloc(pmpd_nuq_act_bytes(&m, n_tokens));
        assert_true(x && work && rotated && act);
        for (c = 0; c < n_tokens * m.cols; c++)
            x[c] = c / m.cols == 2 ? 0.0f : test_rng_normal(&rng) * 3.0f;
        x[3 * m.cols + m.cols / 2] = NAN;
        x[4 * m.cols] = INFINITY;
        pmpd_nuq_prepare_tokens(&m, x, 0, n_tokens, n_tokens, act, work);
        for (t = 0; t < n_tokens; t++) {
            const size_t blocks = m.padded / 32;
            uint64_t seed = m.seed, word = 0;
            size_t b;
            double sum = 0, magnitude = 0;
            float got;
            memset(rotated, 0, m.padded * sizeof(float));
            for (c = 0; c < m.cols; c++) {
                if (c % 64 == 0)
                    word = pmpd_splitmix64_next(&seed);
                rotated[c] = word >> (c % 64) & 1 ? -x[t * m.cols + c] : x[t * m.cols + c];
            }
            pmpd_hadamard(rotated, m.rotation, 0);
            for (b = 0; b < blocks; b++) {
                int8_t q[32];
                float d;
                int block_sum = 0, j;
                reference_block(rotated + 32 * b, q, &d);
                if (memcmp(q, pmpd_nuq_act_q(&m, act, n_tokens) + t * m.padded + 32 * b, 32) != 0 ||
                    memcmp(&d, pmpd_nuq_act_d(&m, act, n_tokens) + t * blocks + b, sizeof d) != 0)
                    fail_msg("width %zu token %zu block %zu: prepared input differs from the reference", widths[wi],
                             t, b);
                for (j = 0; j < 32; j++)
                    block_sum += q[j];
                sum += (double)d * block_sum;
                magnitude += fabs((double)d * block_sum);
            }
            /* The token's quantized x' summed, as the biased kernels take it off. */
            got = pmpd_nuq_act_sum(&m, act, n_tokens)[t];
            if (isnan(sum) ? !isnan(got) : fabs(got - sum) > 1e-6 * magnitude + 1e-30)
                fail_msg("width %zu token %zu: prepared sum %g, reference %g", widths[wi], t, (double)got, sum);
        }
        free(data);
        free(x);
        free(work);
        free(rotated);
        free(act);
    }
}

/* (d) A tensor with one thing wrong gives that thing's status. */
static pmpd_status nuq_view(const void *data, uint64_t size, uint64_t rows, uint64_t cols, uint64_t base_offset,
                          pmpd_error *err)
{
    pmpd_nuq_matrix m;
    return pmpd_nuq_view(data, size, rows, cols, base_offset, &m, err);
}

static void expect(const unsigned char *data, size_t size, size_t rows, size_t cols, pmpd_status status,
                   uint64_t offset, const char *what)
{
    test_rotated_expect(nuq_view, "nuq", data, size, rows, cols, status, offset, what);
}

static void test_malformed_tensors(void **state)
{
    const size_t rows = 5, cols = 5; /* rotation 8 in a block of 32: stray bits possible */
    test_rng rng;
    size_t size, i;
    unsigned char *good, *bad;
    (void)state;
    test_rng_seed(&rng, 4);
    good = encode_random(rows, cols, 3, &rng, NULL, &size);
    bad = (unsigned char *)malloc(size + 1);
    assert_non_null(bad);
#define RESET() memcpy(bad, good, size)
    test_rotated_header(nuq_view, "nuq", good, bad, size, rows, cols);
    for (i = 0; i < 3; i++) {
        static const uint32_t widths[3] = {0, 1, 5};
        RESET();
        pmpd_le_put_u32(bad + 16, widths[i]);
        expect(bad, size, rows, cols, PMPD_ERR_FORMAT_VALUE, 16, "bits");
    }
    RESET();
    pmpd_le_put_u32(bad + 16, 4); /* a valid width the size does not fit */
    expect(bad, size, rows, cols, PMPD_ERR_FORMAT_TRUNCATED, 0, "bits 4 in a 3-bit tensor");
    RESET();
    pmpd_le_put_u32(bad + 20, 16);
    expect(bad, size, rows, cols, PMPD_ERR_FORMAT_SHAPE, 20, "rotation");
    for (i = 32; i < 64; i += 7) {
        RESET();
        bad[i] = 1;
        expect(bad, size, rows, cols, PMPD_ERR_FORMAT_VALUE, i, "reserved header byte");
    }
    test_rotated_size_and_scales(nuq_view, "nuq", good, bad, size, rows, cols);
    /* Column 8 of row 2 (beyond the rotation of 8): 2-bit plane byte 0,
     * bits 2-3; and the high plane's bit for column 31. */
    RESET();
    bad[128 + 2 * 12] |= 4;
    expect(bad, size, rows, cols, PMPD_ERR_FORMAT_VALUE, 128 + 2 * 12, "stray index bits");
    RESET();
    bad[128 + 12 + 11] |= 0x80;
    expect(bad, size, rows, cols, PMPD_ERR_FORMAT_VALUE, 128 + 12, "stray high bit");
    /* Shapes beyond the format. */
    expect(good, size, rows, PMPD_HADAMARD_MAX + 1, PMPD_ERR_FORMAT_SHAPE, 8, "too many columns");
#undef RESET
    free(good);
    free(bad);
}

/* stories260K converted to type (nuq at bits) by the converter's row, as
 * pmpd-convert runs it. */
static void open_variant(uint32_t type, unsigned bits, test_opened_model *o)
{
    pmpd_convert_options options;
    memset(&options, 0, sizeof options);
    options.type = (pmpd_tensor_type)type;
    options.nuq_bits = bits;
    test_rotated_open_stories(&options, o);
}

/* (e) stories260K: KL and top-1 against f32 at 4, 3 and 2 bits (and q4,
 * for scale). */
static void test_stories260k_quality(void **state)
{
    int32_t ids[256];
    size_t n = test_read_vector_ids("stories260K_bos_greedy.ids", ids, 256), v;
    static const unsigned widths[4] = {4, 3, 2, 0};
    double kl[4], top1[4];
    test_opened_model o;
    float *ref;
    (void)state;
    assert_true(n > 8);
    if (n > (test_reduced() ? 32 : 128))
        n = test_reduced() ? 32 : 128;
    open_variant(PMPD_TENSOR_F32, 0, &o);
    ref = test_forced_logits(o.model, ids, n);
    test_opened_close(&o);
    for (v = 0; v < 4; v++) {
        open_variant(widths[v] ? PMPD_TENSOR_NUQ : PMPD_TENSOR_Q4, widths[v], &o);
        assert_int_equal(o.model->layers[0].w_down->type, widths[v] ? PMPD_TENSOR_NUQ : PMPD_TENSOR_Q4);
        test_rotated_score(o.model, ids, n, ref, &kl[v], &top1[v]);
        test_opened_close(&o);
    }
    print_message("stories260K, %zu teacher-forced positions, KL / top-1 vs f32:\n"
                  "  nuq4 %.5f / %.3f\n  nuq3 %.5f / %.3f\n  nuq2 %.5f / %.3f\n  q4   %.5f / %.3f\n",
                  n, kl[0], top1[0], kl[1], top1[1], kl[2], top1[2], kl[3], top1[3]);
    /* Each bit less costs KL; nuq4 stays near q4 (measured 0.078 against
     * 0.054 over 128 positions, 0.049 against 0.025 over the reduced run's
     * 32: one scale per row against q4's one per 32 weights, on rows of 64
     * and 172 columns where the rotation has few columns to spread an
     * outlier over).  The 172-column rows rotate in 176 columns since order
     * 44 (4.09 bits per weight there); in 192 (4.47 bits) nuq4 measured
     * 0.074 and 0.030, so the bound is 2.2x q4's KL, was 2x. */
    assert_true(kl[0] < kl[1]);
    assert_true(kl[1] < kl[2]);
    assert_true(kl[0] < 0.1 && kl[0] < 2.2 * kl[3]);
    assert_true(top1[0] > 0.75);
    free(ref);
}

/* A tensor stored at 192 rotated columns for 172 (as before order 44,
 * which now gives 176) still loads and multiplies as written. */
static void test_older_rotation_size(void **state)
{
    (void)state;
    test_rotated_older_rotation(PMPD_TENSOR_NUQ, 3);
}

/* pmpd_convert_file streams nuq3 (pmpd-convert --type nuq3): every layer
 * matrix a 3-bit NUQ tensor, the vocabulary q8. */
static void test_streamed_conversion(void **state)
{
    pmpd_convert_options options;
    test_opened_file f, refused;
    const pmpd_model *m;
    pmpd_nuq_matrix nm;
    (void)state;
    memset(&options, 0, sizeof options);
    options.type = PMPD_TENSOR_NUQ;
    options.nuq_bits = 3;
    test_rotated_streamed(&options, "nuq", &f);
    m = f.model;
    pmpd_nuq_bind(m->layers[0].w_down->data, m->layers[0].w_down->dims[0], m->layers[0].w_down->dims[1], &nm);
    assert_int_equal(nm.bits, 3);
    assert_int_equal(nm.rotation, 176); /* 172 columns padded to 44 * 4 */
    /* A bad width is refused. */
    options.nuq_bits = 5;
    assert_int_equal(test_rotated_convert_stories(&options, "nuq", &refused), PMPD_ERR_INVALID_ARGUMENT);
    test_file_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gaussian_mse),
        cmocka_unit_test(test_kernels_and_oracles),
        cmocka_unit_test(test_prepared_input),
        cmocka_unit_test(test_malformed_tensors),
        cmocka_unit_test(test_older_rotation_size),
        cmocka_unit_test(test_stories260k_quality),
        cmocka_unit_test(test_streamed_conversion),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
