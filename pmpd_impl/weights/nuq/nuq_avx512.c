/* NUQ product with AVX-512 (F, BW, VNNI, VBMI: PMPD_USE_AVX512), the GEMV
 * of decode and the token tiles of prefill; the AVX2 kernel (nuq_avx2.c)
 * stays for AVX2-only builds.  The layout is nuq.h's, unchanged.
 *
 * Most of a row goes in wide steps of 8 blocks at 2 bits, 4 at 3 and 4
 * bits (64 or 48 code bytes, below); the rest in steps of a pair of
 * blocks (64 rotated columns): one load covers the pair's codes and one or
 * two operations spread them to 64 bytes, each byte's low bits a code:
 *   4 bits: the 32 bytes in both 256-bit halves, the upper half shifted by
 *           a nibble (VPSRLVQ): bytes = block 0 columns 0-15 | block 1
 *           columns 0-15 | block 0 columns 16-31 | block 1 columns 16-31;
 *   2 bits: the 16 bytes in each 128-bit lane k, shifted by 2k (VPSRLVQ):
 *           lane k = columns 8k..8k+7 of block 0 | of block 1;
 *   3 bits: the two 2-bit planes (8 bytes each) in four qwords each, and
 *           VPMULTISHIFTQB takes the code of column 8k + i of a block to
 *           byte 4i + k of its half: the order of the sign plane's bits
 *           (nuq.h), so the two sign words side by side are the mask of
 *           negative codes as they stand.
 * The bits above a code (its neighbours') never need clearing: VPERMB
 * reads a byte's low six bits, and its 64-byte table repeats the levels
 * (16 at 4 bits, the 4 magnitudes at 2 and 3 bits).  The table holds 128 +
 * level, unsigned, for VPDPBUSD; a 3-bit negative code's byte is negated
 * (256 - (128 + level) = 128 - level) under the sign mask.  The
 * activations are permuted once per tile into the codes' byte order, with
 * the -128 * sum(x) that makes the biased products exact
 * (rotated_simd.h).
 *
 * Per row and pair that is 5 vector operations at 2 and 4 bits (shift,
 * lookup, VPDPBUSD, conversion, FMA; the load broadcasts) and 7 at 3 bits
 * plus the codes' trip through general registers, against the AVX2
 * kernel's 2 x 9 to 2 x 13 for the same 64 weights (the wide steps: 3.5,
 * 7.5 and 4 at 2, 3 and 4 bits).  The tiles (4 rows, one per quarter of the
 * caller's rows, x 2 tokens) are rotated_simd.h's: each lookup serves both
 * tokens, each token's permuted activations the 4 rows, and the 8
 * accumulators are independent chains.  From RAM on one Zen5 thread
 * (pmpd-bench, 4096 x 4096) nuq4, nuq3, nuq2 stream at 124%, 88%, 94% of
 * the bandwidth probe, against 56%, 34%, 28% for the AVX2 kernel
 * (docs/palette.md). */
#include "pmpd_impl/weights/nuq/nuq.h"
#include "pmpd_impl/weights/rotated/rotated_simd.h"

#if PMPD_USE_AVX512
#include <immintrin.h>
#include <string.h>

/* Blocks per wide step: 64 code bytes at 2 and 4 bits, 48 at 3. */
#define NUQ_AVX512_WIDE_BLOCKS(bits) ((bits) == 2 ? 8u : 4u)
#define NUQ_AVX512_SELECT 0xCA /* VPTERNLOGD: a ? b : c, bitwise */

#if defined(__GNUC__)
#define NUQ_AVX512_INLINE static inline __attribute__((always_inline))
#else
#define NUQ_AVX512_INLINE static inline
#endif

