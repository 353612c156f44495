/* The rotated formats' shared test steps (test_rotated.h). */
#include "tests/support/test_rotated.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pmpd_impl/core/hadamard.h"
#include "pmpd_impl/format/le.h"
#include "pmpd_impl/model/model.h"
#include "pmpd_impl/offline/weights/encoders.h"
#include "pmpd_impl/weights/format.h"
#include "pmpd_impl/weights/rotated/rotated.h"
#include "tests/support/test_support.h"

void test_rotated_expect(test_rotated_view view, const char *format, const unsigned char *data, size_t size,
                         size_t rows, size_t cols, pmpd_status status, uint64_t offset, const char *what)
{
    pmpd_error err;
    pmpd_status got;
    memset(&err, 0, sizeof err);
    got = view(data, size, rows, cols, 1000, &err);
    if (got != status || (offset != PMPD_NO_OFFSET && err.offset != 1000 + offset))
        fail_msg("%s %s: status %d at offset %llu, expected %d at %llu (%s)", format, what, (int)got,
                 (unsigned long long)err.offset, (int)status, (unsigned long long)(1000 + offset), err.message);
    if (status != PMPD_OK && !strstr(err.message, format))
        fail_msg("%s %s: the message does not name the format: %s", format, what, err.message);
}

void test_rotated_header(test_rotated_view view, const char *format, const unsigned char *good,
                         unsigned char *bad, size_t size, size_t rows, size_t cols)
{
    memcpy(bad, good, size);
    test_rotated_expect(view, format, bad, size, rows, cols, PMPD_OK, PMPD_NO_OFFSET, "good");
    test_rotated_expect(view, format, bad, 63, rows, cols, PMPD_ERR_FORMAT_SHAPE, 0, "no header");
    bad[0] = 'X';
    test_rotated_expect(view, format, bad, size, rows, cols, PMPD_ERR_FORMAT_MAGIC, 0, "magic");
    memcpy(bad, good, size);
    pmpd_le_put_u32(bad + 4, pmpd_le_u32(good + 4) + 1);
    test_rotated_expect(view, format, bad, size, rows, cols, PMPD_ERR_FORMAT_VERSION, 4, "version");
    memcpy(bad, good, size);
    pmpd_le_put_u32(bad + 8, (uint32_t)rows + 1);
    test_rotated_expect(view, format, bad, size, rows, cols, PMPD_ERR_FORMAT_SHAPE, 8, "rows");
    memcpy(bad, good, size);
    pmpd_le_put_u32(bad + 12, (uint32_t)cols - 1);
    test_rotated_expect(view, format, bad, size, rows, cols, PMPD_ERR_FORMAT_SHAPE, 8, "cols");
    memcpy(bad, good, size);
    test_rotated_expect(view, format, bad, size, rows, cols - 1, PMPD_ERR_FORMAT_SHAPE, 8, "entry disagrees");
    memcpy(bad, good, size);
}

void test_rotated_size_and_scales(test_rotated_view view, const char *format, const unsigned char *good,
                                  unsigned char *bad, size_t size, size_t rows, size_t cols)
{
    const float nan_value = NAN, negative = -1.0f;
    memcpy(bad, good, size);
    test_rotated_expect(view, format, bad, size - 1, rows, cols, PMPD_ERR_FORMAT_TRUNCATED, 0, "truncated");
    bad[size] = 0;
    test_rotated_expect(view, format, bad, size + 1, rows, cols, PMPD_ERR_FORMAT_SHAPE, 0, "trailing byte");
    memcpy(bad + 64 + 4 * 2, &nan_value, 4);
    test_rotated_expect(view, format, bad, size, rows, cols, PMPD_ERR_FORMAT_NONFINITE, 64 + 4 * 2, "NaN scale");
    memcpy(bad, good, size);
    memcpy(bad + 64 + 4 * 4, &negative, 4);
    test_rotated_expect(view, format, bad, size, rows, cols, PMPD_ERR_FORMAT_VALUE, 64 + 4 * 4, "negative scale");
    memcpy(bad, good, size);
    bad[64 + 4 * rows + 3] = 1;
    test_rotated_expect(view, format, bad, size, rows, cols, PMPD_ERR_FORMAT_VALUE, 64 + 4 * rows + 3,
                        "scale padding");
    memcpy(bad, good, size);
}

