#include "pmpd_impl/format/tensor_type.h"

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/kernels/qformat.h"

PMPD_INTERNAL const char *pmpd_tensor_type_name(uint32_t type)
{
    switch (type) {
    case PMPD_TENSOR_F32: return "f32";
    case PMPD_TENSOR_F16: return "f16";
    case PMPD_TENSOR_ANYPREC: return "anyprec";
    case PMPD_TENSOR_Q8: return "q8";
    case PMPD_TENSOR_Q4: return "q4";
    case PMPD_TENSOR_Q2CB: return "q2cb";
    default: return NULL;
    }
}

PMPD_INTERNAL pmpd_status pmpd_tensor_type_row_bytes(uint32_t type, uint64_t cols, uint64_t *bytes)
{
    uint64_t element;
    switch (type) {
    case PMPD_TENSOR_F32: element = 4; break;
    case PMPD_TENSOR_F16: element = 2; break;
    default: return PMPD_ERR_FORMAT_VALUE;
    }
    if (cols == 0 || !pmpd_checked_mul_u64(cols, element, bytes))
        return PMPD_ERR_FORMAT_SHAPE;
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_tensor_type_bytes(uint32_t type, uint32_t n_dims, const uint64_t *dims,
                                                 uint64_t *bytes)
{
    uint64_t rows = 1, row_bytes;
    uint32_t i;
    pmpd_status status;
    if (n_dims == 0)
        return PMPD_ERR_FORMAT_SHAPE;
    /* Group-quantized matrices interleave rows in blocks: no per-row size. */
    if (pmpd_qformat_is_quantized(type))
        return n_dims == 2 ? pmpd_qformat_tensor_bytes(type, dims[0], dims[1], bytes) : PMPD_ERR_FORMAT_SHAPE;
    for (i = 0; i + 1 < n_dims; i++)
        if (dims[i] == 0 || !pmpd_checked_mul_u64(rows, dims[i], &rows))
            return PMPD_ERR_FORMAT_SHAPE;
    status = pmpd_tensor_type_row_bytes(type, dims[n_dims - 1], &row_bytes);
    if (status != PMPD_OK)
        return status;
    if (!pmpd_checked_mul_u64(rows, row_bytes, bytes))
        return PMPD_ERR_FORMAT_SHAPE;
    return PMPD_OK;
}