typedef struct nuq_avx512_consts {
    __m512i table;  /* 128 + level, the width's levels repeated over 64 bytes */
    __m512i shifts; /* VPSRLVQ counts per qword (2 and 4 bits) */
    __m512i select; /* VPMULTISHIFTQB control (3 bits) */
    __m512i order;  /* VPERMB index: the pair column under each code byte */
    __m512i lanes;  /* VPERMPS index: the block (0, 1) of each dword lane */
    /* 3-bit wide steps (nuq_avx512_wide3_weights) */
    __m512i signed_table; /* 128 + level of every 3-bit code, repeated */
    __m512i low_bytes;    /* VPERMB: block s's 8 low-plane bytes, twice, to lane s */
    __m512i sign_words;   /* VPERMB: block s's sign word to qwords 2s, 2s + 1 */
    __m512i half_shifts[2];  /* VPSRLVQ: 0, 2 (columns 0-15) and 4, 6 (16-31) */
    __m512i sign_select[2];  /* VPMULTISHIFTQB: the column's sign bit to bit 2 */
} nuq_avx512_consts;

/* The column (0..63) of a pair of blocks whose code lands in byte p. */
static unsigned nuq_avx512_column(unsigned bits, unsigned p)
{
    const unsigned lane = p / 16, j = p % 16;
    if (bits == 4)
        return (lane & 1) * 32 + (lane >> 1) * 16 + j;
    if (bits == 2)
        return (j / 8) * 32 + 8 * lane + j % 8;
    return (p / 32) * 32 + 8 * (p % 4) + (p % 32) / 4;
}

/* The 3-bit wide step's constants.  Byte p of its weight vector v (0, 1)
 * is column 16 v + j of block s = p / 16, j = p % 16: the low-plane byte
 * j % 8 of block s shifted by 2 (2 v + j / 8), and the sign bit 4 (j % 8)
 * + 2 v + j / 8 of its sign word, which qword p / 8 = 2 s + j / 8 holds. */
static void nuq_avx512_init_wide3(const int8_t *levels, nuq_avx512_consts *k)
{
    unsigned char table[64], low_bytes[64], sign_words[64], sign_select[2][64];
    long long shifts[2][8];
    unsigned p, v;
    for (p = 0; p < 64; p++) {
        const unsigned s = p / 16, j = p % 16;
        table[p] = (unsigned char)(128 + levels[p % 8]);
        low_bytes[p] = (unsigned char)(3 * PMPD_NUQ_BLOCK / 8 * s + j % 8);
        sign_words[p] = (unsigned char)(3 * PMPD_NUQ_BLOCK / 8 * s + 8 + p % 4);
        for (v = 0; v < 2; v++)
            sign_select[v][p] = (unsigned char)((4 * (j % 8) + 2 * v + j / 8 + 64 - 2) % 64);
    }
    for (p = 0; p < 8; p++)
        for (v = 0; v < 2; v++)
            shifts[v][p] = (long long)(4 * v + 2 * (p % 2));
    k->signed_table = _mm512_loadu_si512((const void *)table);
    k->low_bytes = _mm512_loadu_si512((const void *)low_bytes);
    k->sign_words = _mm512_loadu_si512((const void *)sign_words);
    for (v = 0; v < 2; v++) {
        k->half_shifts[v] = _mm512_loadu_si512((const void *)shifts[v]);
        k->sign_select[v] = _mm512_loadu_si512((const void *)sign_select[v]);
    }
}

static void nuq_avx512_init(unsigned bits, nuq_avx512_consts *k)
{
    const int8_t *levels = pmpd_nuq_levels_int8(bits);
    const unsigned period = bits == 4 ? 16 : 4; /* 3 bits: the sign comes from its mask */
    unsigned char table[64], order[64], select[64];
    int32_t lanes[16];
    long long shifts[8];
    unsigned p;
    for (p = 0; p < 64; p++) {
        table[p] = (unsigned char)(128 + levels[p % period]);
        order[p] = (unsigned char)nuq_avx512_column(bits, p);
        /* Byte 4i + k of a half: the plane byte i's bits 2k, 2k + 1. */
        select[p] = (unsigned char)(8 * ((p % 32) / 4) + 2 * (p % 4));
    }
    for (p = 0; p < 16; p++)
        lanes[p] = (int32_t)(nuq_avx512_column(bits, 4 * p) / 32);
    for (p = 0; p < 8; p++)
        shifts[p] = bits == 4 ? (long long)(p / 4) * 4 : (long long)(p / 2) * 2;
    k->table = _mm512_loadu_si512((const void *)table);
    k->order = _mm512_loadu_si512((const void *)order);
    k->select = _mm512_loadu_si512((const void *)select);
    k->lanes = _mm512_loadu_si512((const void *)lanes);
    k->shifts = _mm512_loadu_si512((const void *)shifts);
    if (bits == 3)
        nuq_avx512_init_wide3(levels, k);
}

