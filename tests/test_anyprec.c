/* Nested any-precision weights: layout, quantizer and kernels.  The oracle
 * decodes weights straight from the documented byte layout (version 4:
 * slices of 4-row blocks by 256-column superblocks, top k planes, scale *
 * u8 table + offset) and multiplies in double; it shares no code with the
 * kernels. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd.h"
#include "pmpd_impl/weights/anyprec/anyprec.h"
#include "tests/support/test_support.h"

typedef struct apt_tensor {
    unsigned char *raw; /* what malloc returned */
    unsigned char *bytes;
    size_t size;
    uint32_t rows, cols;
    unsigned seed, parent;
    unsigned version; /* of the layout: 4 as written, 3 as older files */
} apt_tensor;

static void apt_quantize(apt_tensor *t, const float *w, uint32_t rows, uint32_t cols, unsigned seed,
                         unsigned parent)
{
    uint64_t size = 0;
    unsigned char *mem;
    assert_int_equal(pmpd_anyprec_size(rows, cols, seed, parent, &size), PMPD_OK);
    /* 64-aligned like tensor data inside a container. */
    t->raw = (unsigned char *)malloc((size_t)size + 64);
    assert_non_null(t->raw);
    mem = t->raw + (64 - (uintptr_t)t->raw % 64);
    memset(mem, 0, (size_t)size);
    /* Two calls on row ranges must give the same as one. */
    assert_int_equal(pmpd_anyprec_quantize(w, rows, cols, NULL, seed, parent, 0, rows / 2, mem, (size_t)size),
                     PMPD_OK);
    assert_int_equal(pmpd_anyprec_quantize(w, rows, cols, NULL, seed, parent, rows / 2, rows, mem, (size_t)size),
                     PMPD_OK);
    t->bytes = mem;
    t->size = (size_t)size;
    t->rows = rows;
    t->cols = cols;
    t->seed = seed;
    t->parent = parent;
    t->version = 4;
}

static size_t apt_align64(size_t v)
{
    return (v + 63) / 64 * 64;
}

/* Layout version 4 from docs/pmpd.md, independently of anyprec.h: row
 * blocks of 4 in shares of apt_share of them, which store their blocks'
 * whole superblocks, then one partial superblock they all use. */
static size_t apt_share(const apt_tensor *t)
{
    size_t tail = t->cols % 256;
    if (t->version == 3) /* every block its own padded superblock */
        return 1;
    return tail == 0 || tail > 128 ? 1 : tail > 64 ? 2 : 4;
}

/* Superblocks of 4 rows per share. */
static size_t apt_share_supers(const apt_tensor *t)
{
    return apt_share(t) * (t->cols / 256) + (t->cols % 256 != 0);
}

static size_t apt_slice_bytes(const apt_tensor *t, unsigned field_bits)
{
    size_t shares = ((t->rows + 3) / 4 + apt_share(t) - 1) / apt_share(t);
    /* slack: the share's last block reads a whole row's bytes from offset
     * (share - 1) * span */
    return apt_align64(shares * apt_share_supers(t) * 4 * 32 * field_bits + 32 - 32 / apt_share(t));
}

/* Offset of the slice holding plane p: planes 0 and 1 share a 2-bit slice when seed >= 2. */
static size_t apt_slice_offset(const apt_tensor *t, unsigned p)
{
    if (t->seed < 2)
        return 64 + p * apt_slice_bytes(t, 1);
    return p < 2 ? 64 : 64 + apt_slice_bytes(t, 2) + (p - 2) * apt_slice_bytes(t, 1);
}

/* Where plane p's bit of weight (r, c) lies: the byte's offset in the
 * tensor, the bit in *bit. */
