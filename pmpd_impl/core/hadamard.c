/* Hadamard transforms (hadamard.h): sizes, the small Paley matrices, the
 * scalar butterflies, and the mixing of the m rows shared by every ISA. */
#include "pmpd_impl/core/hadamard.h"

#include <math.h>
#include <string.h>

/* Rows of H_12, H_20, H_44 (Paley I: I + S with S the skew conference
 * matrix of the quadratic residues mod 11, 19, 43) and H_28 (Paley II from
 * the residues mod 13), bit j set where entry j is -1; orthogonality is
 * checked by tests/test_hadamard.c. */
static const uint32_t pmpd_hadamard_12[12] = {0x000, 0xb89, 0x713, 0xe25, 0xc4b, 0x897,
                                              0x12f, 0x25d, 0x4b9, 0x971, 0x2e3, 0x5c5};
static const uint32_t pmpd_hadamard_20[20] = {0x00000, 0x9ea19, 0x3d433, 0x7a865, 0xf50c9, 0xea193, 0xd4327,
                                              0xa864f, 0x50c9f, 0xa193d, 0x4327b, 0x864f5, 0x0c9eb, 0x193d5,
                                              0x327a9, 0x64f51, 0xc9ea1, 0x93d43, 0x27a87, 0x4f50d};
static const uint32_t pmpd_hadamard_28[28] = {
    0x0000002, 0xaaaaaab, 0x30ff0c8, 0x9a55a6e, 0xc3fc320, 0x69569ba, 0x0ff0c8c, 0xa55a6e6, 0x3fc3230, 0x9569b9a,
    0xff0c8c0, 0x55a6e6a, 0xfc3230c, 0x569b9a6, 0xf0c8c3c, 0x5a6e696, 0xc3230fc, 0x69b9a56, 0x0c8c3fc, 0xa6e6956,
    0x3230ff0, 0x9b9a55a, 0xc8c3fc0, 0x6e6956a, 0x230ff0c, 0xb9a55a6, 0x8c3fc30, 0xe69569a};
static const uint64_t pmpd_hadamard_44[44] = {
    0x00000000000, 0x94ef8b82359, 0x29df17046b3, 0x53be2e08d65, 0xa77c5c11ac9, 0x4ef8b823593, 0x9df17046b25,
    0x3be2e08d64b, 0x77c5c11ac95, 0xef8b8235929, 0xdf17046b253, 0xbe2e08d64a7, 0x7c5c11ac94f, 0xf8b8235929d,
    0xf17046b253b, 0xe2e08d64a77, 0xc5c11ac94ef, 0x8b8235929df, 0x17046b253bf, 0x2e08d64a77d, 0x5c11ac94ef9,
    0xb8235929df1, 0x7046b253be3, 0xe08d64a77c5, 0xc11ac94ef8b, 0x8235929df17, 0x046b253be2f, 0x08d64a77c5d,
    0x11ac94ef8b9, 0x235929df171, 0x46b253be2e1, 0x8d64a77c5c1, 0x1ac94ef8b83, 0x35929df1705, 0x6b253be2e09,
    0xd64a77c5c11, 0xac94ef8b823, 0x5929df17047, 0xb253be2e08d, 0x64a77c5c11b, 0xc94ef8b8235, 0x929df17046b,
    0x253be2e08d7, 0x4a77c5c11ad};

/* Columns of the m x 2^k matrix mixed per pass: m x this many floats on
 * the stack (5.5 KiB at m = 44, beside the m rows' signs: their bits, and
 * with AVX2 m x m floats, 7.6 KiB more). */
#define HADAMARD_MIX_CHUNK 32
#define HADAMARD_MIX_MAX_ORDER 44

PMPD_INTERNAL unsigned pmpd_hadamard_order(size_t n)
{
    static const unsigned orders[5] = {1, 12, 20, 28, 44};
    unsigned i;
    if (n == 0 || n > PMPD_HADAMARD_MAX)
        return 0;
    for (i = 0; i < 5; i++) {
        size_t p = n / orders[i];
        if (n % orders[i] == 0 && (p & (p - 1)) == 0)
            return orders[i];
    }
    return 0;
}

