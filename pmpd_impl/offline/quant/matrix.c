#include "pmpd_impl/offline/quant/quant.h"

PMPD_INTERNAL pmpd_status pmpd_quant_matrix(uint32_t type, const float *w, size_t rows, size_t cols,
                                            unsigned threads, void *out, size_t out_size)
{
    uint64_t needed;
    if (!w || !out || !pmpd_qformat_is_quantized(type) ||
        pmpd_qformat_tensor_bytes(type, rows, cols, &needed) != PMPD_OK || needed > out_size)
        return PMPD_ERR_INVALID_ARGUMENT;
    if (type == PMPD_TENSOR_Q2CB)
        return pmpd_quant_q2cb(w, rows, cols, threads, (unsigned char *)out);
    pmpd_quant_uniform(type, w, rows, cols, (unsigned char *)out);
    return PMPD_OK;
}