static size_t apt_bit_at(const apt_tensor *t, uint32_t r, uint32_t c, unsigned p, size_t *bit_out)
{
    unsigned paired = t->seed >= 2 && p < 2, row_bytes = paired ? 64 : 32;
    size_t share = apt_share(t), span = 32 / share, full = t->cols / 256, s = c / 256;
    size_t member = r / 4 % share, first = r / 4 / share * apt_share_supers(t), g, j, byte, bit, block;
    if (s < full) {
        g = c % 256 / 32;
        j = c % 32;
        block = ((first + member * full + s) * 4 + r % 4) * row_bytes;
    } else {
        /* the partial superblock: span columns in each group's first slots */
        size_t tail = c - 256 * full;
        g = tail / span;
        j = tail % span;
        block = ((first + share * full) * 4 + r % 4) * row_bytes + member * span;
    }
    if (paired) {
        /* half g/4, field f with g%4 = 2*(f%2) + f/2, plane 0 the lower bit */
        byte = 32 * (g / 4) + j;
        bit = 2 * (2 * (g % 2) + g % 4 / 2) + p;
    } else {
        /* bit b holds group 2*(b%4) + b/4 */
        byte = j;
        bit = g / 2 + 4 * (g % 2);
    }
    *bit_out = bit;
    return apt_slice_offset(t, p) + block + byte;
}

/* Plane p's bit of weight (r, c). */
static unsigned apt_bit(const apt_tensor *t, uint32_t r, uint32_t c, unsigned p)
{
    size_t bit, at = apt_bit_at(t, r, c, p, &bit);
    return (t->bytes[at] >> bit) & 1u;
}

/* The weight at (r, c) decoded at width k: table index = plane p's bit at bit p. */
static double apt_weight(const apt_tensor *t, uint32_t r, uint32_t c, unsigned k)
{
    size_t off = t->seed >= 2 ? 64 + apt_slice_bytes(t, 2) + (t->parent - 2) * apt_slice_bytes(t, 1)
                              : 64 + t->parent * apt_slice_bytes(t, 1);
    size_t index = 0;
    unsigned p, width;
    float scale, offset;
    for (p = 0; p < k; p++)
        index |= (size_t)apt_bit(t, r, c, p) << p;
    for (width = t->seed; width < k; width++)
        off += 2 * apt_align64(t->rows * 4) + apt_align64(t->rows << width);
    memcpy(&scale, t->bytes + off + r * 4, 4);
    memcpy(&offset, t->bytes + off + apt_align64(t->rows * 4) + r * 4, 4);
    /* In f32, as docs/pmpd.md defines the value. */
    return scale * (float)t->bytes[off + 2 * apt_align64(t->rows * 4) + (r << k) + index] + offset;
}

static void apt_view(const apt_tensor *t, pmpd_anyprec_matrix *m)
{
    pmpd_error err;
    assert_int_equal(pmpd_anyprec_view(t->bytes, t->size, t->rows, t->cols, 0, m, &err), PMPD_OK);
}

static float *apt_random_matrix(uint32_t rows, uint32_t cols, uint64_t seed)
{
    test_rng rng;
    float *w = (float *)malloc((size_t)rows * cols * sizeof(float));
    size_t i;
    test_rng_seed(&rng, seed);
    for (i = 0; i < (size_t)rows * cols; i++)
        w[i] = 0.05f * test_rng_normal(&rng);
    return w;
}

static void test_size_and_arguments(void **state)
{
    uint64_t size = 0;
    (void)state;
    /* 3 rows x 40 cols, seed 2, parent 3: header 64, one block of 4 rows by
     * one superblock, which 4 blocks would share (40 columns), so each slice
     * has 24 bytes of slack: the 2-bit slice 4*64 + 24 -> 320, plane 2 4*32
     * + 24 -> 192; widths 2 and 3: scales and offsets 12 -> 64 each, tables
     * 12 and 24 -> 64 each. */
    assert_int_equal(pmpd_anyprec_size(3, 40, 2, 3, &size), PMPD_OK);
    assert_int_equal(size, 64 + 320 + 192 + 2 * (64 + 64 + 64));
    /* 9 rows x 384, one 1-bit plane: 3 blocks in 2 shares of 2 (128
     * columns past the whole superblock), each share 2 whole superblocks
     * and one shared, of 4 rows * 32 bytes, 16 bytes of slack: 2 * 3 * 128
     * + 16 -> 832 (version 3 stored 3 * 2 * 128 = 768); width 1: 36, 36 and
     * 18 bytes -> 64 each. */
    assert_int_equal(pmpd_anyprec_size(9, 384, 1, 1, &size), PMPD_OK);
    assert_int_equal(size, 64 + 832 + 3 * 64);
    assert_int_equal(pmpd_anyprec_size(3, 40, 3, 2, &size), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_anyprec_size(3, 40, 0, 2, &size), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_anyprec_size(3, 40, 2, 9, &size), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_anyprec_size(0, 40, 2, 4, &size), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_anyprec_size(UINT64_C(1) << 32, 40, 2, 4, &size), PMPD_ERR_INVALID_ARGUMENT);
    if (sizeof(size_t) == 4)
        assert_int_equal(pmpd_anyprec_size(UINT64_C(1) << 31, UINT64_C(1) << 31, 2, 8, &size),
                         PMPD_ERR_OVERFLOW);
    else
        assert_int_equal(pmpd_anyprec_size(UINT64_C(1) << 31, UINT64_C(1) << 31, 2, 8, &size), PMPD_OK);
    assert_int_equal(pmpd_anyprec_size(3, 40, 2, 4, NULL), PMPD_ERR_INVALID_ARGUMENT);
}

