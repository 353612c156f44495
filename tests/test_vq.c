/* VQ weights (pmpd_impl/weights/vq/): the stored codebooks against a fresh
 * Gaussian sample (their MSE, and Lloyd fixed points); the quantizer's
 * normalized MSE on Gaussian data against seed 002's 2-D figure, the
 * rate-distortion bound and the scalar Lloyd-Max levels; the encoder's
 * indices against a brute-force nearest point; the compiled kernel
 * against the scalar oracle on awkward shapes; the oracle against a
 * brute-force product with weights dequantized here from the layout
 * description, within the activations' int8 rounding; every malformed
 * header field, scale and padding refused with its status; and
 * stories260K end to end: KL against the f32 model at every width, and a
 * streamed pmpd_convert_file at 2.5 bits. */
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
#include "pmpd_impl/offline/vq/vq_build.h"
#include "pmpd_impl/offline/vq/vq_codebook.h"
#include "pmpd_impl/weights/vq/vq.h"
#include "tests/support/test_models.h"
#include "tests/support/test_rotated.h"
#include "tests/support/test_support.h"

/* Encodes a rows x cols Gaussian matrix (scaled per row, with one outlier
 * column) at quarter_bits into a malloc'ed tensor. */
static unsigned char *encode_random(size_t rows, size_t cols, unsigned quarter_bits, test_rng *rng, float **values,
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
    assert_int_equal(pmpd_vq_size(rows, cols, quarter_bits, &bytes), PMPD_OK);
    out = (unsigned char *)malloc((size_t)bytes);
    assert_non_null(out);
    assert_int_equal(pmpd_vq_encode(w, rows, cols, quarter_bits, PMPD_NUQ_SEED + cols, NULL, out, (size_t)bytes), PMPD_OK);
    *size = (size_t)bytes;
    if (values)
        *values = w;
    else
        free(w);
    return out;
}

/* A tensor stored at 192 rotated columns for 172 (as before order 44,
 * which now gives 176) still loads and multiplies as written. */
static void test_older_rotation_size(void **state)
{
    (void)state;
    test_rotated_older_rotation(PMPD_TENSOR_VQ2, 10);
}

/* The MSE per coordinate of N(0, 1) that vq_codebooks.c records for each
 * book (1,000,000 pairs). */
static const double book_mse[5] = {0.107537, 0.057231, 0.029746, 0.015323, 0.007804};

/* (a) The stored books on a fresh sample: their MSE within 3% of the
 * recorded one, and Lloyd fixed points: one more step gains no more than
 * what moves a fixed point off its place, the int8 rounding (variance
 * unit^2 / 12 per coordinate, counted 1.5 times) plus the step's fit to
 * this sample's noise (4 points / n of the MSE, twice what was measured)
 * and 0.2%.  Lloyd's step from a non-converged book gains tens of
 * percent. */
static void test_codebooks(void **state)
{
    const size_t n = test_reduced() ? 20000 : 200000;
    float *pairs = (float *)malloc(2 * n * sizeof(float));
    unsigned p;
    (void)state;
    assert_non_null(pairs);
    pmpd_vq_gaussian_pairs(PMPD_VQ_CODEBOOK_SEED + 7, n, pairs);
    for (p = PMPD_VQ_MIN_PAIR_BITS; p <= PMPD_VQ_MAX_PAIR_BITS; p++) {
        const unsigned points = 1u << p;
        float book[512];
        double before, after;
        unsigned k;
        for (k = 0; k < 2 * points; k++)
            book[k] = (float)pmpd_vq_book(p)[k] * pmpd_vq_unit(p);
        before = pmpd_vq_lloyd_step(book, points, pairs, n);
        after = pmpd_vq_lloyd_step(book, points, pairs, n);
        print_message("book of %u points: MSE %.6f on %zu fresh pairs (recorded %.6f), %.6f after one more step\n",
                      points, before, n, book_mse[p - 4], after);
        assert_true(fabs(before - book_mse[p - 4]) < 0.03 * book_mse[p - 4]);
        assert_true(before - after <= 1.5 * pmpd_vq_unit(p) * pmpd_vq_unit(p) / 12.0 +
                                           before * (0.002 + 4.0 * points / (double)n));
    }
    free(pairs);
}

