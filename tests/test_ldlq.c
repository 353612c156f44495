/* LDLQ (offline/ldlq/): data-aware rounding of rotated rows.
 *  - the factor against this test's own linear algebra: every row's
 *    output error e H e^T equals the residuals weighed by the Schur
 *    complements, sum_B eta_B D_B eta_B^T, D_B = H_BB - H_BT H_TT^-1 H_TB
 *    over the columns T after block B (solved here by Gaussian
 *    elimination), for blocks of 1, 2 and 5 columns and a coarse grid;
 *  - with a fine grid the mean output error over many rows falls from
 *    tr(H) to sum_B tr(D_B) times the grid's variance (LDLQ's promise),
 *    within 5%;
 *  - a block-diagonal H feeds nothing forward: the encoders' data-free
 *    codes exactly (nuq, vq, tcq bytes past the scales);
 *  - on a correlated H the nuq, vq and tcq encodings decoded by the format
 *    table lose less output error than the data-free ones;
 *  - the moments collected from stories260K: q, k, v share one, gate and
 *    up one; symmetric; the diagonal equals the column importance that
 *    offline/precision/importance.c accumulates on the same text;
 *  - a conversion with ldlq_sequences (--type nuq3, and a budget whose
 *    report says so) writes a model that loads; palette_gaussian with it
 *    is refused; with the user's text (ldlq_text_path) too, and a text
 *    too short or missing is refused with no output.
 * TCQ's Viterbi encodings are left to native and sanitizer runs (minutes
 * under qemu). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd.h"
#include "pmpd_impl/core/hadamard.h"
#include "pmpd_impl/offline/ldlq/hessian.h"
#include "pmpd_impl/offline/ldlq/ldlq.h"
#include "pmpd_impl/offline/nuq/nuq_build.h"
#include "pmpd_impl/offline/precision/importance.h"
#include "pmpd_impl/offline/palette/distortion.h"
#include "pmpd_impl/offline/weights/encoders.h"
#include "pmpd_impl/offline/format/from_model.h"
#include "pmpd_impl/weights/format.h"
#include "pmpd_impl/weights/nuq/nuq.h"
#include "pmpd_impl/weights/tcq/tcq.h"
#include "pmpd_impl/weights/vq/vq.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

#define OUT_PATH "build/test_ldlq.pmpd"
#define TEXT_PATH "build/test_ldlq.txt"

/* The test's own generator: xorshift64* and Box-Muller in double. */
static uint64_t ld_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(2685821657736338717);
}