/* Oracle int8 activations: every group of a 256-column superblock has the
 * scale max|x| / 127 of the superblock; values round half away. */
static void apt_quantize_input(const float *x, uint32_t cols, int8_t *xq, float *xs)
{
    uint32_t g, c, padded = (cols + 31) / 32 * 32;
    for (g = 0; g < padded / 32; g++) {
        double sb_max = 0.0, scale;
        for (c = g / 8 * 256; c < g / 8 * 256 + 256 && c < cols; c++)
            sb_max = fabs(x[c]) > sb_max ? fabs(x[c]) : sb_max;
        scale = sb_max / 127.0;
        xs[g] = (float)scale;
        for (c = g * 32; c < g * 32 + 32; c++)
            xq[c] = (int8_t)(c < cols && scale > 0.0 ? lrint((double)x[c] / scale) : 0);
    }
}

static void apt_check_kernels(const apt_tensor *t, uint64_t seed)
{
    pmpd_anyprec_matrix m;
    uint32_t padded = (t->cols + 31) / 32 * 32, r, c;
    const size_t n = 35; /* the SIMD GEMMs' tile of 32 tokens, and a partial one */
    float *x = apt_random_matrix((uint32_t)n, t->cols, seed), *xs = (float *)malloc(padded / 32 * sizeof(float));
    float *xs_lib = (float *)malloc(padded / 32 * sizeof(float));
    int8_t *xq = (int8_t *)malloc(padded), *xq_lib = (int8_t *)malloc(padded);
    float *y = (float *)malloc(n * t->rows * sizeof(float)), *y_ref = (float *)malloc(n * t->rows * sizeof(float));
    const size_t stride = (t->cols + 255) / 256 * 256;
    int8_t *xq_tokens = (int8_t *)malloc(n * stride);
    float *xs_tokens = (float *)malloc(n * stride / 32 * sizeof(float));
    float *xsum_tokens = (float *)malloc(n * sizeof(float));
    unsigned k;
    size_t i;
    apt_view(t, &m);
    assert_int_equal(m.seed_bits, t->seed);
    assert_int_equal(m.parent_bits, t->parent);
    /* Each row's table spans 0..63 below 4 bits and 0..127 from 4 on
     * (docs/pmpd.md, layout version 4). */
    for (k = t->seed; k <= t->parent; k++)
        for (r = 0; r < t->rows; r++) {
            unsigned top = 0, e;
            for (e = 0; e < 1u << k; e++)
                top = m.tables[k][((size_t)r << k) + e] > top ? m.tables[k][((size_t)r << k) + e] : top;
            assert_int_equal(top, k < 4 ? 63 : 127);
        }
    apt_quantize_input(x, t->cols, xq, xs);
    pmpd_anyprec_quantize_input(x, t->cols, xq_lib, xs_lib);
    /* Float and double may round a step apart; the GEMV below uses the library's. */
    for (c = 0; c < padded; c++)
        assert_true(abs(xq[c] - xq_lib[c]) <= 1);
    for (c = 0; c < padded / 32; c++)
        assert_true(fabs(xs[c] - xs_lib[c]) <= 1e-3 * xs[c] + 1e-12);
    memcpy(xq, xq_lib, padded);
    memcpy(xs, xs_lib, padded / 32 * sizeof(float));
    for (k = t->seed; k <= t->parent; k++) {
        for (r = 0; r < t->rows; r++)
            for (i = 0; i < n; i++) {
                double dot = 0.0;
                for (c = 0; c < t->cols; c++)
                    dot += apt_weight(t, r, c, k) * x[i * t->cols + c];
                y_ref[i * t->rows + r] = (float)dot;
            }
        for (r = 0; r < t->rows; r++) {
            float row[1100];
            assert_true(t->cols <= sizeof row / sizeof row[0]);
            pmpd_anyprec_row(&m, k, r, row);
            for (c = 0; c < t->cols; c++)
                assert_true(row[c] == (float)apt_weight(t, r, c, k));
        }
        /* GEMM: n tokens' int8 activations, each token's rows as its GEMV
         * (exact integer products, float rounding only); two row ranges, as
         * a worker pool splits them. */
        pmpd_anyprec_quantize_tokens(x, n, t->cols, xq_tokens, xs_tokens, xsum_tokens);
        for (i = 0; i < n; i++) {
            const int8_t *q = xq_tokens + i * stride;
            const float *qs = xs_tokens + i * (stride / 32);
            double sum = 0.0;
            for (c = t->cols; c < stride; c++)
                assert_int_equal(q[c], 0);
            for (c = 0; c < t->cols; c++)
                sum += (double)q[c] * qs[c / 32];
            assert_float_equal(xsum_tokens[i], sum, 1e-5 * fabs(sum) + 1e-6);
            for (r = 0; r < t->rows; r++) {
                double dot = 0.0;
                for (c = 0; c < t->cols; c++)
                    dot += apt_weight(t, r, c, k) * q[c] * qs[c / 32];
                y_ref[i * t->rows + r] = (float)dot;
            }
        }
        /* 0x7f bytes are a huge finite float that no comparison passes (NaN would). */
        memset(y, 0x7f, n * t->rows * sizeof(float));
        pmpd_anyprec_gemm(&m, k, xq_tokens, xs_tokens, xsum_tokens, n, y, t->rows, 0, t->rows / 3);
        pmpd_anyprec_gemm(&m, k, xq_tokens, xs_tokens, xsum_tokens, n, y, t->rows, t->rows / 3, t->rows);
        for (i = 0; i < n * t->rows; i++)
            assert_float_equal(y[i], y_ref[i], 1e-5 + 1e-4 * fabs(y_ref[i]));
        /* GEMV, int8 activations: exact integer products, float rounding only. */
        for (r = 0; r < t->rows; r++) {
            double dot = 0.0;
            for (c = 0; c < t->cols; c++)
                dot += apt_weight(t, r, c, k) * xq[c] * xs[c / 32];
            y_ref[r] = (float)dot;
        }
        memset(y, 0x7f, t->rows * sizeof(float));
        pmpd_anyprec_gemv(&m, k, xq, xs, y, 0, t->rows / 2);
        pmpd_anyprec_gemv(&m, k, xq, xs, y, t->rows / 2, t->rows);
        for (r = 0; r < t->rows; r++)
            assert_float_equal(y[r], y_ref[r], 1e-5 + 1e-4 * fabs(y_ref[r]));
        memset(y, 0x7f, t->rows * sizeof(float));
        pmpd_anyprec_gemv_scalar(&m, k, xq, xs, y, 0, t->rows);
        for (r = 0; r < t->rows; r++)
            assert_float_equal(y[r], y_ref[r], 1e-5 + 1e-4 * fabs(y_ref[r]));
    }
    free(x);
    free(xs);
    free(xs_lib);
    free(xq);
    free(xq_lib);
    free(y);
    free(y_ref);
    free(xq_tokens);
    free(xs_tokens);
    free(xsum_tokens);
}