PMPD_INTERNAL size_t pmpd_hadamard_size(size_t cols)
{
    size_t n;
    if (cols == 0 || cols > PMPD_HADAMARD_MAX)
        return 0;
    for (n = cols; !pmpd_hadamard_order(n); n++)
        ;
    return n;
}

PMPD_INTERNAL uint64_t pmpd_hadamard_small_row(unsigned m, unsigned i)
{
    return m == 12   ? pmpd_hadamard_12[i]
           : m == 20 ? pmpd_hadamard_20[i]
           : m == 28 ? pmpd_hadamard_28[i]
           : m == 44 ? pmpd_hadamard_44[i]
                     : 0;
}

PMPD_INTERNAL void pmpd_hadamard_pow2_scalar(float *x, size_t p)
{
    size_t h, i, j;
    for (h = 1; h < p; h *= 2)
        for (i = 0; i < p; i += 2 * h)
            for (j = i; j < i + h; j++) {
                float a = x[j], b = x[j + h];
                x[j] = a + b;
                x[j + h] = a - b;
            }
}

/* Row i of the mix for one chunk of columns: out[j] = scale * sum over l
 * in order of +-in[l][j], the signs the bits of negatives.  Called with
 * width a constant for full chunks, so that the compiler vectorizes the
 * loops across columns (each column's sum keeps its order); while they
 * ran scalar the mix took 30 of a 5,632-wide token's 35 us of rotation and
 * quantization on Zen5.  The sign is a factor of +-1, not a branch (a
 * product with +-1 is exact, so the sums are the same): a branch per
 * (row, input row), as random as the matrix, and each row's signs rebuilt
 * per chunk held the 44-point transform of 5,632 floats at 39 us on Zen5
 * (6.8 us now). */
static inline void hadamard_mix_row(float *out, float (*in)[HADAMARD_MIX_CHUNK], uint64_t negatives,
                                    unsigned m, float scale, size_t width)
{
    float sum[HADAMARD_MIX_CHUNK];
    size_t j;
    unsigned l;
    for (j = 0; j < width; j++)
        sum[j] = negatives & 1 ? -in[0][j] : in[0][j];
    for (l = 1; l < m; l++) {
        const float sign = negatives >> l & 1 ? -1.0f : 1.0f;
        for (j = 0; j < width; j++)
            sum[j] += sign * in[l][j];
    }
    for (j = 0; j < width; j++)
        out[j] = sum[j] * scale;
}

#if PMPD_USE_AVX2
/* Four entries of +-1 from four sign bits (bit k set: entry k is -1). */
static const float hadamard_signs4[16][4] = {
    {1, 1, 1, 1},   {-1, 1, 1, 1},   {1, -1, 1, 1},   {-1, -1, 1, 1},   {1, 1, -1, 1},   {-1, 1, -1, 1},
    {1, -1, -1, 1}, {-1, -1, -1, 1}, {1, 1, 1, -1},   {-1, 1, 1, -1},   {1, -1, 1, -1},  {-1, -1, 1, -1},
    {1, 1, -1, -1}, {-1, 1, -1, -1}, {1, -1, -1, -1}, {-1, -1, -1, -1},
};
#endif

/* Entry (i, j) of the m x p matrix x becomes sum_l H_m[i][l] x[l][j]
 * (H_m^T with transpose), then everything is scaled by 1/sqrt(m p).  The
 * sums run over l in order, adding or subtracting, so every ISA's result
 * is this one. */
