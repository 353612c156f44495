#include "pmpd_impl/weights/grouped/qformat.h"

#include <string.h>

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/weights/grouped/scalar/qweight.h"

PMPD_INTERNAL int pmpd_qformat_is_quantized(uint32_t type)
{
    return type == PMPD_TENSOR_Q8 || type == PMPD_TENSOR_Q4 || type == PMPD_TENSOR_Q2CB;
}

PMPD_INTERNAL pmpd_status pmpd_qformat_tensor_bytes(uint32_t type, uint64_t rows, uint64_t cols,
                                                    uint64_t *bytes)
{
    uint64_t row_blocks, groups, blocks, body;
    if (!pmpd_qformat_is_quantized(type))
        return PMPD_ERR_FORMAT_VALUE;
    if (rows == 0 || cols == 0)
        return PMPD_ERR_FORMAT_SHAPE;
    row_blocks = rows / PMPD_QROWS + (rows % PMPD_QROWS != 0);
    groups = cols / PMPD_QGROUP + (cols % PMPD_QGROUP != 0);
    if (!pmpd_checked_mul_u64(row_blocks, groups, &blocks) ||
        !pmpd_checked_mul_u64(blocks, pmpd_qformat_block_bytes(type), &body) ||
        !pmpd_checked_add_u64(body, pmpd_qformat_header_bytes(type), bytes))
        return PMPD_ERR_FORMAT_SHAPE;
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_qformat_validate(uint32_t type, const unsigned char *data, uint64_t *bad_byte)
{
    size_t i;
    if (type != PMPD_TENSOR_Q2CB)
        return PMPD_OK;
    for (i = 0; i < PMPD_Q2CB_HEADER_BYTES; i++) {
        int level = (signed char)data[i];
        if (level < -PMPD_Q2CB_LEVEL_LIMIT || level > PMPD_Q2CB_LEVEL_LIMIT) {
            *bad_byte = i;
            return PMPD_ERR_FORMAT_VALUE;
        }
    }
    return PMPD_OK;
}

PMPD_INTERNAL void pmpd_qformat_dequantize_row(const pmpd_qmatrix *w, size_t r, float *out)
{
    size_t k;
    for (k = 0; k < w->cols; k++) {
        const unsigned char *block = pmpd_qformat_block(w, r / PMPD_QROWS, k / PMPD_QGROUP);
        out[k] = pmpd_qweight_scale(block, r % PMPD_QROWS) *
                 (float)pmpd_qweight_int(w, block, r % PMPD_QROWS, k % PMPD_QGROUP);
    }
}

PMPD_INTERNAL void pmpd_q2cb_codebook_pairs(const pmpd_qmatrix *w, int bias, uint64_t pairs[256])
{
    unsigned char pair[2 * PMPD_Q2CB_LEVELS];
    unsigned i, j;
    for (i = 0; i < 256; i++) {
        for (j = 0; j < PMPD_Q2CB_LEVELS; j++) {
            pair[j] = (unsigned char)((signed char)w->data[(i & 15u) * PMPD_Q2CB_LEVELS + j] + bias);
            pair[PMPD_Q2CB_LEVELS + j] = (unsigned char)((signed char)w->data[(i >> 4) * PMPD_Q2CB_LEVELS + j] + bias);
        }
        memcpy(&pairs[i], pair, sizeof pair);
    }
}
