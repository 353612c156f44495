/* Without a SIMD kernel for the target, the scalar oracle is the kernel
 * (its activations are the int8 representation, w8a8.h). */
#include "pmpd_impl/weights/w8a8/w8a8.h"

#if !PMPD_USE_AVX2 && !(PMPD_USE_NEON && defined(__aarch64__))
PMPD_INTERNAL void pmpd_w8a8_matmul(const pmpd_w8a8_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                                    size_t row_end, float *y, size_t ldy)
{
    pmpd_w8a8_matmul_scalar(m, (const int8_t *)act, n_tokens, row_begin, row_end, y, ldy);
}
#endif