static double ld_normal(uint64_t *s)
{
    double u = ((double)(ld_next(s) >> 11) + 0.5) / 9007199254740992.0;
    double v = ((double)(ld_next(s) >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* A correlated symmetric positive definite n x n matrix: A A^T / m with m
 * samples whose columns mix neighbours (x_c = z_c + 0.8 x_{c-1}) and
 * scale unevenly, as a layer's input does. */
static void ld_moment(size_t n, uint64_t seed, double *h)
{
    const size_t m = 4 * n;
    double *x = (double *)malloc(n * sizeof *x);
    size_t i, j, k;
    assert_non_null(x);
    memset(h, 0, n * n * sizeof *h);
    for (k = 0; k < m; k++) {
        for (i = 0; i < n; i++)
            x[i] = ld_normal(&seed) * (1.0 + (double)(i % 7)) + (i ? 0.8 * x[i - 1] : 0.0);
        for (i = 0; i < n; i++)
            for (j = i; j < n; j++)
                h[i * n + j] += x[i] * x[j] / (double)m;
    }
    for (i = 0; i < n; i++)
        for (j = 0; j < i; j++)
            h[i * n + j] = h[j * n + i];
    free(x);
}

/* H with LDLQ's damping, as pmpd_ldlq_factor factors it. */
static void ld_damped(const double *h, size_t n, double *out)
{
    double mean = 0.0;
    size_t i;
    for (i = 0; i < n; i++)
        mean += h[i * n + i] / (double)n;
    memcpy(out, h, n * n * sizeof *out);
    for (i = 0; i < n; i++)
        out[i * n + i] += PMPD_LDLQ_DAMPING * mean;
}

/* D_B = H_BB - H_BT H_TT^-1 H_TB for B = [b0, b1), T = [b1, n): Gaussian
 * elimination with partial pivoting on [H_TT | H_TB]. */
static void ld_schur(const double *h, size_t n, size_t b0, size_t b1, double *d)
{
    const size_t t = n - b1, b = b1 - b0, w = t + b;
    double *a = (double *)malloc((t ? t : 1) * w * sizeof *a);
    size_t i, j, k, r;
    assert_non_null(a);
    for (i = 0; i < t; i++) {
        for (j = 0; j < t; j++)
            a[i * w + j] = h[(b1 + i) * n + b1 + j];
        for (j = 0; j < b; j++)
            a[i * w + t + j] = h[(b1 + i) * n + b0 + j];
    }
    for (k = 0; k < t; k++) {
        size_t p = k;
        for (r = k + 1; r < t; r++)
            if (fabs(a[r * w + k]) > fabs(a[p * w + k]))
                p = r;
        for (j = 0; j < w; j++) {
            double s = a[k * w + j];
            a[k * w + j] = a[p * w + j];
            a[p * w + j] = s;
        }
        for (r = 0; r < t; r++)
            if (r != k) {
                double f = a[r * w + k] / a[k * w + k];
                for (j = k; j < w; j++)
                    a[r * w + j] -= f * a[k * w + j];
            }
    }
    /* Row k of a now reads a_kk X_k with X = H_TT^-1 H_TB. */
    for (i = 0; i < b; i++)
        for (j = 0; j < b; j++) {
            double s = h[(b0 + i) * n + b0 + j];
            for (k = 0; k < t; k++)
                s -= h[(b0 + i) * n + b1 + k] * a[k * w + t + j] / a[k * w + k];
            d[i * b + j] = s;
        }
    free(a);
}

/* e H e^T. */
static double ld_quadratic(const double *h, const double *e, size_t n)
{
    double s = 0.0;
    size_t i, j;
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++)
            s += e[i] * h[i * n + j] * e[j];
    return s;
}

/* Rounding to a grid of step context[0]. */
static void ld_grid(void *context, size_t begin, size_t end, const float *target, float *q)
{
    const float step = *(const float *)context;
    size_t c;
    for (c = begin; c < end; c++)
        q[c - begin] = step * (float)floor(target[c - begin] / step + 0.5);
}

static void test_loss_identity(void **state)
{
    static const size_t blocks[] = {1, 2, 5};
    const size_t n = 23;
    double *h = (double *)malloc(n * n * sizeof *h), *hd = (double *)malloc(n * n * sizeof *hd);
    double d[25], e[23], eta[23];
    float v[23], target[23], q[23], step = 0.7f;
    uint64_t seed = 5;
    size_t k, b0, i, j, r;
    (void)state;
    assert_non_null(h);
    assert_non_null(hd);
    ld_moment(n, 11, h);
    ld_damped(h, n, hd);
    for (k = 0; k < 3; k++) {
        pmpd_ldlq f;
        double worst = 0.0;
        assert_int_equal(pmpd_ldlq_factor(h, n, blocks[k], &f), PMPD_OK);
        for (r = 0; r < 20; r++) {
            double direct, weighed = 0.0;
            for (i = 0; i < n; i++)
                v[i] = (float)ld_normal(&seed);
            pmpd_ldlq_row(&f, n, blocks[k], v, ld_grid, &step, target, q);
            for (i = 0; i < n; i++) {
                e[i] = (double)v[i] - q[i];
                eta[i] = (double)target[i] - q[i];
            }
            direct = ld_quadratic(hd, e, n);
            for (b0 = 0; b0 < n; b0 += blocks[k]) {
                const size_t b1 = b0 + blocks[k] < n ? b0 + blocks[k] : n, b = b1 - b0;
                ld_schur(hd, n, b0, b1, d);
                for (i = 0; i < b; i++)
                    for (j = 0; j < b; j++)
                        weighed += eta[b0 + i] * d[i * b + j] * eta[b0 + j];
            }
            if (fabs(direct - weighed) / direct > worst)
                worst = fabs(direct - weighed) / direct;
        }
        printf("blocks of %zu: e H e^T against sum eta D eta^T, at most %.2e apart\n", blocks[k], worst);
        assert_true(worst < 1e-4);
        pmpd_ldlq_free(&f);
    }
    free(h);
    free(hd);
}

static void test_fine_grid_gain(void **state)
{
    static const size_t blocks[] = {1, 4};
    const size_t n = 32, rows = 4000;
    double *h = (double *)malloc(n * n * sizeof *h), *hd = (double *)malloc(n * n * sizeof *hd);
    double d[16], e[32], trace = 0.0;
    float v[32], target[32], q[32], step = 1e-3f;
    uint64_t seed = 9;
    size_t k, i, r, b0;
    (void)state;
    assert_non_null(h);
    assert_non_null(hd);
    ld_moment(n, 17, h);
    ld_damped(h, n, hd);
    for (i = 0; i < n; i++)
        trace += hd[i * n + i];
    for (k = 0; k < 2; k++) {
        pmpd_ldlq f;
        double ldlq = 0.0, nearest = 0.0, schur = 0.0, expected, measured;
        assert_int_equal(pmpd_ldlq_factor(h, n, blocks[k], &f), PMPD_OK);
        for (b0 = 0; b0 < n; b0 += blocks[k]) {
            ld_schur(hd, n, b0, b0 + blocks[k], d);
            for (i = 0; i < blocks[k]; i++)
                schur += d[i * blocks[k] + i];
        }
        for (r = 0; r < rows; r++) {
            for (i = 0; i < n; i++)
                v[i] = (float)ld_normal(&seed);
            pmpd_ldlq_row(&f, n, blocks[k], v, ld_grid, &step, target, q);
            for (i = 0; i < n; i++)
                e[i] = (double)v[i] - q[i];
            ldlq += ld_quadratic(hd, e, n);
            pmpd_ldlq_row(NULL, n, blocks[k], v, ld_grid, &step, target, q);
            for (i = 0; i < n; i++)
                e[i] = (double)v[i] - q[i];
            nearest += ld_quadratic(hd, e, n);
        }
        expected = schur / trace;
        measured = ldlq / nearest;
        printf("blocks of %zu: output error LDLQ / nearest %.4f, sum tr(D_B) / tr(H) %.4f\n", blocks[k], measured,
               expected);
        assert_true(expected < 0.8);
        assert_true(fabs(measured / expected - 1.0) < 0.05);
        pmpd_ldlq_free(&f);
    }
    free(h);
    free(hd);
}

/* A rows x cols Gaussian matrix with some rows scaled up. */
static float *ld_matrix(size_t rows, size_t cols, uint64_t seed)
{
    float *w = (float *)malloc(rows * cols * sizeof *w);
    size_t i;
    assert_non_null(w);
    for (i = 0; i < rows * cols; i++)
        w[i] = (float)(ld_normal(&seed) * (1.0 + (double)(i / cols % 3)));
    return w;
}

/* Encodes w as type (nuq3, vq2.5 or tcq2.5) with ldlq through the bit
 * allocation's encoder into a block that the format table reads. */
static void *ld_encode(uint32_t type, const float *w, size_t rows, size_t cols, const pmpd_ldlq *ldlq,
                       pmpd_tensor *tensor)
{
    pmpd_convert_options o;
    pmpd_build_tensor t;
    void *block;
    memset(&o, 0, sizeof o);
    o.nuq_bits = 3;
    o.vq_quarter_bits = o.tcq_quarter_bits = 10;
    memset(&t, 0, sizeof t);
    strcpy(t.name, "w");
    t.type = PMPD_TENSOR_F32;
    t.n_dims = 2;
    t.dims[0] = rows;
    t.dims[1] = cols;
    t.data = (unsigned char *)(uintptr_t)w;
    t.size = rows * cols * sizeof *w;
    assert_int_equal(pmpd_palette_encode(&t, type, &o, ldlq, &block, tensor), PMPD_OK);
    return block;
}

/* Where the codes of ld_encode's tensor start (after the per-row scales). */
static size_t ld_codes(uint32_t type, size_t rows, size_t cols)
{
    pmpd_rotated_layout layout;
    pmpd_tcq_layout trellis;
    unsigned s1, s2;
    if (type == PMPD_TENSOR_NUQ) {
        assert_int_equal(pmpd_nuq_compute_layout(rows, cols, 3, &layout), PMPD_OK);
        return layout.index_offset;
    }
    if (type == PMPD_TENSOR_VQ2) {
        assert_int_equal(pmpd_vq_compute_layout(rows, cols, 5, &layout), PMPD_OK);
        return layout.index_offset;
    }
    pmpd_tcq_shifts(10, &s1, &s2);
    assert_int_equal(pmpd_tcq_compute_layout(rows, cols, s1, s2, &trellis), PMPD_OK);
    return trellis.bits_offset;
}

static void test_block_diagonal_is_data_free(void **state)
{
    static const uint32_t types[] = {PMPD_TENSOR_NUQ, PMPD_TENSOR_VQ2, PMPD_TENSOR_TCQ};
    const size_t rows = 6, cols = 300, n = pmpd_hadamard_size(cols);
    double *h = (double *)calloc(n * n, sizeof *h);
    float *w = ld_matrix(rows, cols, 3);
    size_t k, i, j;
    (void)state;
    assert_non_null(h);
    /* Diagonal blocks of 256 columns (coupled inside, not across): no
     * block of any encoder spans two of them. */
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++)
            if (i / 256 == j / 256)
                h[i * n + j] = i == j ? 2.0 + (double)(i % 5) : 0.0;
    for (k = 0; k < (test_emulated() ? 2u : 3u); k++) {
        pmpd_ldlq f;
        pmpd_tensor with, without;
        void *a, *b;
        const size_t at = ld_codes(types[k], rows, cols);
        assert_int_equal(pmpd_ldlq_factor(h, n, pmpd_weight_ldlq_block(types[k]), &f), PMPD_OK);
        a = ld_encode(types[k], w, rows, cols, &f, &with);
        b = ld_encode(types[k], w, rows, cols, NULL, &without);
        assert_int_equal(with.size, without.size);
        assert_memory_equal((const unsigned char *)with.data + at, (const unsigned char *)without.data + at,
                            (size_t)with.size - at);
        free(a);
        free(b);
        pmpd_ldlq_free(&f);
    }
    free(h);
    free(w);
}

/* Sum over rows of e H e^T, e = w - the decoded row (rotated back). */
static double ld_output_error(const pmpd_tensor *t, const float *w, const double *h)
{
    const size_t rows = (size_t)t->dims[0], cols = (size_t)t->dims[1];
    float *row = (float *)malloc(cols * sizeof *row);
    double *e = (double *)malloc(cols * sizeof *e), sum = 0.0;
    size_t r, c;
    assert_non_null(row);
    assert_non_null(e);
    for (r = 0; r < rows; r++) {
        pmpd_weight_format_of(t->type)->row(t, r, row);
        for (c = 0; c < cols; c++)
            e[c] = (double)w[r * cols + c] - row[c];
        sum += ld_quadratic(h, e, cols);
    }
    free(row);
    free(e);
    return sum;
}

/* The original-domain moment rotated the way the encoders rotate rows,
 * through pmpd_hessian_factors on a one-record set. */
static void test_correlated_gain(void **state)
{
    static const uint32_t types[] = {PMPD_TENSOR_NUQ, PMPD_TENSOR_VQ2, PMPD_TENSOR_TCQ};
    static const double most[] = {0.7, 0.8, 0.95};
    /* Two trellis sequences a row for TCQ; under qemu, where TCQ is left
     * out, half as wide. */
    const size_t rows = 24, cols = test_emulated() ? 256 : 512;
    pmpd_hessian_set set;
    pmpd_tensor model_tensor;
    float *w = ld_matrix(rows, cols, 4);
    size_t k;
    (void)state;
    memset(&set, 0, sizeof set);
    set.n = set.capacity = 1;
    set.records = (pmpd_hessian *)calloc(1, sizeof *set.records);
    assert_non_null(set.records);
    memset(&model_tensor, 0, sizeof model_tensor);
    strcpy(set.records[0].head.name, "w");
    set.records[0].head.cols = cols;
    set.records[0].moment = (double *)malloc(cols * cols * sizeof(double));
    assert_non_null(set.records[0].moment);
    ld_moment(cols, 23, set.records[0].moment);
    for (k = 0; k < (test_emulated() ? 2u : 3u); k++) {
        const size_t block = pmpd_weight_ldlq_block(types[k]);
        const pmpd_ldlq *f;
        pmpd_tensor with, without;
        void *a, *b;
        double aware, free_;
        assert_int_equal(pmpd_hessian_factors(&set, block, PMPD_NUQ_SEED, NULL), PMPD_OK);
        f = pmpd_hessian_factor(&set, "w", cols, block);
        assert_non_null(f);
        assert_int_equal(f->n, pmpd_hadamard_size(cols));
        a = ld_encode(types[k], w, rows, cols, f, &with);
        b = ld_encode(types[k], w, rows, cols, NULL, &without);
        aware = ld_output_error(&with, w, set.records[0].moment);
        free_ = ld_output_error(&without, w, set.records[0].moment);
        printf("%s: output error with LDLQ / data-free %.3f\n", pmpd_tensor_type_name((pmpd_tensor_type)types[k]),
               aware / free_);
        assert_true(aware < most[k] * free_);
        free(a);
        free(b);
    }
    pmpd_hessian_free(&set);
    free(w);
}

static void test_collect_stories(void **state)
{
    pmpd_build_model b;
    pmpd_build_opened opened;
    pmpd_hessian_set set;
    pmpd_calibration_config config;
    pmpd_calibration_set text;
    pmpd_anyprec_importance importance;
    pmpd_error err;
    const uint32_t sequences = 3, length = 24;
    uint32_t i, owners = 0;
    double worst = 0.0;
    (void)state;
    assert_int_equal(test_import_shared("models/stories260K.bin", "models/tok512.bin", &b), PMPD_OK);
    assert_int_equal(pmpd_hessian_collect(&b, sequences, length, NULL, 0, 77, 1, &set, &err), PMPD_OK);
    /* The same text, as pmpd_hessian_collect samples it, through the
     * column importance's own accumulation. */
    assert_int_equal(pmpd_build_open(&b, &opened, &err), PMPD_OK);
    pmpd_calibration_config_init(&config);
    config.n_prompts = sequences;
    config.prompt_length = length - 2;
    config.output_length = 1;
    config.seed = 77;
    assert_int_equal(pmpd_calibration_set_sample(opened.model, &config, PMPD_CALIBRATION_TRAIN, &text), PMPD_OK);
    assert_int_equal(pmpd_anyprec_importance_collect(opened.model, &text, &importance), PMPD_OK);
    for (i = 0; i < set.n; i++) {
        const pmpd_hessian *h = &set.records[i];
        const double *m = pmpd_hessian_find(&set, h->head.name, h->head.cols);
        const size_t cols = (size_t)h->head.cols;
        uint32_t k;
        size_t r, c;
        assert_non_null(m);
        /* Every position through the layers; the classifier sees only the
         * last (prefill's logits). */
        assert_int_equal(h->tokens, strncmp(h->head.name, "blk.", 4) == 0 ? (uint64_t)sequences * length : sequences);
        owners += h->owner == i;
        if (strstr(h->head.name, "attn_k") || strstr(h->head.name, "attn_v"))
            assert_non_null(strstr(set.records[h->owner].head.name, "attn_q"));
        if (strstr(h->head.name, "ffn_up"))
            assert_non_null(strstr(set.records[h->owner].head.name, "ffn_gate"));
        if (strstr(h->head.name, "attn_output") || strstr(h->head.name, "ffn_down") ||
            strstr(h->head.name, "attn_q") || strstr(h->head.name, "ffn_gate"))
            assert_int_equal(h->owner, i);
        for (r = 0; r < cols; r++)
            for (c = 0; c < cols; c++)
                assert_true(m[r * cols + c] == m[c * cols + r]);
        for (k = 0; k < importance.n_tensors; k++)
            if (strcmp(importance.tensors[k].head.name, h->head.name) == 0)
                for (c = 0; c < cols; c++) {
                    double mean = importance.tensors[k].sum_squares[c] / (double)importance.tensors[k].rows_seen;
                    if (fabs(m[c * cols + c] - mean) > worst * mean)
                        worst = fabs(m[c * cols + c] - mean) / mean;
                }
    }
    printf("%u matrices, %u distinct inputs; diagonal against the column importance at most %.1e apart\n", set.n,
           owners, worst);
    assert_int_equal(owners, 5 * 4 + 1); /* per layer qkv, wo, w1/w3, w2; the classifier */
    assert_true(worst < 1e-9);
    pmpd_anyprec_importance_free(&importance);
    pmpd_calibration_set_free(&text);
    pmpd_build_close(&opened);
    pmpd_hessian_free(&set);
    pmpd_build_free(&b);
}

static int ld_file_exists(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f)
        fclose(f);
    return f != NULL;
}

