/* Sylvester butterflies with AVX2: the three smallest strides (1, 2, 4)
 * inside each 8-float register, as a lane permute plus a multiply-add by
 * +-1 (exact: a * 1 + b is a + b, a * -1 + b is b - a, so the result is the
 * scalar oracle's bit for bit), then strides of 8 and up as plain vector
 * adds and subtracts.  Below 8 floats the scalar butterflies run. */
#include "pmpd_impl/core/hadamard.h"

#if PMPD_USE_AVX2
#include <immintrin.h>

PMPD_INTERNAL void pmpd_hadamard_pow2(float *x, size_t p)
{
    const __m256 sign1 = _mm256_setr_ps(1, -1, 1, -1, 1, -1, 1, -1);
    const __m256 sign2 = _mm256_setr_ps(1, 1, -1, -1, 1, 1, -1, -1);
    const __m256 sign4 = _mm256_setr_ps(1, 1, 1, 1, -1, -1, -1, -1);
    size_t h, i, j;
    if (p < 8) {
        pmpd_hadamard_pow2_scalar(x, p);
        return;
    }
    for (i = 0; i < p; i += 8) {
        __m256 a = _mm256_loadu_ps(x + i);
        /* Lane j holds x[j] op x[j ^ h]: + for the lower of the pair. */
        a = _mm256_fmadd_ps(a, sign1, _mm256_permute_ps(a, 0xB1));
        a = _mm256_fmadd_ps(a, sign2, _mm256_permute_ps(a, 0x4E));
        a = _mm256_fmadd_ps(a, sign4, _mm256_permute2f128_ps(a, a, 0x01));
        _mm256_storeu_ps(x + i, a);
    }
    for (h = 8; h < p; h *= 2)
        for (i = 0; i < p; i += 2 * h)
            for (j = i; j < i + h; j += 8) {
                __m256 a = _mm256_loadu_ps(x + j), b = _mm256_loadu_ps(x + j + h);
                _mm256_storeu_ps(x + j, _mm256_add_ps(a, b));
                _mm256_storeu_ps(x + j + h, _mm256_sub_ps(a, b));
            }
}
#endif
