/* Activations for the compiled W8A8 kernel: the same rounding everywhere
 * (pmpd_w8a8_quantize_one), stored as that kernel's multiply reads it
 * (w8a8.h).  This is O(tokens x cols) against the product's O(tokens x
 * cols x rows): plain C is enough. */
#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/weights/w8a8/w8a8.h"

PMPD_INTERNAL pmpd_status pmpd_w8a8_act_size(size_t n_tokens, size_t padded_cols, size_t *bytes)
{
    size_t groups = n_tokens / PMPD_W8A8_TOKEN_GROUP + (n_tokens % PMPD_W8A8_TOKEN_GROUP != 0);
    return pmpd_checked_mul3(groups * PMPD_W8A8_TOKEN_GROUP, padded_cols, PMPD_W8A8_ACT_BYTES, bytes)
               ? PMPD_OK
               : PMPD_ERR_OVERFLOW;
}

PMPD_INTERNAL void pmpd_w8a8_act_quantize(const pmpd_w8a8_matrix *m, const float *x, size_t begin, size_t end,
                                          void *act)
{
    float inverse = 1.0f / m->activation_scale;
    size_t t, c;
    for (t = begin; t < end; t++) {
        const float *xt = x + t * m->cols;
        for (c = 0; c < m->padded_cols; c++) {
            int q = c < m->cols ? pmpd_w8a8_quantize_one(xt[c], inverse) : 0;
            size_t at = pmpd_w8a8_act_index(m, t, c);
#if PMPD_USE_AVX512 && !PMPD_USE_AMX
            ((uint8_t *)act)[at] = (uint8_t)(q + 128);
#elif PMPD_USE_AVX2 && !PMPD_USE_AVX512
            ((int16_t *)act)[at] = (int16_t)q;
#else
            ((int8_t *)act)[at] = (int8_t)q;
#endif
        }
    }
}
