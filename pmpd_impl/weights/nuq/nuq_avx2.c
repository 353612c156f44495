/* NUQ product with AVX2 (builds without AVX-512; else nuq_avx512.c).  The
 * layout is nuq.h's, unchanged.
 *
 * A tile is 4 rows, one from each quarter of the caller's rows (4 long
 * sequential streams, rotated_simd.h), times up to 2 tokens; a step is a
 * pair of blocks (64 rotated columns), an odd last block alone.  Per
 * step a row's codes become two vectors of 32 int8 weights, w[0] and w[1],
 * in an order of the layout's making, and each token's activations are
 * loaded once per tile in the same order:
 *   4 bits: the 32 code bytes, low and high nibbles (one shift, two
 *           masks): 128-bit lane k = block b + k, w[0] columns 0-15 and
 *           w[1] columns 16-31 (the activations: two VPERM2I128);
 *   2 and 3 bits: the two 8-byte 2-bit planes side by side in both lanes,
 *           the upper lane shifted by a nibble (VPSRLVQ) and masked; each
 *           byte's nibble holds the codes of columns i, 8 + i (low lane)
 *           or 16 + i, 24 + i (upper lane), so two PSHUFB tables (level of
 *           the nibble's low pair, of its high pair) give w[0] and w[1]:
 *           qword k of lane l = block b + k, columns 16 l + 8 j + i for
 *           w[j] (the activations: VPUNPCK[LH]QDQ).
 * With the step's d vector laid out to match, the two products of a row
 * add up in int32 before one conversion and one FMA per row and token.
 *
 * The products are exact (|level|, |x| <= 127: a pair of products fits
 * VPMADDUBSW's int16).  VPMADDUBSW multiplies unsigned by signed bytes;
 * the unsigned side is shared where it can be:
 *   2 and 4 bits: |x| (per token, once per tile) times w with x's sign
 *           (VPSIGNB, one per row and vector);
 *   3 bits: the looked-up magnitude times x, negated under the code's sign
 *           bit (VPBLENDVB between x and -x, the latter per token).  The
 *           sign word's bit 4 i + v (column 8 v + i, nuq.h) is brought to
 *           bit 7 of its weight's byte by one VPSLLVD of the pair's two
 *           sign words (each dword by one of the four counts a lane needs)
 *           and one PSHUFB for w[1]; w[0]'s sign sits one bit lower, so
 *           one VPADDB doubles the bytes into its mask.
 * VPMADDWD with ones then widens to int32 and the two vectors' sums add.
 * Where the target has VNNI (AVX-VNNI, or AVX-512 VNNI and VL in a build
 * with the AVX-512 kernels off) VPDPBUSD does the three, and at 2 and 4
 * bits the tables hold 128 + level (unsigned), each row's sums starting
 * from -128 times the activations' sums (per token): no VPSIGNB.
 *
 * Per row and pair of blocks that is 14 vector operations at 4 bits, 13
 * at 2 and 20 at 3 (VNNI: 9, 8, 17), against 18, 18 and 28 for the former
 * kernel (one row at a time, a block per step, the weights' magnitude and
 * the activations' sign per row and block).  Without VNNI the loop is
 * bound by the 4 vector pipes (llvm-mca -mcpu=znver3: 11.8 cycles per
 * 4-row step at 4 bits, where 68 vector operations take 17 on the FP
 * pipes; skylake 19, ports 0 and 1).  On one Zen5 thread (AVX2 build) it
 * ran 1.3x the former kernel at 2 and 4 bits and 1.45x at 3 bits, in L2
 * as from RAM (48, 48, 32 G weights/s); with AVX-512 VNNI 1.7-1.9x at 2
 * and 4 bits (60-70 G weights/s). */
#include "pmpd_impl/weights/nuq/nuq.h"
#include "pmpd_impl/weights/rotated/rotated_simd.h"

#if PMPD_USE_AVX2 && !PMPD_USE_AVX512 /* else nuq_avx512.c */
#include <immintrin.h>
#include <string.h>

