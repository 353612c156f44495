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

/* a and b held in registers: without this GCC folds their loads into each
 * of the four rows' multiply-adds, and the loads (with the signs'
 * broadcasts), not the adds, set the pace (1.8 -> 1.3 ns per step on Zen5
 * with 256-bit vectors). */
#if defined(__GNUC__)
#define HADAMARD_IN_REGISTERS(a, b) __asm__("" : "+v"(a), "+v"(b))
#else
#define HADAMARD_IN_REGISTERS(a, b) (void)0
#endif

/* The vectors of the four rows' sums: two of 16 floats with AVX-512, two
 * of 8 with AVX2 (PMPD_HADAMARD_MIX4_COLUMNS). */
#if PMPD_USE_AVX512
#define HADAMARD_VEC __m512
#define HADAMARD_LOAD _mm512_loadu_ps
#define HADAMARD_STORE _mm512_storeu_ps
#define HADAMARD_BROADCAST _mm512_set1_ps
#define HADAMARD_MUL _mm512_mul_ps
#define HADAMARD_FMADD _mm512_fmadd_ps
#else
#define HADAMARD_VEC __m256
#define HADAMARD_LOAD _mm256_loadu_ps
#define HADAMARD_STORE _mm256_storeu_ps
#define HADAMARD_BROADCAST _mm256_set1_ps
#define HADAMARD_MUL _mm256_mul_ps
#define HADAMARD_FMADD _mm256_fmadd_ps
#endif
#define HADAMARD_HALF (PMPD_HADAMARD_MIX4_COLUMNS / 2)

PMPD_INTERNAL void pmpd_hadamard_mix4(float *out, size_t p, const float *in, size_t in_stride, const float *signs,
                                      unsigned m, float scale)
{
    HADAMARD_VEC acc[4][2];
    unsigned l, r;
    /* a * +-1 is exact, so the first term and each multiply-add below are
     * the scalar mix's assignment and add or subtract. */
#pragma GCC unroll 4
    for (r = 0; r < 4; r++) {
        const HADAMARD_VEC sign = HADAMARD_BROADCAST(signs[r * m]);
        acc[r][0] = HADAMARD_MUL(sign, HADAMARD_LOAD(in));
        acc[r][1] = HADAMARD_MUL(sign, HADAMARD_LOAD(in + HADAMARD_HALF));
    }
    for (l = 1; l < m; l++) {
        HADAMARD_VEC a = HADAMARD_LOAD(in + l * in_stride), b = HADAMARD_LOAD(in + l * in_stride + HADAMARD_HALF);
        HADAMARD_IN_REGISTERS(a, b);
#pragma GCC unroll 4
        for (r = 0; r < 4; r++) {
            const HADAMARD_VEC sign = HADAMARD_BROADCAST(signs[r * m + l]);
            acc[r][0] = HADAMARD_FMADD(sign, a, acc[r][0]);
            acc[r][1] = HADAMARD_FMADD(sign, b, acc[r][1]);
        }
    }
#pragma GCC unroll 4
    for (r = 0; r < 4; r++) {
        HADAMARD_STORE(out + r * p, HADAMARD_MUL(acc[r][0], HADAMARD_BROADCAST(scale)));
        HADAMARD_STORE(out + r * p + HADAMARD_HALF, HADAMARD_MUL(acc[r][1], HADAMARD_BROADCAST(scale)));
    }
}
#undef HADAMARD_IN_REGISTERS
#undef HADAMARD_VEC
#undef HADAMARD_LOAD
#undef HADAMARD_STORE
#undef HADAMARD_BROADCAST
#undef HADAMARD_MUL
#undef HADAMARD_FMADD
#undef HADAMARD_HALF
#endif
