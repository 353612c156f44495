/* Sylvester butterflies with NEON (AArch64): strides 1 and 2 inside each
 * 4-float register, as a lane swap plus a multiply-add by +-1 (exact, so
 * the result is the scalar oracle's bit for bit), then strides of 4 and up
 * as vector adds and subtracts.  Below 4 floats the scalar butterflies
 * run. */
#include "pmpd_impl/core/hadamard.h"

#if PMPD_USE_NEON && defined(__aarch64__) && !PMPD_USE_AVX2
#include <arm_neon.h>

PMPD_INTERNAL void pmpd_hadamard_pow2(float *x, size_t p)
{
    static const float signs[8] = {1, -1, 1, -1, 1, 1, -1, -1};
    const float32x4_t sign1 = vld1q_f32(signs), sign2 = vld1q_f32(signs + 4);
    size_t h, i, j;
    if (p < 4) {
        pmpd_hadamard_pow2_scalar(x, p);
        return;
    }
    for (i = 0; i < p; i += 4) {
        float32x4_t a = vld1q_f32(x + i);
        /* vfmaq(b, a, s) = b + a * s: lane j holds x[j ^ h] +- x[j]. */
        a = vfmaq_f32(vrev64q_f32(a), a, sign1);
        a = vfmaq_f32(vextq_f32(a, a, 2), a, sign2);
        vst1q_f32(x + i, a);
    }
    for (h = 4; h < p; h *= 2)
        for (i = 0; i < p; i += 2 * h)
            for (j = i; j < i + h; j += 4) {
                float32x4_t a = vld1q_f32(x + j), b = vld1q_f32(x + j + h);
                vst1q_f32(x + j, vaddq_f32(a, b));
                vst1q_f32(x + j + h, vsubq_f32(a, b));
            }
}
#endif
