/* Activations for the compiled W8A8 kernel: the same rounding everywhere
 * (pmpd_w8a8_quantize_one), stored as that kernel's multiply reads it
 * (w8a8.h).  This is O(tokens x cols) against the product's O(tokens x
 * cols x rows): plain C is enough. */
#include "pmpd_impl/weights/w8a8/w8a8.h"

PMPD_INTERNAL void pmpd_w8a8_act_quantize(const pmpd_w8a8_matrix *m, const float *x, size_t begin, size_t end,
                                          void *act)
{
    float inverse = 1.0f / m->activation_scale;
    size_t t, c;
    for (t = begin; t < end; t++) {
        const float *xt = x + t * m->cols;
        size_t base = t * m->padded_cols;
        for (c = 0; c < m->padded_cols; c++) {
            int q = c < m->cols ? pmpd_w8a8_quantize_one(xt[c], inverse) : 0;
#if PMPD_USE_AVX512
            ((uint8_t *)act)[base + c] = (uint8_t)(q + 128);
#elif PMPD_USE_AVX2
            ((int16_t *)act)[base + c] = (int16_t)q;
#else
            ((int8_t *)act)[base + c] = (int8_t)q;
#endif
        }
    }
}