/* With VNNI the 2- and 4-bit tables hold 128 + level (unsigned) and each
 * product starts from -128 times its activations' sum (per token), so
 * that VPDPBUSD takes the weights and activations as they are. */
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define NUQ_AVX2_DPBUSD _mm256_dpbusd_epi32
#define NUQ_AVX2_BIAS 128
#elif PMPD_USE_AVXVNNI
#define NUQ_AVX2_DPBUSD _mm256_dpbusd_avx_epi32
#define NUQ_AVX2_BIAS 128
#else
#define NUQ_AVX2_BIAS 0
#endif

#define NUQ_AVX2_INLINE static inline __attribute__((always_inline))
#define NUQ_AVX2_TOKENS 2 /* tokens of a tile (PMPD_ROTATED_TOKENS_BY_2) */

typedef struct nuq_avx2_consts {
    /* 4 bits: the 16 levels; 2 and 3 bits: the level (3 bits: its
     * magnitude) of a nibble's low pair, of its high pair */
    __m256i table[2];
    __m256i low4;     /* 0x0F in every byte */
    __m256i lanes;    /* 2 and 3 bits: VPSRLVQ counts 0, 0, 4, 4 */
    __m256i count;    /* 3 bits: VPSLLVD counts taking the sign of w[1]'s bytes to bit 7 (w[0]'s to 6) */
    __m256i spread;   /* 3 bits: PSHUFB index, the shifted sign byte under each weight byte */
    __m256i ones;     /* int16 ones for VPMADDWD */
} nuq_avx2_consts;

/* One token's side of a step. */
typedef struct nuq_avx2_input {
    __m256i x[2]; /* the activations in the order of w[0] and w[1] */
    __m256i u[2]; /* |x| (2 and 4 bits) or -x (3 bits) */
    __m256i start; /* the int32 sums' start: 0, or with VNNI at 2 and 4 bits -128 sum(x) per lane */
    __m256 d;     /* each int32 lane's block step */
} nuq_avx2_input;

static void nuq_avx2_init(unsigned bits, nuq_avx2_consts *k)
{
    const int8_t *levels = pmpd_nuq_levels_int8(bits);
    int8_t table[2][16];
    unsigned char spread[32];
    int32_t count[8];
    unsigned p;
    for (p = 0; p < 16; p++) {
        const int bias = bits == 3 ? 0 : NUQ_AVX2_BIAS;
        table[0][p] = (int8_t)(uint8_t)(bias + (bits == 4 ? levels[p] : levels[p & 3]));
        table[1][p] = (int8_t)(uint8_t)(bias + levels[p >> 2]);
    }
    for (p = 0; p < 32; p++) {
        /* Byte p: lane l = p / 16, qword (block) q, column i of the 8:
         * its sign byte i / 2 in dword q + 2 (i & 1), whose bit
         * 4 (i & 1) + 2 l + j is w[j]'s sign. */
        const unsigned q = p % 16 / 8, i = p % 8;
        spread[p] = (unsigned char)(4 * (q + 2 * (i & 1)) + i / 2);
    }
    for (p = 0; p < 8; p++)
        count[p] = (int32_t)(6 - 4 * (p % 4 / 2) - 2 * (p / 4));
    for (p = 0; p < 2; p++)
        k->table[p] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)table[p]));
    k->count = _mm256_loadu_si256((const __m256i *)(const void *)count);
    k->spread = _mm256_loadu_si256((const __m256i *)(const void *)spread);
    k->low4 = _mm256_set1_epi8(15);
    k->lanes = _mm256_setr_epi64x(0, 0, 4, 4);
    k->ones = _mm256_set1_epi16(1);
}

static inline uint32_t nuq_avx2_load32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The exact int32 products of the unsigned bytes u and signed bytes s, in
 * groups of 4, added to acc. */
NUQ_AVX2_INLINE __m256i nuq_avx2_dot(__m256i acc, __m256i u, __m256i s, const nuq_avx2_consts *k)
{
#ifdef NUQ_AVX2_DPBUSD
    (void)k;
    return NUQ_AVX2_DPBUSD(acc, u, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), k->ones));
#endif
}

/* Blocks b and b + 1 of one token (x and d at block b's), or with blocks
 * == 1 block b alone, the other block's activations and step zero. */