/* (b) Normalized MSE on N(0, 1) weights: 2 bits within 5% of seed 002's
 * 0.109; every width above the rate-distortion bound 2^(-2b), below the
 * scalar Lloyd-Max figure of the same width (2, 3, 4 bits), and falling
 * with the width. */
static void test_gaussian_mse(void **state)
{
    static const double lloyd_max[5] = {0.1175, 0, 0.0345, 0, 0.0095};
    const size_t rows = test_reduced() ? 8 : 128, cols = 4096;
    float *w = (float *)malloc(rows * cols * sizeof(float));
    double previous = 1.0;
    test_rng rng;
    unsigned quarter;
    size_t i;
    (void)state;
    assert_non_null(w);
    test_rng_seed(&rng, 2002);
    for (i = 0; i < rows * cols; i++)
        w[i] = test_rng_normal(&rng);
    print_message("width  normalized MSE  bound 2^-2b  Lloyd-Max scalar  bits stored per weight\n");
    for (quarter = 8; quarter <= 16; quarter += 2) {
        const double b = quarter / 4.0, bound = pow(2.0, -2.0 * b);
        uint64_t bytes = 0;
        unsigned char *out;
        double mse;
        assert_int_equal(pmpd_vq_size(rows, cols, quarter, &bytes), PMPD_OK);
        out = (unsigned char *)malloc((size_t)bytes);
        assert_non_null(out);
        assert_int_equal(pmpd_vq_encode(w, rows, cols, quarter, PMPD_NUQ_SEED, NULL, out, (size_t)bytes), PMPD_OK);
        mse = test_rotated_error(PMPD_TENSOR_VQ2, w, rows, cols, out, (size_t)bytes);
        print_message("vq%-4g %.5f         %.5f      %-17s %.3f\n", b, mse, bound,
                      lloyd_max[quarter / 2 - 4] > 0 ? (quarter == 8 ? "0.1175" : quarter == 12 ? "0.0345" : "0.0095")
                                                     : "-",
                      8.0 * (double)bytes / (double)(rows * cols));
        if (quarter == 8)
            assert_true(fabs(mse - 0.109) <= 0.05 * 0.109);
        assert_true(mse > bound);
        if (lloyd_max[quarter / 2 - 4] > 0)
            assert_true(mse < lloyd_max[quarter / 2 - 4]);
        assert_true(mse < previous);
        previous = mse;
        free(out);
    }
    free(w);
}

/* The index of pair j, decoded from vq.h's layout text. */
static unsigned layout_index(const unsigned char *row, size_t j, unsigned p)
{
    const unsigned char *block = row + (j / 16) * 2 * p;
    size_t i = j % 16;
    unsigned index, plane;
    if (p == 8)
        return block[i];
    index = i < 8 ? block[i] & 15u : block[i - 8] >> 4;
    for (plane = 0; plane < p - 4; plane++)
        index |= ((unsigned)(pmpd_le_u16(block + 8 + 2 * plane) >> i) & 1u) << (4 + plane);
    return index;
}

/* (c) Every stored index is a nearest point of the scaled book to its
 * rotated pair (brute force here, on the rows rotated here). */
