/* Unloaded tensors: a GGUF import records where each tensor's blocks are
 * in the input file instead of decoding them all, so converting a model
 * needs the floats of a few rows at a time, not of the whole model (a 1.1B
 * model is 4.4 GB of floats).  Reading goes through stdio (fseek, then
 * fread of one row at a time): no mapping whose touched pages would count
 * against the machine, and it works where mmap cannot map the file. */
#include "pmpd_impl/offline/format/builder.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/core/error.h"
#include "pmpd_impl/weights/format.h"

PMPD_INTERNAL pmpd_status pmpd_build_add_unloaded(pmpd_build_model *b, const char *name, uint32_t n_dims,
                                                  const uint64_t *dims, const pmpd_ggml_type_info *source_type,
                                                  uint64_t source_offset)
{
    /* Added as a one-element tensor so the builder checks name and shape
     * rules once, in one place; then given its real shape, unloaded. */
    static const uint64_t one[1] = {1};
    static const unsigned char zero[4] = {0, 0, 0, 0};
    pmpd_build_tensor *t;
    uint64_t bytes;
    uint32_t d;
    pmpd_status status;
    if (n_dims == 0 || n_dims > PMPD_TENSOR_MAX_DIMS ||
        pmpd_weight_tensor_bytes(PMPD_TENSOR_F32, n_dims, dims, &bytes) != PMPD_OK)
        return PMPD_ERR_INVALID_ARGUMENT;
    status = pmpd_build_add_tensor(b, name, PMPD_TENSOR_F32, 1, one, zero, 4);
    if (status != PMPD_OK)
        return status;
    t = &b->tensors[b->n_tensors - 1];
    free(t->data);
    t->data = NULL;
    t->n_dims = n_dims;
    for (d = 0; d < n_dims; d++)
        t->dims[d] = dims[d];
    t->size = bytes;
    t->source_type = source_type;
    t->source_offset = source_offset;
    return PMPD_OK;
}

/* Elements per row: the innermost dimension (ggml blocks never straddle it). */
static uint64_t unloaded_row_elements(const pmpd_build_tensor *t)
{
    return t->dims[t->n_dims - 1];
}

PMPD_INTERNAL pmpd_status pmpd_build_tensor_floats(const pmpd_build_model *b, const pmpd_build_tensor *t,
                                                   uint64_t first_row, uint64_t n_rows, float *out, pmpd_error *err)
{
    const pmpd_ggml_type_info *g = t->source_type;
    uint64_t row = unloaded_row_elements(t), r, k, row_bytes, at;
    unsigned char *raw;
    if (t->type != PMPD_TENSOR_F32)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET, "tensor %s is not f32", t->name);
    if (t->data) {
        /* Builder data are little-endian floats, the host order pmpd supports. */
        memcpy(out, t->data + first_row * row * 4, (size_t)(n_rows * row * 4));
        return PMPD_OK;
    }
    row_bytes = row / g->block_elements * g->block_bytes;
    at = t->source_offset + first_row * row_bytes;
    if (!b->source || at > (uint64_t)LONG_MAX)
        return pmpd_error_set(err, PMPD_ERR_OVERFLOW, at, "tensor %s: offset %llu is past what fseek reaches here",
                              t->name, (unsigned long long)at);
    raw = (unsigned char *)malloc((size_t)row_bytes);
    if (!raw)
        return pmpd_error_set(err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory");
    if (fseek(b->source, (long)at, SEEK_SET) != 0) {
        free(raw);
        return pmpd_error_set(err, PMPD_ERR_IO, at, "cannot seek to tensor %s", t->name);
    }
    for (r = 0; r < n_rows; r++) {
        if (fread(raw, 1, (size_t)row_bytes, b->source) != row_bytes) {
            free(raw);
            return pmpd_error_set(err, PMPD_ERR_IO, at + r * row_bytes, "cannot read tensor %s (the input shrank?)",
                                  t->name);
        }
        for (k = 0; k < row / g->block_elements; k++)
            g->decode(raw + k * g->block_bytes, out + r * row + k * g->block_elements);
    }
    free(raw);
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_build_same_values(const pmpd_build_model *b, const pmpd_build_tensor *x,
                                                 const pmpd_build_tensor *y, int *same, pmpd_error *err)
{
    uint64_t row, rows, r;
    float *a, *c;
    pmpd_status status = PMPD_OK;
    *same = 0;
    if (x->type != PMPD_TENSOR_F32 || y->type != PMPD_TENSOR_F32 || x->size != y->size || x->n_dims != y->n_dims ||
        memcmp(x->dims, y->dims, sizeof x->dims) != 0)
        return PMPD_OK;
    if (x->data && y->data) {
        *same = memcmp(x->data, y->data, (size_t)x->size) == 0;
        return PMPD_OK;
    }
    row = unloaded_row_elements(x);
    rows = x->size / 4 / row;
    a = (float *)malloc((size_t)row * 4);
    c = (float *)malloc((size_t)row * 4);
    if (!a || !c)
        status = pmpd_error_set(err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory");
    for (*same = 1, r = 0; status == PMPD_OK && r < rows && *same; r++) {
        status = pmpd_build_tensor_floats(b, x, r, 1, a, err);
        if (status == PMPD_OK)
            status = pmpd_build_tensor_floats(b, y, r, 1, c, err);
        *same = memcmp(a, c, (size_t)row * 4) == 0; /* bits, as the loaded comparison */
    }
    free(a);
    free(c);
    return status;
}
