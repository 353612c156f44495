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
 * The products are exact.  VPMADDUBSW multiplies unsigned by signed
 * bytes, and the levels (nuq_levels.c) stay within +-64 units:
 *   2 and 4 bits: the tables hold bias + level, unsigned (bias 32 at 2
 *           bits, whose levels are within +-30, 64 at 4 bits, or 128 with
 *           VNNI), times x as it is; each row's sum starts from -bias times
 *           the token's quantized x' summed (prepared once per input,
 *           rotated.h), so the bias costs nothing per step;
 *   3 bits: the looked-up magnitude (<= 64) times x, negated under the
 *           code's sign bit (VPBLENDVB between x and -x, the latter per
 *           token).  The sign word's bit 4 i + v (column 8 v + i, nuq.h)
 *           is brought to bit 7 of its weight's byte by one VPSLLVD of the
 *           pair's two sign words (each dword by one of the four counts a
 *           lane needs) and one PSHUFB for w[1]; w[0]'s sign sits one bit
 *           lower, so one VPADDB doubles the bytes into its mask.
 * No VPMADDUBSW pair saturates (at most 2 * 125 * 127).  At 2 and 3 bits
 * the two vectors' pairs add in int16 before one VPMADDWD with ones
 * widens them (4 products of at most 62 * 127 or 64 * 127); at 4 bits
 * each vector is widened on its own.  Where the target has VNNI
 * (AVX-VNNI, or AVX-512 VNNI and VL in a build with the AVX-512 kernels
 * off) VPDPBUSD does the multiplies and adds.
 *
 * Per row and pair of blocks that is 10 vector operations besides loads at
 * 2 bits, 12 at 4 and 17 at 3 (with VNNI one VPDPBUSD per vector instead of
 * its multiply and widening), against 13, 14 and 20 for the former kernel
 * (the weights' sign put on the activations per row and vector, one
 * VPMADDWD per vector, levels up to 127, the 3-bit planes and sign words
 * put together by inserts and general registers) and 18, 18 and 28 for
 * the one before it (one row at a time, a block per step).  Without VNNI the loop
 * is bound by the 4 vector pipes.  The former kernel ran on one Zen5
 * thread (AVX2 build) at 1.3x the one before at 2 and 4 bits and 1.45x at
 * 3 bits, in L2 as from RAM (48, 48, 32 G weights/s); with AVX-512 VNNI
 * 1.7-1.9x at 2 and 4 bits (60-70 G weights/s).  A bias taken off per step
 * instead (computed per token and step, subtracted in int16 per row) ran
 * 0.88x the former kernel at 2 bits on a Zen3 core: one register more
 * than the 16, and GCC spilled a product in every row.  This kernel
 * against the former on that core (one process, the two alternated, best
 * of 200 or 4): in L2 (256 x 2048, 512 x 4096) 1.24-1.26x at 2 bits,
 * 1.17-1.18x at 4, 1.11-1.15x at 3; from RAM (65536 x 4096) 1.18x at 2
 * bits, 1.03-1.05x at 4. */
#include "pmpd_impl/weights/nuq/nuq.h"
#include "pmpd_impl/weights/rotated/rotated_simd.h"

#if PMPD_USE_AVX2 && !PMPD_USE_AVX512 /* else nuq_avx512.c */
#include <immintrin.h>
#include <string.h>

/* VPDPBUSD where the target has it (AVX-VNNI, or AVX-512 VNNI and VL). */
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define NUQ_AVX2_DPBUSD _mm256_dpbusd_epi32
#elif PMPD_USE_AVXVNNI
#define NUQ_AVX2_DPBUSD _mm256_dpbusd_avx_epi32
#endif

#define NUQ_AVX2_INLINE static inline __attribute__((always_inline))
#define NUQ_AVX2_TOKENS 2 /* tokens of a tile (PMPD_ROTATED_TOKENS_BY_2) */

/* What the 2- and 4-bit tables add to each level (0 at 3 bits, whose
 * tables hold magnitudes). */
static inline int nuq_avx2_bias(unsigned bits)
{
    if (bits == 3)
        return 0;
#ifdef NUQ_AVX2_DPBUSD
    return 128;
#else
    return bits == 2 ? 32 : 64;
#endif
}