static inline uint64_t nuq_avx512_load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint32_t nuq_avx512_load32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The 64 biased weights of the pair of blocks at block (blocks == 1: the
 * first alone, the second half's bytes meeting zero activations), in the
 * byte order of nuq_avx512_column. */
NUQ_AVX512_INLINE __m512i nuq_avx512_weights(const uint8_t *block, unsigned bits, unsigned blocks,
                                             const nuq_avx512_consts *k)
{
    const size_t block_bytes = 4 * (size_t)bits;
    __m512i codes;
    if (bits == 4) {
        codes = blocks == 2 ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)block))
                            : _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)block));
        return _mm512_permutexvar_epi8(_mm512_srlv_epi64(codes, k->shifts), k->table);
    }
    if (bits == 2) {
        codes = blocks == 2 ? _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)block))
                            : _mm512_set1_epi64((long long)nuq_avx512_load64(block));
        return _mm512_permutexvar_epi8(_mm512_srlv_epi64(codes, k->shifts), k->table);
    }
    {
        const uint64_t low = nuq_avx512_load64(block), signs = nuq_avx512_load32(block + 8);
        const uint64_t low1 = blocks == 2 ? nuq_avx512_load64(block + block_bytes) : low;
        const uint64_t signs1 = blocks == 2 ? nuq_avx512_load32(block + block_bytes + 8) : 0;
        const __mmask64 negative = _cvtu64_mask64(signs | signs1 << 32);
        const __m512i planes = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi64x((long long)low)),
                                                  _mm256_set1_epi64x((long long)low1), 1);
        const __m512i w = _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(k->select, planes), k->table);
        return _mm512_mask_sub_epi8(w, negative, _mm512_setzero_si512(), w);
    }
}

/* One pair of blocks from b (or the last lone block) of the rows r0 +
 * i stride, i < nr, against tokens t0..t0+nt-1 into acc[i][token]. */
NUQ_AVX512_INLINE void nuq_avx512_step(const pmpd_nuq_matrix *m, const nuq_avx512_consts *k, unsigned bits,
                                       const int8_t *q, const float *d, size_t n_blocks, size_t b, unsigned blocks,
                                       size_t r0, size_t stride, size_t nr, size_t t0, size_t nt,
                                       pmpd_rotated_avx512_sums acc)
{
    pmpd_rotated_avx512_input in[PMPD_ROTATED_AVX512_TOKENS];
    size_t i, t;
#pragma GCC unroll 2
    for (t = 0; t < nt; t++)
        in[t] = pmpd_rotated_avx512_input_pair(q + (t0 + t) * m->padded + b * PMPD_NUQ_BLOCK,
                                               d + (t0 + t) * n_blocks + b, blocks, k->order, k->lanes);
#pragma GCC unroll 4
    for (i = 0; i < nr; i++) {
        const __m512i w =
            nuq_avx512_weights(m->index + (r0 + i * stride) * m->row_bytes + b * 4 * (size_t)bits, bits, blocks, k);
#pragma GCC unroll 2
        for (t = 0; t < nt; t++)
            acc[i][t] = pmpd_rotated_avx512_dot(w, &in[t], acc[i][t]);
    }
}

/* A wide step (2 and 4 bits): 64 bytes of a row's codes, 8 or 4 blocks,
 * as stored (rotated_simd.h's wide input): shifting them by v * bits (v <
 * 8 / bits) leaves in every byte the code of column 8v + j % 8 (2 bits) or
 * 16v + j (4 bits) of its lane's block.  Per row and 64 weights that is
 * 3.5 (2 bits) or 4 (4 bits) vector operations against the pair step's 5
 * plus a broadcast load, which costs a shuffle on Zen5 (a plain load in
 * its place ran nuq2 in L2 20% faster); in L2 on one Zen5 thread nuq2 went
 * from 0.71 to 0.61 ns per row and 64 weights, nuq4 from 0.73 to 0.52. */