static void test_kernels_every_width(void **state)
{
    static const uint32_t shapes[][2] = {{37, 172}, {16, 64}, {5, 7}, {70, 288}, {13, 1100}, {22, 384}, {9, 320}};
    static const unsigned widths[][2] = {{2, 4}, {1, 3}, {3, 8}, {2, 2}, {2, 4}, {2, 4}, {3, 4}};
    size_t s;
    (void)state;
    for (s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        apt_tensor t;
        float *w = apt_random_matrix(shapes[s][0], shapes[s][1], 100 + s);
        apt_quantize(&t, w, shapes[s][0], shapes[s][1], widths[s][0], widths[s][1]);
        apt_check_kernels(&t, 200 + s);
        free(t.raw);
        free(w);
    }
}

/* The largest sums the kernels meet: every entry at its width's limit and
 * every activation at +-127 with one sign, so any int16 sum that wrapped
 * or saturated would show. */
/* Version 3 tensors (each row block's partial superblock its own, padded)
 * still load: the same weights repacked into that layout by the oracle's
 * addressing give every kernel's products, at every width, against the
 * oracle, for partial superblocks that version 4 shares by 2 and by 4. */
static void test_version3_still_reads(void **state)
{
    static const uint32_t shapes[][2] = {{22, 384}, {9, 320}};
    size_t s;
    (void)state;
    for (s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const uint32_t rows = shapes[s][0], cols = shapes[s][1];
        float *w = apt_random_matrix(rows, cols, 300 + s);
        apt_tensor now, old;
        size_t slices_now, slices_old, bit_old, at;
        uint32_t r, c;
        unsigned p;
        apt_quantize(&now, w, rows, cols, 2, 4);
        old = now;
        old.version = 3;
        slices_now = apt_slice_offset(&now, 3) + apt_slice_bytes(&now, 1);
        slices_old = apt_slice_offset(&old, 3) + apt_slice_bytes(&old, 1);
        assert_true(slices_old > slices_now); /* version 4 is the smaller */
        old.size = now.size - slices_now + slices_old;
        old.raw = (unsigned char *)calloc(1, old.size + 64);
        assert_non_null(old.raw);
        old.bytes = old.raw + (64 - (uintptr_t)old.raw % 64);
        memcpy(old.bytes, now.bytes, 64);
        old.bytes[6] = 3;
        memcpy(old.bytes + slices_old, now.bytes + slices_now, now.size - slices_now);
        for (p = 0; p < 4; p++)
            for (r = 0; r < rows; r++)
                for (c = 0; c < cols; c++) {
                    at = apt_bit_at(&old, r, c, p, &bit_old);
                    old.bytes[at] |= (unsigned char)(apt_bit(&now, r, c, p) << bit_old);
                }
        for (r = 0; r < rows; r++)
            for (c = 0; c < cols; c++)
                assert_true(apt_weight(&old, r, c, 4) == apt_weight(&now, r, c, 4));
        apt_check_kernels(&old, 400 + s);
        free(old.raw);
        free(now.raw);
        free(w);
    }
}