typedef struct nuq_avx2_consts {
    /* 4 bits: the 16 levels; 2 and 3 bits: the level (3 bits: its
     * magnitude) of a nibble's low pair, of its high pair; biased */
    __m256i table[2];
    __m256i low4;     /* 0x0F in every byte */
    __m256i lanes;    /* 2 and 3 bits: VPSRLVQ counts 0, 0, 4, 4 */
    __m256i count;    /* 3 bits: VPSLLVD counts taking the sign of w[1]'s bytes to bit 7 (w[0]'s to 6) */
    __m256i spread;   /* 3 bits: PSHUFB index, the shifted sign byte under each weight byte */
    __m256i ones;     /* int16 ones for VPMADDWD */
} nuq_avx2_consts;

/* One token's side of a step. */
typedef struct nuq_avx2_input {
    __m256i x[2];       /* the activations in the order of w[0] and w[1] */
    __m256i negated[2]; /* 3 bits: -x[j], taken under w[j]'s negative codes */
    __m256 d;           /* each int32 lane's block step */
} nuq_avx2_input;

static void nuq_avx2_init(unsigned bits, nuq_avx2_consts *k)
{
    const int8_t *levels = pmpd_nuq_levels_int8(bits);
    const int bias = nuq_avx2_bias(bits);
    int8_t table[2][16];
    unsigned char spread[32];
    int32_t count[8];
    unsigned p;
    for (p = 0; p < 16; p++) {
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

static inline uint64_t nuq_avx2_load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The exact int32 products of the unsigned bytes u[j] and signed bytes
 * s[j], j = 0, 1, in groups of 4 (the lane's 2 x 2 pairs): see the file's
 * comment for why the int16 sums at 2 and 3 bits cannot overflow. */
NUQ_AVX2_INLINE __m256i nuq_avx2_dot(unsigned bits, __m256i u0, __m256i s0, __m256i u1, __m256i s1,
                                     const nuq_avx2_consts *k)
{
#ifdef NUQ_AVX2_DPBUSD
    (void)bits;
    (void)k;
    return NUQ_AVX2_DPBUSD(NUQ_AVX2_DPBUSD(_mm256_setzero_si256(), u0, s0), u1, s1);
#else
    if (bits == 4)
        return _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(u0, s0), k->ones),
                                _mm256_madd_epi16(_mm256_maddubs_epi16(u1, s1), k->ones));
    return _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(u0, s0), _mm256_maddubs_epi16(u1, s1)), k->ones);
#endif
}

/* Blocks b and b + 1 of one token (x and d at block b's), or with blocks
 * == 1 block b alone, the other block's activations and step zero. */