NUQ_AVX512_INLINE void nuq_avx512_wide_weights(const uint8_t *codes, unsigned bits, const nuq_avx512_consts *k,
                                               __m512i *w)
{
    const __m512i stored = pmpd_rotated_avx512_wide_codes(codes);
    w[0] = _mm512_permutexvar_epi8(stored, k->table);
    if (bits == 2) {
        w[1] = _mm512_permutexvar_epi8(_mm512_srli_epi64(stored, 2), k->table);
        w[2] = _mm512_permutexvar_epi8(_mm512_srli_epi64(stored, 4), k->table);
        w[3] = _mm512_permutexvar_epi8(_mm512_srli_epi64(stored, 6), k->table);
    } else {
        w[1] = _mm512_permutexvar_epi8(_mm512_srli_epi64(stored, 4), k->table);
    }
}

/* A 3-bit wide step: 4 blocks (48 code bytes, 128 columns) of one row as
 * the wide input of 4 blocks takes them (w[v] lane s = columns 16 v..16 v
 * + 15 of block s).  The bytes come in a 32- and a 16-byte load (exactly
 * the step's); VPERMB puts each block's low-plane bytes twice into its
 * lane and its sign word into the lane's qwords; per vector a VPSRLVQ
 * leaves each column's two low bits at the bottom of its byte, a
 * VPMULTISHIFTQB brings its sign bit to bit 2 of a second byte, a
 * VPTERNLOGD takes that bit into the code and VPERMB looks the signed
 * level up (the table repeats every 8 bytes, so the neighbours' bits
 * above bit 2 do not matter).  7.5 operations per row and 64 weights, the
 * products included, all in vector registers; the pair step moves its
 * codes and sign words through general registers. */
NUQ_AVX512_INLINE void nuq_avx512_wide3_weights(const uint8_t *codes, const nuq_avx512_consts *k, __m512i *w)
{
    const __m512i stored = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)codes)),
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(codes + 32))), 1);
    const __m512i low = _mm512_permutexvar_epi8(k->low_bytes, stored);
    const __m512i signs = _mm512_permutexvar_epi8(k->sign_words, stored);
    const __m512i bit2 = _mm512_set1_epi8(4);
    unsigned v;
    for (v = 0; v < 2; v++) {
        const __m512i magnitude = _mm512_srlv_epi64(low, k->half_shifts[v]);
        const __m512i sign = _mm512_multishift_epi64_epi8(k->sign_select[v], signs);
        w[v] = _mm512_permutexvar_epi8(_mm512_ternarylogic_epi32(bit2, sign, magnitude, NUQ_AVX512_SELECT),
                                       k->signed_table);
    }
}

/* The wide step from block b of the tile's rows into acc. */
NUQ_AVX512_INLINE void nuq_avx512_wide_step(const pmpd_nuq_matrix *m, const nuq_avx512_consts *k, unsigned bits,
                                            const int8_t *q, const float *d, size_t n_blocks, size_t b, size_t r0,
                                            size_t stride, size_t nr, size_t t0, size_t nt,
                                            pmpd_rotated_avx512_sums acc)
{
    const unsigned blocks = NUQ_AVX512_WIDE_BLOCKS(bits);
    pmpd_rotated_avx512_wide in[PMPD_ROTATED_AVX512_TOKENS];
    size_t i, t;
#pragma GCC unroll 2
    for (t = 0; t < nt; t++)
        pmpd_rotated_avx512_wide_input(q + (t0 + t) * m->padded + b * PMPD_NUQ_BLOCK, d + (t0 + t) * n_blocks + b,
                                       blocks, &in[t]);
#pragma GCC unroll 4
    for (i = 0; i < nr; i++) {
        const uint8_t *codes = m->index + (r0 + i * stride) * m->row_bytes + b * 4 * (size_t)bits;
        __m512i w[PMPD_ROTATED_AVX512_WIDE];
        if (bits == 3)
            nuq_avx512_wide3_weights(codes, k, w);
        else
            nuq_avx512_wide_weights(codes, bits, k, w);
#pragma GCC unroll 2
        for (t = 0; t < nt; t++)
            acc[i][t] = pmpd_rotated_avx512_wide_dot(w, blocks, &in[t], acc[i][t]);
    }
}