NUQ_AVX2_INLINE nuq_avx2_input nuq_avx2_input_pair(const int8_t *x, const float *d, unsigned bits, unsigned blocks,
                                                   const nuq_avx2_consts *k)
{
    const __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)x);
    const __m256i b =
        blocks == 2 ? _mm256_loadu_si256((const __m256i *)(const void *)(x + 32)) : _mm256_setzero_si256();
    const __m128 d0 = _mm_set1_ps(d[0]), d1 = blocks == 2 ? _mm_set1_ps(d[1]) : _mm_setzero_ps();
    nuq_avx2_input in;
    unsigned j;
    if (bits == 4) {
        in.x[0] = _mm256_permute2x128_si256(a, b, 0x20);
        in.x[1] = _mm256_permute2x128_si256(a, b, 0x31);
        in.d = _mm256_setr_m128(d0, d1);
    } else {
        const __m128 pair = _mm_unpacklo_ps(d0, d1);
        in.x[0] = _mm256_unpacklo_epi64(a, b);
        in.x[1] = _mm256_unpackhi_epi64(a, b);
        in.d = _mm256_setr_m128(pair, pair);
        in.d = _mm256_unpacklo_ps(in.d, in.d);
    }
    in.start = _mm256_setzero_si256();
    for (j = 0; j < 2; j++) {
        in.u[j] = bits == 3 ? _mm256_sub_epi8(_mm256_setzero_si256(), in.x[j]) : _mm256_abs_epi8(in.x[j]);
        if (bits != 3 && NUQ_AVX2_BIAS != 0)
            in.start = nuq_avx2_dot(in.start, _mm256_set1_epi8(-128), in.x[j], k);
    }
    if (bits != 3 && NUQ_AVX2_BIAS != 0)
        in.start = _mm256_sub_epi32(_mm256_setzero_si256(), in.start);
    return in;
}

/* The pair's weights of one row (codes at block b's): w as the file
 * header describes, and at 3 bits the sign masks (bit 7 of each byte). */
NUQ_AVX2_INLINE void nuq_avx2_weights(const uint8_t *codes, unsigned bits, unsigned blocks, const nuq_avx2_consts *k,
                                      __m256i *w, __m256i *negative)
{
    __m256i c;
    unsigned j;
    if (bits == 4) {
        const __m256i v = blocks == 2 ? _mm256_loadu_si256((const __m256i *)(const void *)codes)
                                      : _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)codes));
        w[0] = _mm256_shuffle_epi8(k->table[0], _mm256_and_si256(v, k->low4));
        w[1] = _mm256_shuffle_epi8(k->table[0], _mm256_and_si256(_mm256_srli_epi16(v, 4), k->low4));
        return;
    }
    {
        const size_t next = 4 * (size_t)bits;
        const __m128i planes =
            bits == 2 && blocks == 2
                ? _mm_loadu_si128((const __m128i *)(const void *)codes) /* the two planes are adjacent */
                : _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)(const void *)codes),
                                     blocks == 2 ? _mm_loadl_epi64((const __m128i *)(const void *)(codes + next))
                                                 : _mm_setzero_si128());
        c = _mm256_broadcastsi128_si256(planes);
        if (bits == 3) {
            const uint64_t signs = (uint64_t)nuq_avx2_load32(codes + 8) |
                                   (blocks == 2 ? (uint64_t)nuq_avx2_load32(codes + next + 8) << 32 : 0);
            negative[1] = _mm256_shuffle_epi8(_mm256_sllv_epi32(_mm256_set1_epi64x((long long)signs), k->count),
                                              k->spread);
            negative[0] = _mm256_add_epi8(negative[1], negative[1]); /* w[0]'s sign bit was one below */
        }
    }
    c = _mm256_and_si256(_mm256_srlv_epi64(c, k->lanes), k->low4);
    for (j = 0; j < 2; j++)
        w[j] = _mm256_shuffle_epi8(k->table[j], c);
}

/* A tile's accumulators, [row][token]. */
typedef __m256 nuq_avx2_sums[PMPD_ROTATED_ROWS][NUQ_AVX2_TOKENS];

/* One pair of blocks from b (or the last lone block) of the rows r0 + i
 * stride, i < nr, against tokens t0..t0+nt-1 into acc[i][token]. */