NUQ_AVX2_INLINE nuq_avx2_input nuq_avx2_input_pair(const int8_t *x, const float *d, unsigned bits, unsigned blocks)
{
    const __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)x);
    const __m256i b =
        blocks == 2 ? _mm256_loadu_si256((const __m256i *)(const void *)(x + 32)) : _mm256_setzero_si256();
    const __m128 d0 = _mm_set1_ps(d[0]), d1 = blocks == 2 ? _mm_set1_ps(d[1]) : _mm_setzero_ps();
    const __m256i zero = _mm256_setzero_si256();
    nuq_avx2_input in;
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
    in.negated[0] = bits == 3 ? _mm256_sub_epi8(zero, in.x[0]) : zero;
    in.negated[1] = bits == 3 ? _mm256_sub_epi8(zero, in.x[1]) : zero;
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
    if (bits == 2) {
        const __m128i planes =
            blocks == 2 ? _mm_loadu_si128((const __m128i *)(const void *)codes) /* the two planes are adjacent */
                        : _mm_loadl_epi64((const __m128i *)(const void *)codes);
        c = _mm256_broadcastsi128_si256(planes);
    } else {
        /* Each block's plane (8 bytes) and sign word (4; a 3-bit block is
         * 12 bytes, nuq.h) broadcast from memory, the two blocks' merged by
         * one VPBLENDD each: the loads
         * take no vector ALU operation, where an insert of the second plane
         * and a sign word built in a general register took 4. */
        const __m256i zero = _mm256_setzero_si256();
        const __m256i plane1 = blocks == 2 ? _mm256_set1_epi64x((long long)nuq_avx2_load64(codes + 12)) : zero;
        const __m256i sign1 = blocks == 2 ? _mm256_set1_epi32((int)nuq_avx2_load32(codes + 20)) : zero;
        const __m256i signs = _mm256_blend_epi32(_mm256_set1_epi32((int)nuq_avx2_load32(codes + 8)), sign1, 0xAA);
        c = _mm256_blend_epi32(_mm256_set1_epi64x((long long)nuq_avx2_load64(codes)), plane1, 0xCC);
        negative[1] = _mm256_shuffle_epi8(_mm256_sllv_epi32(signs, k->count), k->spread);
        negative[0] = _mm256_add_epi8(negative[1], negative[1]); /* w[0]'s sign bit was one below */
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
#pragma GCC unroll 2
    for (t = 0; t < nt; t++)
        in[t] = nuq_avx2_input_pair(q + (t0 + t) * m->padded + b * PMPD_NUQ_BLOCK, d + (t0 + t) * n_blocks + b, bits,
                                    blocks);
#pragma GCC unroll 4
    for (i = 0; i < nr; i++) {
        __m256i w[2], negative[2];
        nuq_avx2_weights(m->index + (r0 + i * stride) * m->row_bytes + b * 4 * (size_t)bits, bits, blocks, k, w,
                         negative);
#pragma GCC unroll 2
        for (t = 0; t < nt; t++) {
            const __m256i sum =
                bits == 3 ? nuq_avx2_dot(bits, w[0], _mm256_blendv_epi8(in[t].x[0], in[t].negated[0], negative[0]),
                                         w[1], _mm256_blendv_epi8(in[t].x[1], in[t].negated[1], negative[1]), k)
                          : nuq_avx2_dot(bits, w[0], in[t].x[0], w[1], in[t].x[1], k);
            acc[i][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), in[t].d, acc[i][t]);
        }
    }
}

/* Rows r0 + i stride (i < nr <= 4) times tokens t0..t0+nt-1 (nt <= 2). */
NUQ_AVX2_INLINE void nuq_avx2_tile(const pmpd_nuq_matrix *m, const nuq_avx2_consts *k, unsigned bits, const int8_t *q,
                                   const float *d, const float *sum, size_t n_blocks, size_t r0, size_t stride,
                                   size_t nr, size_t t0, size_t nt, float *y, size_t ldy)
{
    const float unit = pmpd_nuq_unit(bits), bias = (float)nuq_avx2_bias(bits);
    nuq_avx2_sums acc;
#define NUQ_AVX2_START(t) _mm256_setr_ps(-bias * sum[t], 0, 0, 0, 0, 0, 0, 0)
#define NUQ_AVX2_STEP(b, blocks) nuq_avx2_step(m, k, bits, q, d, n_blocks, b, blocks, r0, stride, nr, t0, nt, acc)
    PMPD_ROTATED_AVX2_TILE(acc, NUQ_AVX2_START, n_blocks, NUQ_AVX2_STEP, m->scale, unit, r0, stride, nr, t0, nt, y,
                           ldy);
#undef NUQ_AVX2_STEP
#undef NUQ_AVX2_START
}

/* One width's loop, with bits a constant after inlining. */
NUQ_AVX2_INLINE void nuq_avx2_rows(const pmpd_nuq_matrix *m, unsigned bits, const void *act, size_t n_tokens,
                                   size_t row_begin, size_t row_end, float *y, size_t ldy)
{
    const int8_t *q = pmpd_nuq_act_q(m, act, n_tokens);
    const float *d = pmpd_nuq_act_d(m, act, n_tokens), *sum = pmpd_nuq_act_sum(m, act, n_tokens);
    const size_t n_blocks = m->padded / PMPD_NUQ_BLOCK;
    nuq_avx2_consts k;
    nuq_avx2_init(bits, &k);
#define NUQ_AVX2_TILE(r0, stride, nr, t0, nt)                                                                      \
    nuq_avx2_tile(m, &k, bits, q, d, sum, n_blocks, r0, stride, nr, t0, nt, y, ldy)
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
#endif