pmpd_status test_rotated_convert_stories(const pmpd_convert_options *options, const char *format,
                                         test_opened_file *f)
{
    char path[128];
    pmpd_convert_options o = *options;
    pmpd_error err;
    pmpd_status status;
    snprintf(path, sizeof path, "/tmp/pmpd-test-%s-%ld.pmpd", format, (long)getpid());
    o.tokenizer_path = "../shared/models/tok512.bin";
    status = pmpd_convert_file("../shared/models/stories260K.bin", path, &o, NULL, &err);
    if (status != PMPD_OK)
        return status;
    status = test_open_file(path, f);
    unlink(path);
    return status;
}

void test_rotated_open_stories(const pmpd_convert_options *options, test_opened_model *o)
{
    pmpd_build_model b;
    assert_int_equal(test_import_shared("models/stories260K.bin", "models/tok512.bin", &b), PMPD_OK);
    assert_int_equal(test_open_built(&b, options, o), PMPD_OK);
}

void test_rotated_score(const pmpd_model *model, const int32_t *ids, size_t n, const float *ref, double *kl,
                        double *top1)
{
    const size_t vocab = pmpd_model_get_info(model)->vocab_size;
    float *got = test_forced_logits(model, ids, n);
    double sum = 0;
    size_t i, agree = 0;
    assert_non_null(got);
    for (i = 0; i < n; i++) {
        sum += test_softmax_kl(ref + i * vocab, got + i * vocab, vocab);
        agree += test_argmax(ref + i * vocab, vocab) == test_argmax(got + i * vocab, vocab);
    }
    *kl = sum / (double)n;
    *top1 = (double)agree / (double)n;
    free(got);
}

void test_rotated_streamed(const pmpd_convert_options *options, const char *format, test_opened_file *f)
{
    const pmpd_model *m;
    assert_int_equal(test_rotated_convert_stories(options, format, f), PMPD_OK);
    m = f->model;
    assert_int_equal(m->layers[0].wq->type, options->type);
    assert_int_equal(m->layers[0].w_down->type, options->type);
    assert_int_equal(m->classifier->type, PMPD_TENSOR_Q8);
}

/* A rows x cols tensor of type over data (size bytes), for the format
 * table's functions. */
static pmpd_tensor test_rotated_tensor(uint32_t type, size_t rows, size_t cols, const unsigned char *data,
                                       size_t size)
{
    pmpd_tensor t;
    memset(&t, 0, sizeof t);
    t.type = type;
    t.n_dims = 2;
    t.dims[0] = rows;
    t.dims[1] = cols;
    t.data = data;
    t.size = size;
    return t;
}