/* --type nuq3 of stories260K with LDLQ over 4 sequences of 32 tokens. */
static void ld_nuq3_options(pmpd_convert_options *o, char *in, char *tok, size_t size)
{
    test_shared_path(in, size, "models/stories260K.bin");
    memset(o, 0, sizeof *o);
    o->tokenizer_path = test_shared_path(tok, size, "models/tok512.bin");
    o->type = PMPD_TENSOR_NUQ;
    o->nuq_bits = 3;
    o->ldlq_sequences = 4;
    o->ldlq_length = 32;
}

typedef struct ld_capture {
    int called, ldlq;
    uint64_t bytes, budget_bytes;
} ld_capture;

static void ld_allocated(void *context, const pmpd_palette_report *report)
{
    ld_capture *c = (ld_capture *)context;
    c->called++;
    c->ldlq = report->ldlq;
    c->bytes = report->bytes;
    c->budget_bytes = report->budget_bytes;
}

static void test_convert(void **state)
{
    static const pmpd_tensor_type palette[] = {PMPD_TENSOR_Q4, PMPD_TENSOR_NUQ};
    static const unsigned palette_widths[] = {0, 3};
    char in[512], tok[512];
    pmpd_convert_options o;
    pmpd_error err;
    ld_capture c;
    (void)state;
    ld_nuq3_options(&o, in, tok, sizeof in);
    assert_int_equal(pmpd_convert_file(in, OUT_PATH, &o, NULL, &err), PMPD_OK);
    assert_true(ld_file_exists(OUT_PATH)); /* and loaded: the converter checks what it wrote */

    memset(&c, 0, sizeof c);
    o.budget_bits = 4.0;
    o.palette = palette;
    o.palette_bits = palette_widths;
    o.n_palette = 2;
    o.palette_flat = 1;
    o.allocated = ld_allocated;
    o.progress_context = &c;
    assert_int_equal(pmpd_convert_file(in, OUT_PATH, &o, NULL, &err), PMPD_OK);
    assert_int_equal(c.called, 1);
    assert_int_equal(c.ldlq, 1);
    assert_true(c.bytes <= c.budget_bytes);

    o.palette_gaussian = 1;
    remove(OUT_PATH);
    assert_int_equal(pmpd_convert_file(in, OUT_PATH, &o, NULL, &err), PMPD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "LDLQ"));
    assert_false(ld_file_exists(OUT_PATH));
}