static void test_kernels_extreme_sums(void **state)
{
    const uint32_t rows = 8, cols = 512;
    float *w = apt_random_matrix(rows, cols, 7), x[512], xs[16], y[8], y2[8];
    int8_t xq[512];
    apt_tensor t;
    pmpd_anyprec_matrix m;
    unsigned k, sign;
    uint32_t r, c;
    (void)state;
    apt_quantize(&t, w, rows, cols, 2, 4);
    apt_view(&t, &m);
    for (k = 2; k <= 4; k++)
        memset((unsigned char *)(uintptr_t)m.tables[k], k < 4 ? 63 : 127, (size_t)rows << k);
    for (sign = 0; sign < 2; sign++) {
        for (c = 0; c < cols; c++)
            x[c] = sign ? -1.0f : 1.0f;
        pmpd_anyprec_quantize_input(x, cols, xq, xs);
        for (k = 2; k <= 4; k++) {
            float xsum;
            pmpd_anyprec_gemv(&m, k, xq, xs, y, 0, rows);
            for (r = 0; r < rows; r++) {
                double dot = 0.0;
                for (c = 0; c < cols; c++)
                    dot += apt_weight(&t, r, c, k) * xq[c] * xs[c / 32];
                assert_float_equal(y[r], dot, 1e-4 * fabs(dot) + 1e-6);
            }
            /* One token through the GEMM (512 columns: no padding). */
            xsum = 0.0f;
            for (c = 0; c < cols; c++)
                xsum += (float)xq[c] * xs[c / 32];
            pmpd_anyprec_gemm(&m, k, xq, xs, &xsum, 1, y2, rows, 0, rows);
            for (r = 0; r < rows; r++)
                assert_float_equal(y2[r], y[r], 1e-4 * fabs(y[r]) + 1e-6);
        }
    }
    free(t.raw);
    free(w);
}

