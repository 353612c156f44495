#include "pmpd_impl/offline/quant/quant.h"

#include <math.h>
#include <string.h>

#include "pmpd_impl/model/f16.h"

PMPD_INTERNAL void pmpd_quant_put_scale(unsigned char *block, size_t i, float scale)
{
    uint16_t h = pmpd_f32_to_f16(scale);
    memcpy(block + 2 * i, &h, sizeof h);
}

/* Integer levels of one group of n values (zeros past n) for q8 or q4,
 * returning the scale actually stored (f16-rounded, so dequantization and
 * quantization agree). */
static float pmpd_quant_uniform_group(uint32_t type, const float *v, size_t n, int q[PMPD_QGROUP])
{
    float extreme = 0.0f, scale, inverse;
    int lo = type == PMPD_TENSOR_Q8 ? -127 : -8, hi = type == PMPD_TENSOR_Q8 ? 127 : 7;
    size_t k;
    for (k = 0; k < n; k++)
        if (fabsf(v[k]) > fabsf(extreme))
            extreme = v[k];
    scale = type == PMPD_TENSOR_Q8 ? fabsf(extreme) / 127.0f : extreme / -8.0f;
    scale = pmpd_f16_to_f32(pmpd_f32_to_f16(scale));
    inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
    for (k = 0; k < PMPD_QGROUP; k++) {
        long value = k < n ? lrintf(v[k] * inverse) : 0;
        q[k] = value < lo ? lo : value > hi ? hi : (int)value;
    }
    return scale;
}

static void pmpd_quant_uniform_put(uint32_t type, unsigned char *body, size_t i, const int q[PMPD_QGROUP])
{
    size_t k;
    if (type == PMPD_TENSOR_Q8) {
        for (k = 0; k < PMPD_QGROUP; k++)
            body[(k / 8) * 32 + i * 8 + k % 8] = (unsigned char)(signed char)q[k];
        return;
    }
    for (k = 0; k < PMPD_QGROUP / 2; k++)
        body[(k / 8) * 32 + i * 8 + k % 8] =
            (unsigned char)(((unsigned)q[k] & 0x0Fu) | (((unsigned)q[k + 16] & 0x0Fu) << 4));
}

PMPD_INTERNAL void pmpd_quant_uniform(uint32_t type, const float *w, size_t rows, size_t cols,
                                      unsigned char *out)
{
    size_t n_groups = pmpd_qformat_groups(cols), row_blocks = (rows + PMPD_QROWS - 1) / PMPD_QROWS;
    size_t block_bytes = pmpd_qformat_block_bytes(type), rb, g, i;
    memset(out, 0, row_blocks * n_groups * block_bytes);
    for (rb = 0; rb < row_blocks; rb++) {
        for (g = 0; g < n_groups; g++) {
            unsigned char *block = out + (rb * n_groups + g) * block_bytes;
            size_t n = cols - g * PMPD_QGROUP < PMPD_QGROUP ? cols - g * PMPD_QGROUP : PMPD_QGROUP;
            for (i = 0; i < PMPD_QROWS && rb * PMPD_QROWS + i < rows; i++) {
                int q[PMPD_QGROUP];
                float scale = pmpd_quant_uniform_group(type, w + (rb * PMPD_QROWS + i) * cols + g * PMPD_QGROUP,
                                                       n, q);
                pmpd_quant_put_scale(block, i, scale);
                pmpd_quant_uniform_put(type, block + 2 * PMPD_QROWS, i, q);
            }
        }
    }
}