/* The user's calibration text: windows of its tokens; a text too short
 * for the sequences asked is refused with the count it gives, a missing
 * file with NOT_FOUND, neither leaving an output. */
static void test_convert_text(void **state)
{
    char in[512], tok[512];
    pmpd_convert_options o;
    pmpd_error err;
    FILE *f;
    int i;
    (void)state;
    f = fopen(TEXT_PATH, "wb");
    assert_non_null(f);
    for (i = 0; i < 60; i++)
        fputs("Once upon a time, there was a little girl named Lily. She liked to play in the park. ", f);
    fclose(f);
    ld_nuq3_options(&o, in, tok, sizeof in);
    o.ldlq_text_path = TEXT_PATH;
    remove(OUT_PATH);
    assert_int_equal(pmpd_convert_file(in, OUT_PATH, &o, NULL, &err), PMPD_OK);
    assert_true(ld_file_exists(OUT_PATH));
    remove(OUT_PATH);
    o.ldlq_sequences = 1000;
    assert_int_equal(pmpd_convert_file(in, OUT_PATH, &o, NULL, &err), PMPD_ERR_INVALID_ARGUMENT);
    printf("%s\n", err.message);
    assert_non_null(strstr(err.message, "tokens"));
    assert_false(ld_file_exists(OUT_PATH));
    o.ldlq_sequences = 4;
    o.ldlq_length = 100000;
    assert_int_equal(pmpd_convert_file(in, OUT_PATH, &o, NULL, &err), PMPD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "context"));
    o.ldlq_length = 32;
    o.ldlq_text_path = "build/test_ldlq_no_such_text.txt";
    assert_int_equal(pmpd_convert_file(in, OUT_PATH, &o, NULL, &err), PMPD_ERR_NOT_FOUND);
    assert_false(ld_file_exists(OUT_PATH));
    remove(TEXT_PATH);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loss_identity),
        cmocka_unit_test(test_fine_grid_gain),
        cmocka_unit_test(test_block_diagonal_is_data_free),
        cmocka_unit_test(test_correlated_gain),
        cmocka_unit_test(test_collect_stories),
        cmocka_unit_test(test_convert),
        cmocka_unit_test(test_convert_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