/* A prefill long and wide enough that the SIMD GEMMs split the tokens into
 * several passes over the rows (their activation chunks): every token's
 * rows equal its own product with the weights decoded from the bytes. */
static void test_gemm_many_passes(void **state)
{
    const uint32_t rows = 9, cols = 8200;
    const size_t n = 70, stride = (cols + 255) / 256 * 256;
    float *w = apt_random_matrix(rows, cols, 11), *x = apt_random_matrix((uint32_t)n, cols, 12);
    float *xs = (float *)malloc(n * stride / 32 * sizeof(float)), *xsum = (float *)malloc(n * sizeof(float));
    float *y = (float *)malloc(n * rows * sizeof(float));
    double *decoded = (double *)malloc((size_t)cols * sizeof(double));
    int8_t *xq = (int8_t *)malloc(n * stride);
    apt_tensor t;
    pmpd_anyprec_matrix m;
    unsigned k;
    uint32_t r, c;
    size_t i;
    (void)state;
    apt_quantize(&t, w, rows, cols, 2, 4);
    apt_view(&t, &m);
    pmpd_anyprec_quantize_tokens(x, n, cols, xq, xs, xsum);
    for (k = 2; k <= 4; k++) {
        memset(y, 0x7f, n * rows * sizeof(float));
        pmpd_anyprec_gemm(&m, k, xq, xs, xsum, n, y, rows, 0, rows);
        for (r = 0; r < rows; r++) {
            for (c = 0; c < cols; c++)
                decoded[c] = apt_weight(&t, r, c, k);
            for (i = 0; i < n; i++) {
                double dot = 0.0;
                for (c = 0; c < cols; c++)
                    dot += decoded[c] * xq[i * stride + c] * xs[i * (stride / 32) + c / 32];
                assert_float_equal(y[i * rows + r], dot, 1e-5 + 1e-4 * fabs(dot));
            }
        }
    }
    free(t.raw);
    free(w);
    free(x);
    free(xs);
    free(xsum);
    free(y);
    free(decoded);
    free(xq);
}

/* Reading the parent at width k gives exactly the model quantized at k. */
static void test_nested_equals_direct(void **state)
{
    const uint32_t rows = 23, cols = 150;
    float *w = apt_random_matrix(rows, cols, 7);
    apt_tensor parent, direct;
    unsigned k;
    uint32_t r, c;
    (void)state;
    apt_quantize(&parent, w, rows, cols, 2, 6);
    for (k = 2; k < 6; k++) {
        apt_quantize(&direct, w, rows, cols, 2, k);
        for (r = 0; r < rows; r++)
            for (c = 0; c < cols; c++)
                assert_true(apt_weight(&parent, r, c, k) == apt_weight(&direct, r, c, k));
        free(direct.raw);
    }
    free(parent.raw);
    free(w);
}

/* Garbles the slice of plane p (a 1-bit slice). */
static void apt_garble_slice(apt_tensor *t, unsigned p)
{
    size_t i;
    for (i = 0; i < apt_slice_bytes(t, 1); i++)
        t->bytes[apt_slice_offset(t, p) + i] ^= (unsigned char)(0xA5 + p);
}

/* A k-bit product must not depend on planes below the top k: 3 bits not
 * on plane 3's slice, 2 bits not on plane 2's either (each its own slice). */
