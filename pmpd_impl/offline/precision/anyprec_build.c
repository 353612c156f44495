/* Converts the layer matrices of a model being built to ANYPREC tensors,
 * a block of rows at a time so long conversions can report progress. */
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/offline/precision/anyprec_build.h"
#include "pmpd_impl/precision/anyprec.h"

#define ANYPREC_BUILD_ROWS_PER_STEP 64

static int anyprec_build_wanted(const pmpd_build_tensor *t)
{
    return t->n_dims == 2 && t->type == PMPD_TENSOR_F32 && strcmp(t->name, "token_embd.weight") != 0 &&
           strcmp(t->name, "output.weight") != 0;
}

PMPD_INTERNAL pmpd_status pmpd_anyprec_build_convert(pmpd_build_model *b, unsigned seed_bits, unsigned parent_bits,
                                                     const pmpd_anyprec_importance *importance,
                                                     void (*progress)(void *context, uint64_t done, uint64_t total),
                                                     void *context)
{
    uint64_t total = 0, done = 0, bytes, row;
    uint32_t i;
    for (i = 0; i < b->n_tensors; i++)
        if (anyprec_build_wanted(&b->tensors[i]))
            total += b->tensors[i].dims[0];
    for (i = 0; i < b->n_tensors; i++) {
        pmpd_build_tensor *t = &b->tensors[i];
        uint64_t rows = t->dims[0], cols = t->dims[1];
        const float *weights = pmpd_anyprec_importance_find(importance, t->name, cols);
        unsigned char *out;
        float *w;
        pmpd_status status;
        if (!anyprec_build_wanted(t))
            continue;
        status = pmpd_anyprec_size(rows, cols, seed_bits, parent_bits, &bytes);
        if (status != PMPD_OK)
            return status;
        if (bytes > SIZE_MAX || t->size > SIZE_MAX)
            return PMPD_ERR_OVERFLOW;
        out = (unsigned char *)calloc((size_t)bytes, 1);
        w = (float *)malloc((size_t)t->size);
        if (!out || !w) {
            free(out);
            free(w);
            return PMPD_ERR_OUT_OF_MEMORY;
        }
        /* Builder data are little-endian floats, the host order pmpd supports. */
        memcpy(w, t->data, (size_t)t->size);
        for (row = 0; row < rows && status == PMPD_OK; row += ANYPREC_BUILD_ROWS_PER_STEP) {
            uint64_t end = rows - row < ANYPREC_BUILD_ROWS_PER_STEP ? rows : row + ANYPREC_BUILD_ROWS_PER_STEP;
            status = pmpd_anyprec_quantize(w, rows, cols, weights, seed_bits, parent_bits, row, end, out, (size_t)bytes);
            done += end - row;
            if (progress)
                progress(context, done, total);
        }
        free(w);
        if (status != PMPD_OK) {
            free(out);
            return status;
        }
        pmpd_build_replace_data(t, PMPD_TENSOR_ANYPREC, out, bytes);
    }
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_anyprec_build_add(pmpd_build_model *b, const char *name, uint64_t rows, uint64_t cols,
                                                 const void *bytes, uint64_t size)
{
    const uint64_t placeholder_dims[2] = {1, 1};
    const float placeholder = 0.0f;
    pmpd_anyprec_matrix m;
    pmpd_build_tensor *t;
    unsigned char *copy;
    pmpd_status status = pmpd_anyprec_view(bytes, size, rows, cols, 0, &m, NULL);
    if (status != PMPD_OK)
        return status;
    if (size > SIZE_MAX)
        return PMPD_ERR_OVERFLOW;
    copy = (unsigned char *)malloc((size_t)size);
    if (!copy)
        return PMPD_ERR_OUT_OF_MEMORY;
    memcpy(copy, bytes, (size_t)size);
    /* The builder sizes tensors by type and shape, which ANYPREC's header
     * overrides: enter a placeholder, then give it the real bytes (as the
     * conversion above does in place). */
    status = pmpd_build_add_f32(b, name, 2, placeholder_dims, &placeholder);
    if (status != PMPD_OK) {
        free(copy);
        return status;
    }
    t = &b->tensors[b->n_tensors - 1];
    free(t->data);
    t->data = copy;
    t->size = size;
    t->type = PMPD_TENSOR_ANYPREC;
    t->dims[0] = rows;
    t->dims[1] = cols;
    return PMPD_OK;
}

#undef ANYPREC_BUILD_ROWS_PER_STEP
