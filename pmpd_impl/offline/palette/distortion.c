#include "pmpd_impl/offline/palette/distortion.h"

#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/core/hadamard.h"
#include "pmpd_impl/offline/synth/synth.h"
#include "pmpd_impl/offline/weights/encoders.h"
#include "pmpd_impl/weights/format.h"

/* The formats whose size the converter knows from the shape (and nuq's,
 * vq's or tcq's width): not nested weights, whose size depends on two
 * widths, nor W8A8, which needs activation ranges. */
static int palette_sized(uint32_t type)
{
    return type == PMPD_TENSOR_NUQ || type == PMPD_TENSOR_VQ2 || type == PMPD_TENSOR_TCQ ||
           (pmpd_weight_format_of(type) && pmpd_weight_format_of(type)->tensor_bytes && type != PMPD_TENSOR_W8A8);
}

PMPD_INTERNAL pmpd_status pmpd_palette_group_bytes(const pmpd_build_model *b, const pmpd_palette_group *g,
                                                   uint32_t type, const pmpd_convert_options *options,
                                                   uint64_t *bytes)
{
    uint32_t i;
    *bytes = 0;
    if (!palette_sized(type))
        return PMPD_ERR_INVALID_ARGUMENT;
    for (i = 0; i < g->n_tensors; i++) {
        const pmpd_build_tensor *t = &b->tensors[g->tensors[i]];
        uint64_t one;
        pmpd_status st = pmpd_weight_stream_bytes(options, type, 2, t->dims, &one);
        if (st != PMPD_OK)
            return st;
        if (*bytes > UINT64_MAX - one)
            return PMPD_ERR_OVERFLOW;
        *bytes += one;
    }
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_palette_encode(const pmpd_build_tensor *t, uint32_t type,
                                              const pmpd_convert_options *options, const pmpd_ldlq *ldlq,
                                              void **block, pmpd_tensor *tensor)
{
    const float *w = (const float *)(const void *)t->data;
    uint64_t rows = t->dims[0], cols = t->dims[1], bytes;
    unsigned char *data;
    pmpd_status st;
    *block = NULL;
    if (!pmpd_weight_format_of(type) || !w || t->n_dims != 2 || !palette_sized(type))
        return PMPD_ERR_INVALID_ARGUMENT;
    st = pmpd_weight_stream_bytes(options, type, 2, t->dims, &bytes);
    if (st != PMPD_OK)
        return st;
    if (bytes > SIZE_MAX - 64 || cols > SIZE_MAX / sizeof(float))
        return PMPD_ERR_OVERFLOW;
    *block = malloc((size_t)bytes + 64);
    if (!*block)
        return PMPD_ERR_OUT_OF_MEMORY;
    data = (unsigned char *)*block + (64 - (uintptr_t)*block % 64) % 64;
    if (type == PMPD_TENSOR_F32)
        memcpy(data, w, (size_t)bytes);
    else
        st = pmpd_weight_encode_matrix(options, type, ldlq, w, rows, cols, data, (size_t)bytes);
    memset(tensor, 0, sizeof *tensor);
    tensor->name = t->name;
    tensor->name_length = (uint32_t)strlen(t->name);
    tensor->type = type;
    tensor->n_dims = 2;
    tensor->dims[0] = rows;
    tensor->dims[1] = cols;
    tensor->data = data;
    tensor->size = bytes;
    if (st != PMPD_OK) {
        free(*block);
        *block = NULL;
    }
    return st;
}

PMPD_INTERNAL int pmpd_palette_rotated(uint32_t type)
{
    return type == PMPD_TENSOR_NUQ || type == PMPD_TENSOR_VQ2 || type == PMPD_TENSOR_TCQ;
}

/* The rotated formats (nuq, vq, tcq) store each row as its Hadamard
 * rotation of size pmpd_hadamard_size(cols), zeros beyond cols before the
 * transform.  Their row lookup has only cols floats to write into (the
 * runtime's embedding lookup), so when cols is below that size it rotates
 * back by an O(cols x rotation) sum: for a 2048 x 5632 ffn_down about 25
 * minutes a matrix.  Every layout is a function of the rotation size
 * alone (weights/rotated/rotated.h), so the same bytes read as a matrix of
 * rotation columns decode through the fast transform, and the first cols
 * entries are the row: the same numbers up to float rounding (the
 * lookup sums each entry in double; on stories260K the errors agree to
 * 1e-6 relative and the allocation's bytes are identical). */
static size_t palette_decode_width(uint32_t type, size_t cols)
{
    if (!pmpd_palette_rotated(type))
        return cols;
    return pmpd_hadamard_size(cols) > cols ? pmpd_hadamard_size(cols) : cols;
}

/* e H e^T for one row's error e (n floats), H symmetric [n][n]. */
static double palette_weighted(const double *h, const double *e, size_t n)
{
    double sum = 0.0;
    size_t i, j;
    for (i = 0; i < n; i++) {
        double he = 0.0;
        for (j = 0; j < n; j++)
            he += h[i * n + j] * e[j];
        sum += e[i] * he;
    }
    return sum;
}

/* Squared error and squared norm of one matrix under type, decoded a row
 * at a time.  With hessians: encoded with the input's LDLQ factor (the
 * rotated formats), and the error is the energy of isotropic noise whose
 * output error energy equals this one's: e H e^T summed over rows, times
 * cols / tr(H) (noise of energy E gives E tr(H) / cols). */
static pmpd_status palette_matrix_error(const pmpd_build_tensor *t, uint32_t type,
                                        const pmpd_convert_options *options, const pmpd_hessian_set *hessians,
                                        double *error, double *norm)
{
    const float *w = (const float *)(const void *)t->data;
    size_t rows = (size_t)t->dims[0], cols = (size_t)t->dims[1], r, c;
    const double *h = pmpd_hessian_find(hessians, t->name, cols);
    const size_t ldlq_block = pmpd_weight_ldlq_block(type);
    const pmpd_ldlq *ldlq = ldlq_block ? pmpd_hessian_factor(hessians, t->name, cols, ldlq_block) : NULL;
    double trace = 0.0, *e = NULL;
    void *block;
    float *row;
    pmpd_tensor tensor;
    pmpd_status st = pmpd_palette_encode(t, type, options, ldlq, &block, &tensor);
    if (st != PMPD_OK)
        return st;
    tensor.dims[1] = palette_decode_width(type, cols);
    row = (float *)malloc((size_t)tensor.dims[1] * sizeof *row);
    if (h) {
        e = (double *)malloc(cols * sizeof *e);
        for (c = 0; c < cols; c++)
            trace += h[c * cols + c];
    }
    if (!row || (h && !e)) {
        free(block);
        free(row);
        free(e);
        return PMPD_ERR_OUT_OF_MEMORY;
    }
    *error = *norm = 0.0;
    for (r = 0; r < rows; r++) {
        pmpd_weight_format_of(type)->row(&tensor, r, row);
        for (c = 0; c < cols; c++) {
            double x = w[r * cols + c], d = x - row[c];
            if (e)
                e[c] = d;
            else
                *error += d * d;
            *norm += x * x;
        }
        if (e)
            *error += palette_weighted(h, e, cols);
    }
    if (e)
        *error = trace > 0.0 ? *error * (double)cols / trace : 0.0;
    free(block);
    free(row);
    free(e);
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_palette_group_error(const pmpd_build_model *b, const pmpd_palette_group *g,
                                                   uint32_t type, const pmpd_convert_options *options,
                                                   const pmpd_hessian_set *hessians, double *err)
{
    double error = 0.0, norm = 0.0;
    uint32_t i;
    *err = 0.0;
    for (i = 0; i < g->n_tensors; i++) {
        double e, n;
        pmpd_status st = palette_matrix_error(&b->tensors[g->tensors[i]], type, options, hessians, &e, &n);
        if (st != PMPD_OK)
            return st;
        error += e;
        norm += n;
    }
    *err = norm > 0.0 ? error / norm : 0.0;
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_palette_gaussian_error(uint32_t type, const pmpd_convert_options *options,
                                                      uint64_t cols, double *err)
{
    pmpd_build_tensor t;
    uint64_t state = pmpd_synth_stream(0x6A09E667F3BCC908ull, 0), rows;
    double error = 0.0, norm = 0.0;
    pmpd_status st;
    *err = 0.0;
    if (cols == 0)
        return PMPD_ERR_INVALID_ARGUMENT;
    /* Whole rows, at least 4 of them, so a row's padding and its last
     * (short) trellis sequence weigh as they do in a model's matrix. */
    rows = (PMPD_PALETTE_GAUSSIAN_WEIGHTS + cols - 1) / cols;
    if (rows < 4)
        rows = 4;
    if (cols > SIZE_MAX / sizeof(float) / rows)
        return PMPD_ERR_INVALID_ARGUMENT;
    memset(&t, 0, sizeof t);
    memcpy(t.name, "gaussian", 9);
    t.type = PMPD_TENSOR_F32;
    t.n_dims = 2;
    t.dims[0] = rows;
    t.dims[1] = cols;
    t.size = rows * cols * sizeof(float);
    t.data = (unsigned char *)malloc((size_t)t.size);
    if (!t.data)
        return PMPD_ERR_OUT_OF_MEMORY;
    pmpd_synth_normal(&state, 1.0f, (float *)(void *)t.data, (size_t)(rows * cols));
    st = palette_matrix_error(&t, type, options, NULL, &error, &norm);
    free(t.data);
    if (st == PMPD_OK)
        *err = norm > 0.0 ? error / norm : 0.0;
    return st;
}

PMPD_INTERNAL void pmpd_palette_group_norms(const pmpd_build_model *b, const pmpd_palette_group *g,
                                            double norm[PMPD_PALETTE_GROUP_MAX_TENSORS])
{
    uint32_t i;
    for (i = 0; i < g->n_tensors; i++) {
        const pmpd_build_tensor *t = &b->tensors[g->tensors[i]];
        const float *w = (const float *)(const void *)t->data;
        uint64_t k, n = t->dims[0] * t->dims[1];
        double sum = 0.0;
        for (k = 0; w && k < n; k++)
            sum += (double)w[k] * w[k];
        norm[i] = sum;
    }
}