/* Rows r0 + i stride (i < nr <= 4) times tokens t0..t0+nt-1 (nt <= 2). */
NUQ_AVX512_INLINE void nuq_avx512_tile(const pmpd_nuq_matrix *m, const nuq_avx512_consts *k, unsigned bits,
                                       const int8_t *q, const float *d, size_t n_blocks, size_t r0, size_t stride,
                                       size_t nr, size_t t0, size_t nt, float *y, size_t ldy)
{
    pmpd_rotated_avx512_sums acc;
    size_t i, t, b = 0;
#pragma GCC unroll 4
    for (i = 0; i < nr; i++)
#pragma GCC unroll 2
        for (t = 0; t < nt; t++)
            acc[i][t] = _mm512_setzero_ps();
    /* Wide steps, then pairs; every load takes the step's bytes exactly. */
    for (; b + NUQ_AVX512_WIDE_BLOCKS(bits) <= n_blocks; b += NUQ_AVX512_WIDE_BLOCKS(bits))
        nuq_avx512_wide_step(m, k, bits, q, d, n_blocks, b, r0, stride, nr, t0, nt, acc);
#define NUQ_AVX512_STEP(b, blocks, bounded)                                                                          \
    nuq_avx512_step(m, k, bits, q, d, n_blocks, b, blocks, r0, stride, nr, t0, nt, acc)
    PMPD_ROTATED_AVX512_STEPS(b, n_blocks, n_blocks, NUQ_AVX512_STEP);
#undef NUQ_AVX512_STEP
    PMPD_ROTATED_STORE(acc, _mm512_reduce_add_ps, m->scale, pmpd_nuq_unit(bits), r0, stride, nr, t0, nt, y, ldy);
}

/* One width's loop, with bits a constant after inlining. */
NUQ_AVX512_INLINE void nuq_avx512_rows(const pmpd_nuq_matrix *m, unsigned bits, const void *act, size_t n_tokens,
                                       size_t row_begin, size_t row_end, float *y, size_t ldy)
{
    const int8_t *q = pmpd_nuq_act_q(m, act, n_tokens);
    const float *d = pmpd_nuq_act_d(m, act, n_tokens);
    const size_t n_blocks = m->padded / PMPD_NUQ_BLOCK;
    nuq_avx512_consts k;
    nuq_avx512_init(bits, &k);
#define NUQ_AVX512_TILE(r0, stride, nr, t0, nt)                                                                      \
    nuq_avx512_tile(m, &k, bits, q, d, n_blocks, r0, stride, nr, t0, nt, y, ldy)
    PMPD_ROTATED_TILE_GRID(row_begin, row_end, PMPD_ROTATED_AVX512_ROWS, n_tokens, PMPD_ROTATED_TOKENS_BY_2,
                           NUQ_AVX512_TILE);
#undef NUQ_AVX512_TILE
}

PMPD_INTERNAL void pmpd_nuq_matmul(const pmpd_nuq_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                                   size_t row_end, float *y, size_t ldy)
{
    if (m->bits == 4)
        nuq_avx512_rows(m, 4, act, n_tokens, row_begin, row_end, y, ldy);
    else if (m->bits == 3)
        nuq_avx512_rows(m, 3, act, n_tokens, row_begin, row_end, y, ldy);
    else
        nuq_avx512_rows(m, 2, act, n_tokens, row_begin, row_end, y, ldy);
}

#undef NUQ_AVX512_INLINE
#undef NUQ_AVX512_WIDE_BLOCKS
#undef NUQ_AVX512_SELECT
#endif
