#include "pmpd_impl/offline/quant/build.h"

#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/offline/quant/quant.h"

static int pmpd_quant_build_wanted(const pmpd_build_tensor *t)
{
    return t->n_dims == 2 && t->type == PMPD_TENSOR_F32;
}

PMPD_INTERNAL int pmpd_quant_build_is_vocabulary(const pmpd_build_tensor *t)
{
    return strcmp(t->name, "token_embd.weight") == 0 || strcmp(t->name, "output.weight") == 0;
}

/* Every 2-D f32 tensor to type, the vocabulary's to vocabulary_type. */
static pmpd_status pmpd_quant_build_convert_as(pmpd_build_model *b, uint32_t type, uint32_t vocabulary_type,
                                               unsigned threads, void (*progress)(void *context, uint64_t done, uint64_t total),
                                               void *context)
{
    uint64_t total = 0, done = 0, bytes;
    uint32_t i;
    if (!pmpd_qformat_is_quantized(type) || !pmpd_qformat_is_quantized(vocabulary_type))
        return PMPD_ERR_INVALID_ARGUMENT;
    for (i = 0; i < b->n_tensors; i++)
        total += pmpd_quant_build_wanted(&b->tensors[i]);
    for (i = 0; i < b->n_tensors; i++) {
        pmpd_build_tensor *t = &b->tensors[i];
        uint32_t target = pmpd_quant_build_is_vocabulary(t) ? vocabulary_type : type;
        unsigned char *out;
        pmpd_status status;
        if (!pmpd_quant_build_wanted(t))
            continue;
        if (pmpd_qformat_tensor_bytes(target, t->dims[0], t->dims[1], &bytes) != PMPD_OK || bytes > SIZE_MAX ||
            t->dims[0] > SIZE_MAX || t->dims[1] > SIZE_MAX)
            return PMPD_ERR_OVERFLOW;
        out = (unsigned char *)malloc((size_t)bytes);
        if (!out)
            return PMPD_ERR_OUT_OF_MEMORY;
        /* Builder data are little-endian floats, the host order pmpd supports. */
        status = pmpd_quant_matrix(target, (const float *)(const void *)t->data, (size_t)t->dims[0],
                                   (size_t)t->dims[1], threads, out, (size_t)bytes);
        if (status != PMPD_OK) {
            free(out);
            return status;
        }
        pmpd_build_replace_data(t, target, out, bytes);
        if (progress)
            progress(context, ++done, total);
    }
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_quant_build_convert(pmpd_build_model *b, uint32_t type, unsigned threads,
                                                   void (*progress)(void *context, uint64_t done, uint64_t total),
                                                   void *context)
{
    return pmpd_quant_build_convert_as(b, type, PMPD_TENSOR_Q8, threads, progress, context);
}

PMPD_INTERNAL pmpd_status pmpd_quant_build_convert_vocabulary(pmpd_build_model *b, uint32_t type)
{
    /* q8 and q4 quantize on the calling thread whatever threads says. */
    return pmpd_quant_build_convert_as(b, PMPD_TENSOR_Q8, type, 1, NULL, NULL);
}