static void test_reads_only_top_planes(void **state)
{
    const uint32_t rows = 9, cols = 100;
    float *w = apt_random_matrix(rows, cols, 11), x[100], xs[4], y1[9], y2[9], y0[9];
    int8_t xq[128];
    apt_tensor t;
    pmpd_anyprec_matrix m;
    size_t i;
    (void)state;
    for (i = 0; i < cols; i++)
        x[i] = (float)i / 50.0f - 1.0f;
    pmpd_anyprec_quantize_input(x, cols, xq, xs);
    apt_quantize(&t, w, rows, cols, 2, 4);
    apt_view(&t, &m);
    pmpd_anyprec_gemv(&m, 2, xq, xs, y0, 0, rows);
    pmpd_anyprec_gemv(&m, 3, xq, xs, y1, 0, rows);
    apt_garble_slice(&t, 3);
    pmpd_anyprec_gemv(&m, 3, xq, xs, y2, 0, rows);
    assert_memory_equal(y1, y2, sizeof y1);
    pmpd_anyprec_gemv(&m, 4, xq, xs, y2, 0, rows);
    assert_memory_not_equal(y1, y2, sizeof y1);
    apt_garble_slice(&t, 2);
    pmpd_anyprec_gemv(&m, 2, xq, xs, y2, 0, rows);
    assert_memory_equal(y0, y2, sizeof y0);
    pmpd_anyprec_gemv(&m, 3, xq, xs, y2, 0, rows);
    assert_memory_not_equal(y1, y2, sizeof y1);
    free(t.raw);
    free(w);
}

/* More bits, less error; k-means on Gaussian rows beats uniform grids. */
static void test_error_falls_with_width(void **state)
{
    const uint32_t rows = 8, cols = 1024;
    float *w = apt_random_matrix(rows, cols, 3);
    static const double limit[] = {0, 0, 0.13, 0.04, 0.012};
    double prev = 1e30;
    apt_tensor t;
    unsigned k;
    uint32_t r, c;
    (void)state;
    apt_quantize(&t, w, rows, cols, 2, 4);
    for (k = 2; k <= 4; k++) {
        double err = 0.0, energy = 0.0;
        for (r = 0; r < rows; r++)
            for (c = 0; c < cols; c++) {
                double d = apt_weight(&t, r, c, k) - w[r * cols + c];
                err += d * d;
                energy += (double)w[r * cols + c] * w[r * cols + c];
            }
        assert_true(err / energy < limit[k]);
        assert_true(err < prev);
        prev = err;
    }
    free(t.raw);
    free(w);
}

static void test_view_rejects_bad_bytes(void **state)
{
    const uint32_t rows = 4, cols = 40;
    float *w = apt_random_matrix(rows, cols, 5), nan_value = NAN;
    apt_tensor t;
    pmpd_anyprec_matrix m;
    pmpd_error err;
    (void)state;
    apt_quantize(&t, w, rows, cols, 2, 3);
    assert_int_equal(pmpd_anyprec_view(t.bytes, t.size - 1, rows, cols, 0, &m, &err), PMPD_ERR_FORMAT_SHAPE);
    assert_int_equal(pmpd_anyprec_view(t.bytes, t.size, rows + 1, cols, 0, &m, &err), PMPD_ERR_FORMAT_SHAPE);
    assert_int_equal(pmpd_anyprec_view(t.bytes, 10, rows, cols, 0, &m, &err), PMPD_ERR_FORMAT_TRUNCATED);
    t.bytes[5] = 9;
    assert_int_equal(pmpd_anyprec_view(t.bytes, t.size, rows, cols, 0, &m, &err), PMPD_ERR_FORMAT_VALUE);
    t.bytes[5] = 3;
    t.bytes[20] = 1;
    assert_int_equal(pmpd_anyprec_view(t.bytes, t.size, rows, cols, 0, &m, &err), PMPD_ERR_FORMAT_VALUE);
    t.bytes[20] = 0;
    t.bytes[0] = 'X';
    assert_int_equal(pmpd_anyprec_view(t.bytes, t.size, rows, cols, 0, &m, &err), PMPD_ERR_FORMAT_MAGIC);
    t.bytes[0] = 'A';
    /* Version 0 (the 4x8-transposed planes of older builds) is refused by name. */
    t.bytes[6] = 0;
    assert_int_equal(pmpd_anyprec_view(t.bytes, t.size, rows, cols, 0, &m, &err), PMPD_ERR_FORMAT_VERSION);
    assert_non_null(strstr(err.message, "version 0"));
    /* So is version 2, whose narrow tables used 7-bit entries. */
    t.bytes[6] = 2;
    assert_int_equal(pmpd_anyprec_view(t.bytes, t.size, rows, cols, 0, &m, &err), PMPD_ERR_FORMAT_VERSION);
    assert_non_null(strstr(err.message, "version 2"));
    /* and a version this build does not know */
    t.bytes[6] = 5;
    assert_int_equal(pmpd_anyprec_view(t.bytes, t.size, rows, cols, 0, &m, &err), PMPD_ERR_FORMAT_VERSION);
    assert_non_null(strstr(err.message, "version 5"));
    t.bytes[6] = 4;
    /* Below 4 bits entries above 63 would overflow the kernels' int16 sums
     * of two groups; 63 itself is accepted.  (Width 2's scales start at 64
     * + 320 + 192: test_size_and_arguments.) */
    t.bytes[64 + 320 + 192 + 2 * 64] = 64;
    assert_int_equal(pmpd_anyprec_view(t.bytes, t.size, rows, cols, 0, &m, &err), PMPD_ERR_FORMAT_VALUE);
    assert_non_null(strstr(err.message, "above 63 at width 2"));
    t.bytes[64 + 320 + 192 + 2 * 64] = 63;
    assert_int_equal(pmpd_anyprec_view(t.bytes, t.size, rows, cols, 0, &m, &err), PMPD_OK);
    t.bytes[64 + 320 + 192 + 2 * 64] = 0;
    memcpy(t.bytes + 64 + 320 + 192 + 4, &nan_value, 4);
    assert_int_equal(pmpd_anyprec_view(t.bytes, t.size, rows, cols, 0, &m, &err), PMPD_ERR_FORMAT_NONFINITE);
    assert_true(err.offset == 64 + 320 + 192 + 4);
    free(t.raw);
    free(w);
}