static void test_nearest_points(void **state)
{
    const size_t rows = 4, cols = 96; /* rotation 96 = 12 * 8 */
    test_rng rng;
    unsigned quarter;
    (void)state;
    test_rng_seed(&rng, 31);
    for (quarter = 8; quarter <= 16; quarter += 2) {
        size_t size, r, j;
        float *w, v[96];
        pmpd_rotated rotated;
        unsigned char *data = encode_random(rows, cols, quarter, &rng, &w, &size);
        pmpd_vq_matrix m;
        pmpd_vq_bind(data, rows, cols, &m);
        assert_int_equal(m.rotation, 96);
        rotated = pmpd_vq_rotated(&m);
        for (r = 0; r < rows; r++) {
            const float unit = pmpd_vq_unit(m.pair_bits) * m.scale[r];
            pmpd_rotated_rotate(&rotated, w + r * cols, v);
            for (j = 0; j < m.rotation / 2; j++) {
                const unsigned stored = layout_index(m.index + r * m.row_bytes, j, m.pair_bits);
                double best = INFINITY, got = 0;
                unsigned k;
                for (k = 0; k < 1u << m.pair_bits; k++) {
                    double dx = v[2 * j] - unit * pmpd_vq_book(m.pair_bits)[2 * k];
                    double dy = v[2 * j + 1] - unit * pmpd_vq_book(m.pair_bits)[2 * k + 1];
                    best = dx * dx + dy * dy < best ? dx * dx + dy * dy : best;
                    if (k == stored)
                        got = dx * dx + dy * dy;
                }
                if (got > best * (1 + 1e-5) + 1e-12)
                    fail_msg("vq %u/4 bits row %zu pair %zu: index %u at %g, nearest at %g", quarter, r, j, stored,
                             got, best);
            }
        }
        free(w);
        free(data);
    }
}

static int popcount_odd(size_t v)
{
    int odd = 0;
    for (; v; v >>= 1)
        odd ^= (int)(v & 1);
    return odd;
}

/* Rotated entry k of row r, from the layout text. */
static double rotated_entry(const pmpd_vq_matrix *m, size_t r, size_t k)
{
    unsigned index = layout_index(m->index + r * m->row_bytes, k / 2, m->pair_bits);
    return (double)m->scale[r] * pmpd_vq_unit(m->pair_bits) * pmpd_vq_book(m->pair_bits)[2 * index + k % 2];
}

/* Row r of W dequantized by brute force: w[c] = s[c] sum_k H[k][c] v[k],
 * H = H_m (x) Sylvester / sqrt(n), signs from splitmix64 in order. */
static void brute_row(const pmpd_vq_matrix *m, size_t r, double *w)
{
    unsigned order = pmpd_hadamard_order(m->rotation);
    size_t p = m->rotation / order, c, k;
    uint64_t state = m->seed, word = 0;
    for (c = 0; c < m->cols; c++) {
        double sum = 0;
        for (k = 0; k < m->rotation; k++) {
            int negative = popcount_odd((k % p) & (c % p));
            if (order > 1)
                negative ^= (int)(pmpd_hadamard_small_row(order, (unsigned)(k / p)) >> (c / p) & 1);
            sum += (negative ? -1.0 : 1.0) * rotated_entry(m, r, k);
        }
        if (c % 64 == 0)
            word = pmpd_splitmix64_next(&state);
        w[c] = (word >> (c % 64) & 1 ? -1.0 : 1.0) * sum / sqrt((double)m->rotation);
    }
}

static const size_t shape_rows[] = {1, 3, 5, 7, 13};
/* Rotations of 1 to 10 blocks, odd counts among them (20: 1, 90 -> 96: 3,
 * 160: 5, 200 -> 224: 7), padded ones (172 -> 176 = 44 * 4), and for the AVX-512
 * kernel's steps wide ones (8 blocks at 4 index bits, 4 at 8) followed by
 * pairs and a lone block (160, 172, 200, 300 -> 320). */
static const size_t shape_cols[] = {1, 5, 12, 20, 28, 33, 64, 90, 100, 160, 172, 200, 300};

/* The product of one encoded matrix checked three ways (kernel == oracle,
 * oracle == brute force within the activation rounding, row lookup ==
 * brute-force row). */
