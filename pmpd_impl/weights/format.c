#include "pmpd_impl/weights/format.h"

#include <string.h>

/* The table: one line per weight format. */
static const pmpd_weight_format *(*const pmpd_weight_formats[])(void) = {
    pmpd_weights_f32, pmpd_weights_f16, pmpd_weights_q8, pmpd_weights_q4, pmpd_weights_q2cb, pmpd_weights_anyprec,
    pmpd_weights_w8a8, pmpd_weights_nuq, pmpd_weights_vq2, pmpd_weights_tcq,
};

#define PMPD_WEIGHT_FORMAT_COUNT (sizeof pmpd_weight_formats / sizeof pmpd_weight_formats[0])

PMPD_INTERNAL const pmpd_weight_format *pmpd_weight_format_of(uint32_t type)
{
    size_t i;
    for (i = 0; i < PMPD_WEIGHT_FORMAT_COUNT; i++)
        if ((uint32_t)pmpd_weight_formats[i]()->type == type)
            return pmpd_weight_formats[i]();
    return NULL;
}

PMPD_INTERNAL const pmpd_weight_format *pmpd_weight_format_named(const char *name)
{
    size_t i;
    for (i = 0; name && i < PMPD_WEIGHT_FORMAT_COUNT; i++)
        if (strcmp(pmpd_weight_formats[i]()->name, name) == 0)
            return pmpd_weight_formats[i]();
    return NULL;
}

PMPD_INTERNAL pmpd_status pmpd_weight_tensor_bytes(uint32_t type, uint32_t n_dims, const uint64_t *dims,
                                                   uint64_t *bytes)
{
    const pmpd_weight_format *f = pmpd_weight_format_of(type);
    uint32_t i;
    if (!f || !f->tensor_bytes)
        return PMPD_ERR_FORMAT_VALUE;
    if (n_dims == 0 || n_dims > PMPD_TENSOR_MAX_DIMS)
        return PMPD_ERR_FORMAT_SHAPE;
    for (i = 0; i < n_dims; i++)
        if (dims[i] == 0)
            return PMPD_ERR_FORMAT_SHAPE;
    return f->tensor_bytes(n_dims, dims, bytes);
}

const char *pmpd_tensor_type_name(pmpd_tensor_type type)
{
    const pmpd_weight_format *f = pmpd_weight_format_of((uint32_t)type);
    return f ? f->name : NULL;
}

pmpd_status pmpd_tensor_type_from_name(const char *name, pmpd_tensor_type *type)
{
    const pmpd_weight_format *f = pmpd_weight_format_named(name);
    if (!f || !type)
        return PMPD_ERR_INVALID_ARGUMENT;
    *type = f->type;
    return PMPD_OK;
}

#undef PMPD_WEIGHT_FORMAT_COUNT