static void test_quantize_rejects(void **state)
{
    float w[8] = {0, 1, 2, 3, 4, 5, 6, INFINITY}, imp[8] = {1, 1, 1, 1, 1, 1, 1, 0};
    unsigned char out[1024];
    (void)state;
    assert_int_equal(pmpd_anyprec_quantize(w, 1, 8, NULL, 2, 3, 0, 1, out, sizeof out), PMPD_ERR_FORMAT_NONFINITE);
    w[7] = 7;
    assert_int_equal(pmpd_anyprec_quantize(w, 1, 8, imp, 2, 3, 0, 1, out, sizeof out), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_anyprec_quantize(w, 1, 8, NULL, 2, 3, 0, 2, out, sizeof out), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_anyprec_quantize(w, 1, 8, NULL, 2, 3, 0, 1, out, 10), PMPD_ERR_INVALID_ARGUMENT);
    /* Eight distinct values at 3 bits are reproduced exactly. */
    assert_int_equal(pmpd_anyprec_quantize(w, 1, 8, NULL, 2, 3, 0, 1, out, sizeof out), PMPD_OK);
    {
        apt_tensor t;
        uint32_t c;
        t.bytes = out;
        t.rows = 1;
        t.cols = 8;
        t.seed = 2;
        t.parent = 3;
        t.version = 4;
        for (c = 0; c < 8; c++)
            assert_float_equal(apt_weight(&t, 0, c, 3), w[c], 7.0 / 254);
    }
    /* A call past row 0 reads the header the first wrote: other widths or
     * another layout version (whose offsets differ) are refused. */
    assert_int_equal(pmpd_anyprec_quantize(w, 1, 8, NULL, 2, 3, 1, 1, out, sizeof out), PMPD_OK);
    assert_int_equal(pmpd_anyprec_quantize(w, 1, 8, NULL, 3, 3, 1, 1, out, sizeof out), PMPD_ERR_INVALID_ARGUMENT);
    out[6] = 3;
    assert_int_equal(pmpd_anyprec_quantize(w, 1, 8, NULL, 2, 3, 1, 1, out, sizeof out), PMPD_ERR_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size_and_arguments),
        cmocka_unit_test(test_kernels_every_width),
        cmocka_unit_test(test_version3_still_reads),
        cmocka_unit_test(test_kernels_extreme_sums),
        cmocka_unit_test(test_gemm_many_passes),
        cmocka_unit_test(test_nested_equals_direct),
        cmocka_unit_test(test_reads_only_top_planes),
        cmocka_unit_test(test_error_falls_with_width),
        cmocka_unit_test(test_view_rejects_bad_bytes),
        cmocka_unit_test(test_quantize_rejects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