static void hadamard_mix(float *x, unsigned m, size_t p, int transpose, int simd)
{
    float in[HADAMARD_MIX_MAX_ORDER][HADAMARD_MIX_CHUNK];
    uint64_t negatives[HADAMARD_MIX_MAX_ORDER];
#if PMPD_USE_AVX2
    float signs[HADAMARD_MIX_MAX_ORDER * HADAMARD_MIX_MAX_ORDER];
#endif
    float scale = (float)(1.0 / sqrt((double)m * (double)p));
    size_t j0, j, width;
    unsigned i, l;
    if (m == 1) {
        for (j = 0; j < p; j++)
            x[j] *= scale;
        return;
    }
    /* Row i of H_m (column i for H_m^T): bit l set where entry l is -1;
     * for the SIMD rows, the entries as floats, four at a time from the
     * bits (a per-entry loop cost about as much as the mix itself). */
    for (i = 0; i < m; i++) {
        if (transpose)
            for (negatives[i] = 0, l = 0; l < m; l++)
                negatives[i] |= (pmpd_hadamard_small_row(m, l) >> i & 1) << l;
        else
            negatives[i] = pmpd_hadamard_small_row(m, i);
#if PMPD_USE_AVX2
        for (l = 0; simd && l < m; l += 4)
            memcpy(signs + i * m + l, hadamard_signs4[negatives[i] >> l & 15], sizeof hadamard_signs4[0]);
#endif
    }
#if !PMPD_USE_AVX2
    (void)simd;
#endif
    for (j0 = 0; j0 < p; j0 += width) {
        width = p - j0 < HADAMARD_MIX_CHUNK ? p - j0 : HADAMARD_MIX_CHUNK;
        for (l = 0; l < m; l++)
            for (j = 0; j < width; j++)
                in[l][j] = x[l * p + j0 + j];
#if PMPD_USE_AVX2
        /* Every order past 1 is a multiple of 4. */
        if (simd && width == HADAMARD_MIX_CHUNK) {
            for (i = 0; i < m; i += 4)
                for (j = 0; j < HADAMARD_MIX_CHUNK; j += PMPD_HADAMARD_MIX4_COLUMNS)
                    pmpd_hadamard_mix4(x + i * p + j0 + j, p, &in[0][j], HADAMARD_MIX_CHUNK, signs + i * m, m, scale);
            continue;
        }
#endif
        for (i = 0; i < m; i++) {
            /* p is a power of two: a chunk is 32 columns or all p of them. */
            if (width == HADAMARD_MIX_CHUNK)
                hadamard_mix_row(x + i * p + j0, in, negatives[i], m, scale, HADAMARD_MIX_CHUNK);
            else if (width == 16)
                hadamard_mix_row(x + i * p + j0, in, negatives[i], m, scale, 16);
            else if (width == 8)
                hadamard_mix_row(x + i * p + j0, in, negatives[i], m, scale, 8);
            else if (width == 4)
                hadamard_mix_row(x + i * p + j0, in, negatives[i], m, scale, 4);
            else
                hadamard_mix_row(x + i * p + j0, in, negatives[i], m, scale, width);
        }
    }
}

/* The m power-of-two transforms by pow2, then the m-point mix. */
static void hadamard_with(float *x, size_t n, int transpose, void (*pow2)(float *, size_t), int simd)
{
    unsigned m = pmpd_hadamard_order(n), i;
    size_t p;
    if (!m)
        return;
    p = n / m;
    for (i = 0; i < m; i++)
        pow2(x + i * p, p);
    hadamard_mix(x, m, p, transpose, simd);
}

PMPD_INTERNAL void pmpd_hadamard_scalar(float *x, size_t n, int transpose)
{
    hadamard_with(x, n, transpose, pmpd_hadamard_pow2_scalar, 0);
}

PMPD_INTERNAL void pmpd_hadamard(float *x, size_t n, int transpose)
{
    hadamard_with(x, n, transpose, pmpd_hadamard_pow2, 1);
}

/* Without SIMD butterflies for the target, the scalar ones are the kernel. */
#if !PMPD_USE_AVX2 && !(PMPD_USE_NEON && defined(__aarch64__))
PMPD_INTERNAL void pmpd_hadamard_pow2(float *x, size_t p)
{
    pmpd_hadamard_pow2_scalar(x, p);
}
#endif

#undef HADAMARD_MIX_CHUNK
#undef HADAMARD_MIX_MAX_ORDER