NUQ_AVX2_INLINE void nuq_avx2_step(const pmpd_nuq_matrix *m, const nuq_avx2_consts *k, unsigned bits, const int8_t *q,
                                   const float *d, size_t n_blocks, size_t b, unsigned blocks, size_t r0,
                                   size_t stride, size_t nr, size_t t0, size_t nt, nuq_avx2_sums acc)
{
    nuq_avx2_input in[NUQ_AVX2_TOKENS];
    size_t i, t;
    unsigned j;
#pragma GCC unroll 2
    for (t = 0; t < nt; t++)
        in[t] = nuq_avx2_input_pair(q + (t0 + t) * m->padded + b * PMPD_NUQ_BLOCK, d + (t0 + t) * n_blocks + b, bits,
                                    blocks, k);
#pragma GCC unroll 4
    for (i = 0; i < nr; i++) {
        __m256i w[2], negative[2];
        nuq_avx2_weights(m->index + (r0 + i * stride) * m->row_bytes + b * 4 * (size_t)bits, bits, blocks, k, w,
                         negative);
#pragma GCC unroll 2
        for (t = 0; t < nt; t++) {
            __m256i sum = in[t].start;
            for (j = 0; j < 2; j++)
                if (bits == 3)
                    sum = nuq_avx2_dot(sum, w[j], _mm256_blendv_epi8(in[t].x[j], in[t].u[j], negative[j]), k);
                else if (NUQ_AVX2_BIAS != 0)
                    sum = nuq_avx2_dot(sum, w[j], in[t].x[j], k);
                else
                    sum = nuq_avx2_dot(sum, in[t].u[j], _mm256_sign_epi8(w[j], in[t].x[j]), k);
            acc[i][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), in[t].d, acc[i][t]);
        }
    }
}

/* Rows r0 + i stride (i < nr <= 4) times tokens t0..t0+nt-1 (nt <= 2). */
NUQ_AVX2_INLINE void nuq_avx2_tile(const pmpd_nuq_matrix *m, const nuq_avx2_consts *k, unsigned bits, const int8_t *q,
                                   const float *d, size_t n_blocks, size_t r0, size_t stride, size_t nr, size_t t0,
                                   size_t nt, float *y, size_t ldy)
{
    const float unit = pmpd_nuq_unit(bits);
    nuq_avx2_sums acc;
#define NUQ_AVX2_STEP(b, blocks) nuq_avx2_step(m, k, bits, q, d, n_blocks, b, blocks, r0, stride, nr, t0, nt, acc)
    PMPD_ROTATED_AVX2_TILE(acc, n_blocks, NUQ_AVX2_STEP, m->scale, unit, r0, stride, nr, t0, nt, y, ldy);
#undef NUQ_AVX2_STEP
}

/* One width's loop, with bits a constant after inlining. */
NUQ_AVX2_INLINE void nuq_avx2_rows(const pmpd_nuq_matrix *m, unsigned bits, const void *act, size_t n_tokens,
                                   size_t row_begin, size_t row_end, float *y, size_t ldy)
{
    const int8_t *q = pmpd_nuq_act_q(m, act, n_tokens);
    const float *d = pmpd_nuq_act_d(m, act, n_tokens);
    const size_t n_blocks = m->padded / PMPD_NUQ_BLOCK;
    nuq_avx2_consts k;
    nuq_avx2_init(bits, &k);
#define NUQ_AVX2_TILE(r0, stride, nr, t0, nt) nuq_avx2_tile(m, &k, bits, q, d, n_blocks, r0, stride, nr, t0, nt, y, ldy)
    PMPD_ROTATED_TILE_GRID(row_begin, row_end, PMPD_ROTATED_ROWS, n_tokens, PMPD_ROTATED_TOKENS_BY_2, NUQ_AVX2_TILE);
#undef NUQ_AVX2_TILE
}

PMPD_INTERNAL void pmpd_nuq_matmul(const pmpd_nuq_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                                   size_t row_end, float *y, size_t ldy)
{
    if (m->bits == 4)
        nuq_avx2_rows(m, 4, act, n_tokens, row_begin, row_end, y, ldy);
    else if (m->bits == 3)
        nuq_avx2_rows(m, 3, act, n_tokens, row_begin, row_end, y, ldy);
    else
        nuq_avx2_rows(m, 2, act, n_tokens, row_begin, row_end, y, ldy);
}

#undef NUQ_AVX2_TOKENS
#undef NUQ_AVX2_INLINE
#undef NUQ_AVX2_DPBUSD
#undef NUQ_AVX2_BIAS
#endif
