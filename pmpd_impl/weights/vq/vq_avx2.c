/* VQ product with AVX2.  A block's 16 indices land in one 16-byte
 * register (vq.h's layout), copied to both 128-bit lanes; PSHUFB looks
 * them up in tables whose lower lane holds 16 points' first coordinates
 * and whose upper lane their second, so one lookup yields the block's 32
 * int8 weights in the order of the prepared input (first coordinates,
 * then second).  Books of more than 16 points take one lookup per chunk
 * of 16: with i_c = index - 16 c, PSHUFB gives 0 where i_c is negative
 * (bit 7 set: chunks past the index's) and table entry i_c % 16
 * otherwise, so chunk c's table is stored XORed with chunk c - 1's and
 * the XOR of all lookups telescopes to the index's own chunk.  256 points
 * run two such chains of 8 chunks on index % 128 and pick by bit 7
 * (PBLENDVB).  VPMADDUBSW / VPMADDWD then multiply with the int8
 * activations exactly, as NUQ's kernel does (nuq_avx2.c); a tile is one
 * row x up to 4 tokens, the lookups shared by the tokens. */
#include "pmpd_impl/weights/rotated/rotated_simd.h"
#include "pmpd_impl/weights/vq/vq.h"

#if PMPD_USE_AVX2 && !PMPD_USE_AVX512 /* else vq_avx512.c */
#include <immintrin.h>
#include <string.h>

#define VQ_AVX2_TILE PMPD_ROTATED_TILE
#define VQ_AVX2_CHUNKS 16 /* of 16 points, at 256 points */

typedef struct vq_avx2_consts {
    __m256i table[VQ_AVX2_CHUNKS]; /* chunk c: first coordinates | second, XORed with chunk c - 1's */
    __m128i low4;                  /* 0x0F in every byte */
    __m128i spread[4];             /* plane i: its low byte to bytes 0-7, high byte to 8-15 */
    __m128i bit;                   /* byte L: 1 << (L % 8) */
    __m256i sixteen, low7;         /* 16, 0x7F in every byte */
    __m256i ones;                  /* int16 ones for VPMADDWD */
    float unit;                    /* the book's unit */
} vq_avx2_consts;

static void vq_avx2_tables(unsigned pair_bits, vq_avx2_consts *k)
{
    const int8_t *book = pmpd_vq_book(pair_bits);
    const unsigned chunks = 1u << (pair_bits - 4);
    int8_t lanes[VQ_AVX2_CHUNKS][32];
    unsigned c, i, plane;
    for (c = 0; c < chunks; c++)
        for (i = 0; i < 16; i++) {
            lanes[c][i] = book[2 * (16 * c + i)];
            lanes[c][16 + i] = book[2 * (16 * c + i) + 1];
        }
    /* Telescoping restarts at each chain of 8 chunks (256 points: two). */
    for (c = chunks; c-- > 0;)
        for (i = 0; c % 8 && i < 32; i++)
            lanes[c][i] = (int8_t)(lanes[c][i] ^ lanes[c - 1][i]);
    for (c = 0; c < chunks; c++)
        k->table[c] = _mm256_loadu_si256((const __m256i *)(const void *)lanes[c]);
    k->low4 = _mm_set1_epi8(15);
    for (plane = 0; plane < 4; plane++)
        k->spread[plane] = _mm_setr_epi8((char)(2 * plane), (char)(2 * plane), (char)(2 * plane), (char)(2 * plane),
                                         (char)(2 * plane), (char)(2 * plane), (char)(2 * plane), (char)(2 * plane),
                                         (char)(2 * plane + 1), (char)(2 * plane + 1), (char)(2 * plane + 1),
                                         (char)(2 * plane + 1), (char)(2 * plane + 1), (char)(2 * plane + 1),
                                         (char)(2 * plane + 1), (char)(2 * plane + 1));
    k->bit = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
    k->sixteen = _mm256_set1_epi8(16);
    k->low7 = _mm256_set1_epi8(127);
    k->ones = _mm256_set1_epi16(1);
    k->unit = pmpd_vq_unit(pair_bits);
}

/* The 16 indices of one block, in pair order. */
static inline __attribute__((always_inline)) __m128i vq_avx2_indices(const uint8_t *block, unsigned pair_bits,
                                                                     const vq_avx2_consts *k)
{
    __m128i low, idx;
    unsigned plane;
    uint64_t planes;
    uint32_t four;
    uint16_t two;
    if (pair_bits == 8)
        return _mm_loadu_si128((const __m128i *)(const void *)block);
    low = _mm_loadl_epi64((const __m128i *)(const void *)block);
    idx = _mm_and_si128(_mm_unpacklo_epi64(low, _mm_srli_epi16(low, 4)), k->low4);
    /* The planes' 2 (p - 4) bytes, never past the block's end, in loads
     * of 2 and 4 bytes (a 6-byte memcpy became a call). */
    if (pair_bits == 5) {
        memcpy(&two, block + 8, 2);
        planes = two;
    } else {
        memcpy(&four, block + 8, 4);
        planes = four;
        if (pair_bits == 7) {
            memcpy(&two, block + 12, 2);
            planes |= (uint64_t)two << 32;
        }
    }
    for (plane = 0; plane + 4 < pair_bits; plane++) {
        __m128i bits = _mm_and_si128(_mm_shuffle_epi8(_mm_cvtsi64_si128((long long)planes), k->spread[plane]), k->bit);
        idx = _mm_or_si128(idx, _mm_and_si128(_mm_cmpeq_epi8(bits, k->bit), _mm_set1_epi8((char)(16 << plane))));
    }
    return idx;
}