static void check_product(size_t rows, size_t cols, unsigned quarter, size_t n_tokens, test_rng *rng)
{
    size_t size, begin = rows > 4 ? 4 : 0, r, c, t;
    pmpd_vq_matrix m;
    pmpd_rotated input;
    pmpd_error err;
    unsigned char *data = encode_random(rows, cols, quarter, rng, NULL, &size);
    float *x, *y, *oracle, *row, *work;
    void *act;
    double *w;
    assert_int_equal(pmpd_vq_view(data, size, rows, cols, 0, &m, &err), PMPD_OK);
    input = pmpd_vq_rotated(&m);
    x = (float *)malloc(n_tokens * cols * sizeof(float));
    act = malloc(pmpd_rotated_act_bytes(&input, n_tokens));
    work = (float *)malloc(n_tokens * m.padded * sizeof(float));
    y = (float *)malloc(n_tokens * rows * sizeof(float));
    oracle = (float *)malloc(n_tokens * rows * sizeof(float));
    row = (float *)malloc(cols * sizeof(float));
    w = (double *)malloc(rows * cols * sizeof(double));
    assert_true(x && act && work && y && oracle && row && w);
    for (c = 0; c < n_tokens * cols; c++)
        x[c] = test_rng_normal(rng);
    /* One token at a time, each into its own work row (its x'). */
    for (t = 0; t < n_tokens; t++)
        pmpd_vq_prepare_tokens(&m, x, t, t + 1, n_tokens, act, work + t * m.padded);
    for (c = 0; c < n_tokens * rows; c++)
        y[c] = oracle[c] = -1.0f;
    pmpd_vq_matmul_scalar(&m, act, n_tokens, 0, rows, oracle, rows);
    pmpd_vq_matmul(&m, act, n_tokens, begin, rows, y, rows);
    if (begin)
        pmpd_vq_matmul(&m, act, n_tokens, 0, begin, y, rows);
    for (r = 0; r < rows; r++) {
        double wn = 0;
        brute_row(&m, r, w + r * cols);
        pmpd_vq_row(&m, r, row);
        for (c = 0; c < cols; c++) {
            wn += w[r * cols + c] * w[r * cols + c];
            if (fabs(row[c] - w[r * cols + c]) > 1e-5 * (fabs(w[r * cols + c]) + m.scale[r]))
                fail_msg("vq %u/4 %zux%zu row %zu col %zu: row lookup %g, brute force %g", quarter, rows, cols, r, c,
                         (double)row[c], w[r * cols + c]);
        }
        for (t = 0; t < n_tokens; t++) {
            const float *xr = work + t * m.padded;
            const float *d = pmpd_rotated_act_d(&input, act, n_tokens) + t * (m.padded / 32);
            double exact = 0, xn = 0, magnitude = 0, rounding = 0;
            for (c = 0; c < cols; c++) {
                exact += w[r * cols + c] * x[t * cols + c];
                xn += (double)x[t * cols + c] * x[t * cols + c];
            }
            /* Half an activation step per rotated column. */
            for (c = 0; c < m.rotation; c++) {
                double weight = fabs(rotated_entry(&m, r, c));
                magnitude += weight * fabs(xr[c]);
                rounding += 0.5 * weight * d[c / 32];
            }
            if (fabs(y[t * rows + r] - oracle[t * rows + r]) > 1e-5 * magnitude + 1e-30)
                fail_msg("vq %u/4 %zux%zu row %zu token %zu: kernel %g, oracle %g", quarter, rows, cols, r, t,
                         (double)y[t * rows + r], (double)oracle[t * rows + r]);
            if (fabs(oracle[t * rows + r] - exact) > rounding * 1.0001 + 1e-5 * (magnitude + sqrt(wn * xn)) + 1e-30)
                fail_msg("vq %u/4 %zux%zu row %zu token %zu: oracle %g, brute force %g (bound %g)", quarter, rows,
                         cols, r, t, (double)oracle[t * rows + r], exact, rounding);
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

/* (d) Every width on awkward shapes: 1 row, rows not a multiple of 4,
 * columns padded to a Hadamard size and to a block, 1-5 tokens. */
static void test_kernels_and_oracles(void **state)
{
    const size_t n_cols = test_reduced() ? 7 : sizeof shape_cols / sizeof shape_cols[0];
    test_rng rng;
    size_t ri, ci;
    unsigned quarter;
    (void)state;
    test_rng_seed(&rng, 14);
    for (quarter = 8; quarter <= 16; quarter += 2)
        for (ri = 0; ri < sizeof shape_rows / sizeof shape_rows[0]; ri++)
            for (ci = 0; ci < n_cols; ci++)
                check_product(shape_rows[ri], shape_cols[ci], quarter, 1 + (ri + ci) % 5, &rng);
    print_message("kernel: %s\n", PMPD_VQ_KERNEL);
}

/* (e) A tensor with one thing wrong gives that thing's status. */
static pmpd_status vq_view(const void *data, uint64_t size, uint64_t rows, uint64_t cols, uint64_t base_offset,
                          pmpd_error *err)
{
    pmpd_vq_matrix m;
    return pmpd_vq_view(data, size, rows, cols, base_offset, &m, err);
}

static void expect(const unsigned char *data, size_t size, size_t rows, size_t cols, pmpd_status status,
                   uint64_t offset, const char *what)
{
    test_rotated_expect(vq_view, "vq", data, size, rows, cols, status, offset, what);
}

static void test_malformed_tensors(void **state)
{
    const size_t rows = 5, cols = 5; /* rotation 8 in a block of 32: stray indices possible */
    test_rng rng;
    size_t size, i;
    unsigned char *good, *bad;
    (void)state;
    test_rng_seed(&rng, 4);
    good = encode_random(rows, cols, 12, &rng, NULL, &size); /* 6 index bits per pair, 12 bytes a block */
    bad = (unsigned char *)malloc(size + 1);
    assert_non_null(bad);
#define RESET() memcpy(bad, good, size)
    test_rotated_header(vq_view, "vq", good, bad, size, rows, cols);
    for (i = 0; i < 4; i++) {
        static const uint32_t widths[4] = {0, 3, 9, 16};
        RESET();
        pmpd_le_put_u32(bad + 16, widths[i]);
        expect(bad, size, rows, cols, PMPD_ERR_FORMAT_VALUE, 16, "pair bits");
    }
    RESET();
    pmpd_le_put_u32(bad + 16, 8); /* a valid width the size does not fit */
    expect(bad, size, rows, cols, PMPD_ERR_FORMAT_TRUNCATED, 0, "8 bits in a 6-bit tensor");
    RESET();
    pmpd_le_put_u32(bad + 20, 16);
    expect(bad, size, rows, cols, PMPD_ERR_FORMAT_SHAPE, 20, "rotation");
    for (i = 32; i < 64; i += 7) {
        RESET();
        bad[i] = 1;
        expect(bad, size, rows, cols, PMPD_ERR_FORMAT_VALUE, i, "reserved header byte");
    }
    test_rotated_size_and_scales(vq_view, "vq", good, bad, size, rows, cols);
    /* Row 2's block at 128 + 2 * 12: pair 4 (columns 8-9, beyond the
     * rotation of 8) in the nibbles, and pair 15 in the second plane. */
    RESET();
    bad[128 + 2 * 12 + 4] |= 1;
    expect(bad, size, rows, cols, PMPD_ERR_FORMAT_VALUE, 128 + 2 * 12, "stray index");
    RESET();
    bad[128 + 2 * 12 + 11] |= 0x80;
    expect(bad, size, rows, cols, PMPD_ERR_FORMAT_VALUE, 128 + 2 * 12, "stray high bit");
    /* Shapes beyond the format. */
    expect(good, size, rows, PMPD_HADAMARD_MAX + 1, PMPD_ERR_FORMAT_SHAPE, 8, "too many columns");
#undef RESET
    free(good);
    free(bad);
}

/* stories260K converted to type (vq at quarter bits) by the converter's
 * row, as pmpd-convert runs it. */
static void open_variant(uint32_t type, unsigned quarter, test_opened_model *o)
{
    pmpd_convert_options options;
    memset(&options, 0, sizeof options);
    options.type = (pmpd_tensor_type)type;
    options.vq_quarter_bits = quarter;
    test_rotated_open_stories(&options, o);
}

/* (f) stories260K: KL and top-1 against f32 at every width (and q4, for
 * scale). */
static void test_stories260k_quality(void **state)
{
    int32_t ids[256];
    size_t n = test_read_vector_ids("stories260K_bos_greedy.ids", ids, 256), v;
    static const unsigned widths[6] = {16, 14, 12, 10, 8, 0};
    static const char *const names[6] = {"vq4", "vq3.5", "vq3", "vq2.5", "vq2", "q4"};
    double kl[6], top1[6];
    test_opened_model o;
    float *ref;
    (void)state;
    assert_true(n > 8);
    if (n > (test_reduced() ? 16 : 128))
        n = test_reduced() ? 16 : 128;
    open_variant(PMPD_TENSOR_F32, 0, &o);
    ref = test_forced_logits(o.model, ids, n);
    test_opened_close(&o);
    print_message("stories260K, %zu teacher-forced positions, KL / top-1 vs f32:\n", n);
    for (v = 0; v < 6; v++) {
        if (test_reduced() && widths[v] % 4)
            continue;
        open_variant(widths[v] ? PMPD_TENSOR_VQ2 : PMPD_TENSOR_Q4, widths[v], &o);
        assert_int_equal(o.model->layers[0].w_down->type, widths[v] ? PMPD_TENSOR_VQ2 : PMPD_TENSOR_Q4);
        test_rotated_score(o.model, ids, n, ref, &kl[v], &top1[v]);
        print_message("  %-6s %.5f / %.3f\n", names[v], kl[v], top1[v]);
        test_opened_close(&o);
    }
    /* Each step down in width costs KL; vq4 stays near q4 (measured 0.048
     * against q4's 0.054 and nuq4's 0.073 on these 128 positions): the
     * bound is test_nuq.c's for nuq4, one scale per row against q4's one
     * per 32 weights on rows of 64 and 172 columns. */
    assert_true(kl[0] < kl[2] && kl[2] < kl[4]);
    assert_true(kl[0] < 0.1 && kl[0] < 2.0 * kl[5]);
    assert_true(top1[0] > 0.75);
    free(ref);
}

/* pmpd_convert_file streams vq2.5 (pmpd-convert --type vq2.5): every layer
 * matrix a VQ tensor of 5 bits per pair, the vocabulary q8. */
static void test_streamed_conversion(void **state)
{
    pmpd_convert_options options;
    test_opened_file f, refused;
    const pmpd_model *m;
    pmpd_vq_matrix vm;
    (void)state;
    memset(&options, 0, sizeof options);
    options.type = PMPD_TENSOR_VQ2;
    options.vq_quarter_bits = 10;
    test_rotated_streamed(&options, "vq", &f);
    m = f.model;
    pmpd_vq_bind(m->layers[0].w_down->data, m->layers[0].w_down->dims[0], m->layers[0].w_down->dims[1], &vm);
    assert_int_equal(vm.pair_bits, 5);
    assert_int_equal(vm.rotation, 176); /* 172 columns padded to 44 * 4 */
    /* A bad width is refused. */
    options.vq_quarter_bits = 9;
    assert_int_equal(test_rotated_convert_stories(&options, "vq", &refused), PMPD_ERR_INVALID_ARGUMENT);
    test_file_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codebooks),
        cmocka_unit_test(test_gaussian_mse),
        cmocka_unit_test(test_nearest_points),
        cmocka_unit_test(test_kernels_and_oracles),
        cmocka_unit_test(test_malformed_tensors),
        cmocka_unit_test(test_older_rotation_size),
        cmocka_unit_test(test_stories260k_quality),
        cmocka_unit_test(test_streamed_conversion),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