void test_rotated_older_rotation(uint32_t type, unsigned bits)
{
    const size_t rows = 5, wide = 192, cols = 172;
    const pmpd_weight_format *format = pmpd_weight_format_of(type);
    pmpd_convert_options options;
    pmpd_tensor t;
    pmpd_error err;
    test_rng rng;
    uint64_t size = 0, dims[2] = {rows, wide};
    size_t scratch_bytes = 0, r, c;
    float *wide_row = (float *)malloc(rows * wide * sizeof(float)), *w = (float *)malloc(rows * cols * sizeof(float));
    float *x = (float *)malloc(cols * sizeof(float)), *y = (float *)malloc(rows * sizeof(float));
    unsigned char *data;
    void *scratch;
    assert_non_null(format);
    assert_true(wide_row && w && x && y);
    assert_true(pmpd_hadamard_size(cols) < wide && pmpd_rotated_rotation_fits(cols, wide));
    memset(&options, 0, sizeof options);
    options.nuq_bits = type == PMPD_TENSOR_NUQ ? bits : 0;
    options.vq_quarter_bits = type == PMPD_TENSOR_VQ2 ? bits : 0;
    options.tcq_quarter_bits = type == PMPD_TENSOR_TCQ ? bits : 0;
    test_rng_seed(&rng, 15);
    for (c = 0; c < rows * wide; c++)
        wide_row[c] = test_rng_normal(&rng);
    assert_int_equal(pmpd_weight_stream_bytes(&options, type, 2, dims, &size), PMPD_OK);
    data = (unsigned char *)malloc((size_t)size);
    assert_non_null(data);
    assert_int_equal(pmpd_weight_encode_matrix(&options, type, NULL, wide_row, rows, wide, data, (size_t)size), PMPD_OK);
    t = test_rotated_tensor(type, rows, wide, data, (size_t)size);
    assert_int_equal(format->check(data, size, 2, t.dims, 0, "w", 1, &err), PMPD_OK);
    for (r = 0; r < rows; r++) {
        format->row(&t, r, wide_row);
        memcpy(w + r * cols, wide_row, cols * sizeof(float));
    }
    pmpd_le_put_u32(data + 12, (uint32_t)cols);
    t = test_rotated_tensor(type, rows, cols, data, (size_t)size);
    assert_int_equal(format->check(data, size, 2, t.dims, 0, "w", 1, &err), PMPD_OK);
    for (r = 0; r < rows; r++) {
        double largest = 0;
        format->row(&t, r, wide_row);
        for (c = 0; c < cols; c++)
            if (fabs(w[r * cols + c]) > largest) /* not fmax: gcc 12's aarch64 vectorizer crashed on it */
                largest = fabs(w[r * cols + c]);
        /* The two decode paths sum the rotation in other orders. */
        for (c = 0; c < cols; c++)
            if (fabs(wide_row[c] - w[r * cols + c]) > 1e-4 * largest)
                fail_msg("%s row %zu col %zu at %zu columns: %g, stored as %zu: %g", format->name, r, c, cols,
                         (double)wide_row[c], wide, (double)w[r * cols + c]);
    }
    assert_int_equal(format->scratch_bytes(&t, 1, 1, &scratch_bytes), PMPD_OK);
    scratch = malloc(scratch_bytes);
    assert_non_null(scratch);
    for (c = 0; c < cols; c++)
        x[c] = (float)sin(0.37 * (double)c + 1.0);
    format->prepare(&t, x, 1, scratch, 0, 1, 0);
    format->rows(&t, scratch, x, 1, y, 0, rows, 0);
    for (r = 0; r < rows; r++) {
        double exact = 0, wn = 0, xn = 0;
        for (c = 0; c < cols; c++) {
            exact += (double)w[r * cols + c] * x[c];
            wn += (double)w[r * cols + c] * w[r * cols + c];
            xn += (double)x[c] * x[c];
        }
        if (fabs(y[r] - exact) > 0.01 * sqrt(wn * xn))
            fail_msg("%s row %zu at %zu columns stored as %zu: product %g, dense %g", format->name, r, cols, wide,
                     (double)y[r], exact);
    }
    free(scratch);
    free(data);
    free(wide_row);
    free(w);
    free(x);
    free(y);
}

double test_rotated_error(uint32_t type, const float *values, size_t rows, size_t cols, const unsigned char *data,
                          size_t size)
{
    const pmpd_weight_format *format = pmpd_weight_format_of(type);
    pmpd_tensor t;
    float *w = (float *)malloc(cols * sizeof *w);
    double error = 0, energy = 0;
    size_t r, c;
    assert_non_null(format);
    assert_non_null(w);
    t = test_rotated_tensor(type, rows, cols, data, size);
    for (r = 0; r < rows; r++) {
        format->row(&t, r, w);
        for (c = 0; c < cols; c++) {
            double d = (double)values[r * cols + c] - w[c];
            error += d * d;
            energy += (double)values[r * cols + c] * values[r * cols + c];
        }
    }
    free(w);
    return energy > 0 ? error / energy : 0.0;
}