/* The block's 32 int8 weights: first coordinates | second coordinates. */
static inline __attribute__((always_inline)) __m256i vq_avx2_weights(const uint8_t *block, unsigned pair_bits,
                                                                     const vq_avx2_consts *k)
{
    const unsigned chain = pair_bits == 8 ? 8 : 1u << (pair_bits - 4);
    const __m256i idx = _mm256_broadcastsi128_si256(vq_avx2_indices(block, pair_bits, k));
    __m256i i = pair_bits == 8 ? _mm256_and_si256(idx, k->low7) : idx;
    __m256i low = _mm256_shuffle_epi8(k->table[0], i), high = _mm256_setzero_si256();
    unsigned c;
    if (pair_bits == 8)
        high = _mm256_shuffle_epi8(k->table[8], i);
    for (c = 1; c < chain; c++) {
        i = _mm256_sub_epi8(i, k->sixteen);
        low = _mm256_xor_si256(low, _mm256_shuffle_epi8(k->table[c], i));
        if (pair_bits == 8)
            high = _mm256_xor_si256(high, _mm256_shuffle_epi8(k->table[8 + c], i));
    }
    return pair_bits == 8 ? _mm256_blendv_epi8(low, high, idx) : low;
}

/* Block b of row into acc[t] for tokens t0..t0+nt-1. */
static inline __attribute__((always_inline)) void vq_avx2_block(const uint8_t *row, const vq_avx2_consts *k,
                                                                unsigned pair_bits, const int8_t *q, const float *d,
                                                                size_t stride, size_t n_blocks, size_t b, size_t t0,
                                                                size_t nt, __m256 *acc)
{
    const __m256i w = vq_avx2_weights(row + b * 2 * (size_t)pair_bits, pair_bits, k);
    const __m256i magnitude = _mm256_sign_epi8(w, w);
    size_t t;
#pragma GCC unroll 4
    for (t = 0; t < nt; t++)
        acc[t] = pmpd_rotated_avx2_dot(w, magnitude, q + (t0 + t) * stride + b * PMPD_VQ_BLOCK,
                                       d[(t0 + t) * n_blocks + b], k->ones, acc[t]);
}

/* Row r times tokens t0..t0+nt-1 (nt <= 4), even and odd blocks in two
 * accumulators per token (two chains of dependent FMAs). */
static inline __attribute__((always_inline)) void vq_avx2_tile(const pmpd_vq_matrix *m, const vq_avx2_consts *k,
                                                               unsigned pair_bits, const int8_t *q, const float *d,
                                                               size_t n_blocks, size_t r, size_t t0, size_t nt,
                                                               float *y, size_t ldy)
{
    const uint8_t *row = m->index + r * m->row_bytes;
    const float out = m->scale[r] * k->unit;
    __m256 even[VQ_AVX2_TILE], odd[VQ_AVX2_TILE];
    size_t t;
#pragma GCC unroll 4
    for (t = 0; t < nt; t++)
        even[t] = odd[t] = _mm256_setzero_ps();
#define VQ_AVX2_BLOCK(b, acc) vq_avx2_block(row, k, pair_bits, q, d, m->padded, n_blocks, b, t0, nt, acc)
    PMPD_ROTATED_BLOCKS(n_blocks, VQ_AVX2_BLOCK, even, odd);
#undef VQ_AVX2_BLOCK
    for (t = 0; t < nt; t++)
        y[(t0 + t) * ldy + r] = out * pmpd_rotated_avx2_sum(_mm256_add_ps(even[t], odd[t]));
}

/* One width's loop, with pair_bits a constant after inlining. */
static inline __attribute__((always_inline)) void vq_avx2_rows(const pmpd_vq_matrix *m, unsigned pair_bits,
                                                               const void *act, size_t n_tokens, size_t row_begin,
                                                               size_t row_end, float *y, size_t ldy)
{
    const pmpd_rotated rotated = pmpd_vq_rotated(m);
    const int8_t *q;
    const float *d;
    const size_t n_blocks = m->padded / PMPD_VQ_BLOCK;
    vq_avx2_consts k;
    size_t r;
    q = pmpd_rotated_act_q(act);
    d = pmpd_rotated_act_d(&rotated, act, n_tokens);
    vq_avx2_tables(pair_bits, &k);
#define VQ_AVX2_CALL(t0, nt) vq_avx2_tile(m, &k, pair_bits, q, d, n_blocks, r, t0, nt, y, ldy)
    for (r = row_begin; r < row_end; r++)
        PMPD_ROTATED_TILES(n_tokens, VQ_AVX2_CALL);
#undef VQ_AVX2_CALL
}

PMPD_INTERNAL void pmpd_vq_matmul(const pmpd_vq_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                                  size_t row_end, float *y, size_t ldy)
{
#define VQ_AVX2_ROWS(p) vq_avx2_rows(m, p, act, n_tokens, row_begin, row_end, y, ldy)
    PMPD_VQ_DISPATCH(m->pair_bits, VQ_AVX2_ROWS);
#undef VQ_AVX2_ROWS
}

#undef VQ_AVX2_TILE
#undef VQ_AVX2_CHUNKS
#endif
