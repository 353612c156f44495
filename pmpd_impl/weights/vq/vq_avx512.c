/* VQ product with AVX-512 (F, BW, VNNI, VBMI and GFNI: PMPD_USE_AVX512),
 * the GEMV of decode and the token tiles of prefill; the AVX2 kernel
 * (vq_avx2.c) stays for AVX2-only builds.  The layout is vq.h's,
 * unchanged.
 *
 * A step takes a pair of blocks (32 pairs, 64 weights) of a row and builds
 * 64 index bytes, each pair's index twice (once per coordinate), 8 bytes
 * to a qword, whose low bits address the coordinate in a table of 128 +
 * the book's int8 values (unsigned, for VPDPBUSD as in NUQ's kernel):
 *   p = 4: the two blocks' 8 nibble bytes in each 128-bit lane, shifted by
 *          a nibble in the lanes of pairs 8-15 (VPSRLVQ), the coordinate
 *          as bit 4 (VPTERNLOGD): one VPERMB on [first | second] x 2;
 *   p = 5..7: the step's 4p bytes in one masked load; VPERMB gathers each
 *          qword's 8 nibble bytes (VPSRLVQ as above) and VPERMT2B the
 *          plane bytes of its 8 pairs into a bit matrix that
 *          GF2P8AFFINEQB transposes against one-hot bytes, pair j's plane
 *          bits landing at its bits 4 and up; p = 5 and 6 put the
 *          coordinate at bit p through a matrix row of ones, and look up
 *          64 entries by VPERMB (p = 5) or 128 by VPERMT2B (p = 6); p = 7
 *          looks up 128 entries of each coordinate (two VPERMT2B) and
 *          blends by the byte's coordinate;
 *   p = 8: the 32 index bytes in both 256-bit halves; four VPERMT2B over
 *          the four 128-entry tables (coordinate, index bit 7), blended by
 *          the coordinate and by bit 7 (VPMOVB2M).
 * That is 6 vector operations per row and 64 weights at p = 4 (against
 * the AVX2 kernel's 2 x 10), 9 at p = 5 and 6, 11 at p = 7 and p = 8
 * (against 2 x 22 to 2 x 40: a lookup, subtraction and XOR per chunk of 16
 * points), the dot product, conversion and FMA included.  Most of a row
 * goes in wide steps of 64 index bytes instead (3, 6 and 5.5 operations,
 * below); the pair steps take its end.  Tiles, steps and the activations permuted into the
 * indices' byte order are rotated_simd.h's. */
#include "pmpd_impl/weights/rotated/rotated_simd.h"
#include "pmpd_impl/weights/vq/vq.h"

#if PMPD_USE_AVX512
#include <immintrin.h>
#include <string.h>

#define VQ_AVX512_TABLES 8 /* of 64 bytes, at 256 points */
#define VQ_AVX512_SELECT 0xCA /* VPTERNLOGD: a ? b : c, bitwise */
#define VQ_AVX512_WIDE_BLOCKS(pair_bits) ((pair_bits) == 4 ? 8u : 4u) /* per wide step */

#if defined(__GNUC__)
#define VQ_AVX512_INLINE static inline __attribute__((always_inline))
#else
#define VQ_AVX512_INLINE static inline
#endif

typedef struct vq_avx512_consts {
    __m512i table[VQ_AVX512_TABLES]; /* 128 + coordinate (vq_avx512_entry) */
    __m512i coordinate_table[2];     /* p <= 6, wide steps: 128 + coordinate c of point n % 2^p */
    __m512i wide_nibbles;            /* p = 5..7, wide steps: VPERMB, block s's nibble bytes to lane s */
    __m512i wide_shifts;             /* VPSRLVQ: 4 for each lane's pairs 8-15 */
    __m512i wide_planes;             /* VPERMB: each qword's bit matrix of plane bytes */
    uint64_t wide_rows;              /* the matrix bytes that hold a plane (others zero) */
    __m512i shifts;                  /* VPSRLVQ: 4 for the qwords of pairs 8-15 */
    __m512i low4;                    /* 0x0F */
    __m512i coordinate;              /* p = 4: 0x10 in the second coordinates' bytes */
    __m512i nibbles;                 /* VPERMB: each qword's 8 nibble bytes */
    __m512i planes;                  /* VPERMT2B: each qword's bit matrix */
    __m512i ones;                    /* VPERMT2B's second source: byte 0 zero, byte 1 0xFF */
    __m512i one_hot;                 /* byte p: 1 << (its pair % 8) */
    __m512i order;                   /* VPERMB: the activation under each byte */
    __m512i lanes;                   /* VPERMPS: the block of each dword lane */
    float unit;
} vq_avx512_consts;

/* The block (0, 1), pair (0..15) and coordinate (0, 1) of byte p of a
 * step's 64 weights: qword (block, pair / 8, coordinate) below 8 index
 * bits, a 16-byte block per half-lane at 8. */
static void vq_avx512_position(unsigned pair_bits, unsigned p, unsigned *block, unsigned *pair,
                               unsigned *coordinate)
{
    const unsigned qword = p / 8, lane = p / 16;
    if (pair_bits == 8) {
        *block = lane % 2;
        *coordinate = lane / 2;
        *pair = p % 16;
    } else {
        *block = qword % 2;
        *coordinate = qword / 4;
        *pair = (qword / 2) % 2 * 8 + p % 8;
    }
}

/* The point index and coordinate of byte n of table k:
 *   p = 4..6: entries E = 64 k + n of [first coordinates | second], bit p
 *             the coordinate (p = 4 repeats its 32 entries);
 *   p = 7, 8: table k holds one coordinate's points 64 (k % t)..+63, t =
 *             2 or 4 tables per coordinate. */
static void vq_avx512_entry(unsigned pair_bits, unsigned k, unsigned n, unsigned *point, unsigned *coordinate)
{
    if (pair_bits <= 6) {
        const unsigned e = 64 * k + n;
        *coordinate = e >> pair_bits & 1u;
        *point = e & ((1u << pair_bits) - 1);
    } else {
        const unsigned per = 1u << (pair_bits - 6);
        *coordinate = k / per;
        *point = 64 * (k % per) + n;
    }
}

/* The byte, counted from a step's first block, that holds bit 4 + plane
 * of the indices of pairs 8 half..8 half + 7 of block (p = 5..7). */
static unsigned vq_avx512_plane_byte(unsigned pair_bits, unsigned block, unsigned plane, unsigned half)
{
    return 2 * pair_bits * block + 8 + 2 * plane + half;
}

/* The lookup tables: table[] (vq_avx512_entry) and each coordinate's
 * points repeated over 64 bytes (p <= 6). */
static void vq_avx512_init_tables(unsigned pair_bits, vq_avx512_consts *k)
{
    const int8_t *book = pmpd_vq_book(pair_bits);
    const unsigned tables = pair_bits <= 5 ? 1 : 1u << (pair_bits - 5);
    const unsigned repeat = 1u << (pair_bits < 6 ? pair_bits : 6);
    unsigned char bytes[64];
    unsigned t, n, point, coord;
    for (t = 0; t < VQ_AVX512_TABLES; t++) {
        memset(bytes, 0, sizeof bytes);
        for (n = 0; t < tables && n < 64; n++) {
            vq_avx512_entry(pair_bits, t, n, &point, &coord);
            bytes[n] = (unsigned char)(128 + book[2 * point + coord]);
        }
        k->table[t] = _mm512_loadu_si512((const void *)bytes);
    }
    for (t = 0; t < 2; t++) {
        for (n = 0; n < 64; n++)
            bytes[n] = (unsigned char)(128 + book[2 * (n % repeat) + t]);
        k->coordinate_table[t] = _mm512_loadu_si512((const void *)bytes);
    }
}

/* The pair steps' constants, bytes in vq_avx512_position's order. */
static void vq_avx512_init_pairs(unsigned pair_bits, vq_avx512_consts *k)
{
    unsigned char nibbles[64], planes[64], one_hot[64], order[64], coordinate[64];
    unsigned char ones[64] = {0, 0xFF};
    int32_t lanes[16];
    long long shifts[8];
    unsigned p, block, pair, coord;
    for (p = 0; p < 64; p++) {
        /* Matrix byte p % 8 of a qword gives bit 7 - p % 8 of its bytes. */
        const unsigned bit = 7 - p % 8;
        vq_avx512_position(pair_bits, p, &block, &pair, &coord);
        order[p] = (unsigned char)(32 * block + 16 * coord + pair);
        coordinate[p] = (unsigned char)(coord << 4);
        one_hot[p] = (unsigned char)(1u << (pair % 8));
        nibbles[p] = (unsigned char)(2 * pair_bits * block + pair % 8);
        planes[p] = 64; /* VPERMT2B's second source, ones: byte 0 is zero */
        if (bit >= 4 && bit < pair_bits)
            planes[p] = (unsigned char)vq_avx512_plane_byte(pair_bits, block, bit - 4, pair / 8);
        else if (bit == pair_bits && pair_bits <= 6 && coord)
            planes[p] = 65; /* ones' byte 1, 0xFF: the coordinate bit */
    }
    for (p = 0; p < 16; p++) {
        vq_avx512_position(pair_bits, 4 * p, &block, &pair, &coord);
        lanes[p] = (int32_t)block;
    }
    for (p = 0; p < 8; p++)
        shifts[p] = (long long)(p / 2 % 2) * 4;
    k->shifts = _mm512_loadu_si512((const void *)shifts);
    k->coordinate = _mm512_loadu_si512((const void *)coordinate);
    k->nibbles = _mm512_loadu_si512((const void *)nibbles);
    k->planes = _mm512_loadu_si512((const void *)planes);
    k->ones = _mm512_loadu_si512((const void *)ones);
    k->one_hot = _mm512_loadu_si512((const void *)one_hot);
    k->order = _mm512_loadu_si512((const void *)order);
    k->lanes = _mm512_loadu_si512((const void *)lanes);
}

/* The wide steps' gathers at p = 5..7: lane s of 4 blocks holds block
 * s's 16 indices in pair order (byte j: pair j); a qword's bit matrix is
 * that of the pair steps, its rows zero where no plane is. */
static void vq_avx512_init_wide(unsigned pair_bits, vq_avx512_consts *k)
{
    unsigned char nibbles[64], planes[64];
    long long shifts[8];
    unsigned p;
    k->wide_rows = 0;
    for (p = 0; p < 64; p++) {
        const unsigned s = p / 16, j = p % 16, bit = 7 - p % 8;
        nibbles[p] = (unsigned char)(2 * pair_bits * s + j % 8);
        planes[p] = 0;
        if (bit >= 4 && bit < pair_bits) {
            planes[p] = (unsigned char)vq_avx512_plane_byte(pair_bits, s, bit - 4, j / 8);
            k->wide_rows |= UINT64_C(1) << p;
        }
    }
    for (p = 0; p < 8; p++)
        shifts[p] = (long long)(p % 2) * 4;
    k->wide_nibbles = _mm512_loadu_si512((const void *)nibbles);
    k->wide_planes = _mm512_loadu_si512((const void *)planes);
    k->wide_shifts = _mm512_loadu_si512((const void *)shifts);
}

static void vq_avx512_init(unsigned pair_bits, vq_avx512_consts *k)
{
    vq_avx512_init_tables(pair_bits, k);
    vq_avx512_init_pairs(pair_bits, k);
    vq_avx512_init_wide(pair_bits, k);
    k->low4 = _mm512_set1_epi8(15);
    k->unit = pmpd_vq_unit(pair_bits);
}

static inline uint64_t vq_avx512_load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The 64 index bytes of the pair of blocks at block (blocks == 1: the
 * first alone; the other half's bytes meet zero activations), in
 * vq_avx512_position's order, with the coordinate at bit p (p <= 6).
 * Unless bounded, 5 to 7 bits load 32 bytes from block (past the step's
 * 4p): from RAM a masked load of the step's bytes alone streamed at about
 * half the speed (vq2.5 to vq3.5 at 9-10 GB/s against 16-19, one Zen5
 * thread). */
VQ_AVX512_INLINE __m512i vq_avx512_indices(const uint8_t *block, unsigned pair_bits, unsigned blocks,
                                           unsigned bounded, const vq_avx512_consts *k)
{
    const unsigned bytes = 2 * pair_bits * blocks;
    __m512i loaded, nibbles, planes;
    if (pair_bits == 8)
        return blocks == 2 ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)block))
                           : _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)block));
    if (pair_bits == 4) {
        nibbles = blocks == 2 ? _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)block))
                              : _mm512_set1_epi64((long long)vq_avx512_load64(block));
        return _mm512_ternarylogic_epi32(k->low4, _mm512_srlv_epi64(nibbles, k->shifts), k->coordinate,
                                         VQ_AVX512_SELECT);
    }
    loaded = bounded ? _mm512_maskz_loadu_epi8((__mmask64)((UINT64_C(1) << bytes) - 1), (const void *)block)
                     : _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)block));
    nibbles = _mm512_srlv_epi64(_mm512_permutexvar_epi8(k->nibbles, loaded), k->shifts);
    planes = _mm512_gf2p8affine_epi64_epi8(k->one_hot, _mm512_permutex2var_epi8(loaded, k->planes, k->ones), 0);
    return _mm512_ternarylogic_epi32(k->low4, nibbles, planes, VQ_AVX512_SELECT);
}

/* The 64 biased weights the indices address. */
VQ_AVX512_INLINE __m512i vq_avx512_lookup(__m512i idx, unsigned pair_bits, const vq_avx512_consts *k)
{
    const __mmask64 second = (__mmask64)0xFFFFFFFF00000000u;
    const __m512i *t = k->table;
    __m512i low, high;
    if (pair_bits <= 5)
        return _mm512_permutexvar_epi8(idx, t[0]);
    if (pair_bits == 6)
        return _mm512_permutex2var_epi8(t[0], idx, t[1]);
    if (pair_bits == 7)
        return _mm512_mask_blend_epi8(second, _mm512_permutex2var_epi8(t[0], idx, t[1]),
                                      _mm512_permutex2var_epi8(t[2], idx, t[3]));
    low = _mm512_mask_blend_epi8(second, _mm512_permutex2var_epi8(t[0], idx, t[1]),
                                 _mm512_permutex2var_epi8(t[4], idx, t[5]));
    high = _mm512_mask_blend_epi8(second, _mm512_permutex2var_epi8(t[2], idx, t[3]),
                                  _mm512_permutex2var_epi8(t[6], idx, t[7]));
    return _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), low, high);
}

/* One pair of blocks from b (or the last lone block) of the rows r0 +
 * i stride, i < nr, against tokens t0..t0+nt-1 into acc[i][token]
 * (bounded: no load past the step's bytes). */
VQ_AVX512_INLINE void vq_avx512_step(const pmpd_vq_matrix *m, const vq_avx512_consts *k, unsigned pair_bits,
                                     const int8_t *q, const float *d, size_t n_blocks, size_t b, unsigned blocks,
                                     unsigned bounded, size_t r0, size_t stride, size_t nr, size_t t0, size_t nt,
                                     pmpd_rotated_avx512_sums acc)
{
    pmpd_rotated_avx512_input in[PMPD_ROTATED_AVX512_TOKENS];
    size_t i, t;
#pragma GCC unroll 2
    for (t = 0; t < nt; t++)
        in[t] = pmpd_rotated_avx512_input_pair(q + (t0 + t) * m->padded + b * PMPD_VQ_BLOCK,
                                               d + (t0 + t) * n_blocks + b, blocks, k->order, k->lanes);
#pragma GCC unroll 4
    for (i = 0; i < nr; i++) {
        const uint8_t *block = m->index + (r0 + i * stride) * m->row_bytes + b * 2 * (size_t)pair_bits;
        const __m512i w = vq_avx512_lookup(vq_avx512_indices(block, pair_bits, blocks, bounded, k), pair_bits, k);
#pragma GCC unroll 2
        for (t = 0; t < nt; t++)
            acc[i][t] = pmpd_rotated_avx512_dot(w, &in[t], acc[i][t]);
    }
}

/* Wide steps: 64 index bytes of a row, 8 blocks at p = 4, else 4
 * (rotated_simd.h's wide input, whose activation k of a block is VQ's
 * coordinate k / 16 of pair k % 16):
 *   p = 4: lane s holds blocks 2s and 2s + 1 as stored (a byte: pair j's
 *          index in the low nibble, pair j + 8's in the high one), looked
 *          up as they are and shifted by 4 in tables of each coordinate
 *          repeated over 16 entries: 4 lookups, no clearing, one conversion
 *          and FMA per 256 weights (3 operations per row and 64 weights
 *          against 6);
 *   p = 5..7: lane s gets block s's 16 indices by the pair step's gathers
 *          (now per 4 blocks), looked up once per coordinate: 6 operations
 *          per 64 weights against 9-11;
 *   p = 8: lane s holds block s as stored, looked up in both coordinates'
 *          tables: 5.5 operations per 64 weights against 11. */
VQ_AVX512_INLINE __m512i vq_avx512_wide_indices(__m512i stored, const vq_avx512_consts *k)
{
    const __m512i nibbles = _mm512_srlv_epi64(_mm512_permutexvar_epi8(k->wide_nibbles, stored), k->wide_shifts);
    const __m512i rows = _mm512_maskz_permutexvar_epi8(_cvtu64_mask64(k->wide_rows), k->wide_planes, stored);
    return _mm512_ternarylogic_epi32(k->low4, nibbles, _mm512_gf2p8affine_epi64_epi8(k->one_hot, rows, 0),
                                     VQ_AVX512_SELECT);
}

VQ_AVX512_INLINE void vq_avx512_wide_weights(const uint8_t *indices, unsigned pair_bits, const vq_avx512_consts *k,
                                             __m512i *w)
{
    const __m512i stored = pmpd_rotated_avx512_wide_codes(indices);
    const __m512i *t = k->table;
    if (pair_bits == 4) {
        const __m512i high = _mm512_srli_epi64(stored, 4);
        w[0] = _mm512_permutexvar_epi8(stored, k->coordinate_table[0]);
        w[1] = _mm512_permutexvar_epi8(high, k->coordinate_table[0]);
        w[2] = _mm512_permutexvar_epi8(stored, k->coordinate_table[1]);
        w[3] = _mm512_permutexvar_epi8(high, k->coordinate_table[1]);
    } else if (pair_bits <= 6) {
        const __m512i idx = vq_avx512_wide_indices(stored, k);
        w[0] = _mm512_permutexvar_epi8(idx, k->coordinate_table[0]);
        w[1] = _mm512_permutexvar_epi8(idx, k->coordinate_table[1]);
    } else if (pair_bits == 7) {
        const __m512i idx = vq_avx512_wide_indices(stored, k);
        w[0] = _mm512_permutex2var_epi8(t[0], idx, t[1]);
        w[1] = _mm512_permutex2var_epi8(t[2], idx, t[3]);
    } else {
        const __mmask64 upper = _mm512_movepi8_mask(stored);
        w[0] = _mm512_mask_blend_epi8(upper, _mm512_permutex2var_epi8(t[0], stored, t[1]),
                                      _mm512_permutex2var_epi8(t[2], stored, t[3]));
        w[1] = _mm512_mask_blend_epi8(upper, _mm512_permutex2var_epi8(t[4], stored, t[5]),
                                      _mm512_permutex2var_epi8(t[6], stored, t[7]));
    }
}

/* The wide step from block b of the tile's rows into acc. */
VQ_AVX512_INLINE void vq_avx512_wide_step(const pmpd_vq_matrix *m, const vq_avx512_consts *k, unsigned pair_bits,
                                          const int8_t *q, const float *d, size_t n_blocks, size_t b, size_t r0,
                                          size_t stride, size_t nr, size_t t0, size_t nt, pmpd_rotated_avx512_sums acc)
{
    const unsigned blocks = VQ_AVX512_WIDE_BLOCKS(pair_bits);
    pmpd_rotated_avx512_wide in[PMPD_ROTATED_AVX512_TOKENS];
    size_t i, t;
#pragma GCC unroll 2
    for (t = 0; t < nt; t++)
        pmpd_rotated_avx512_wide_input(q + (t0 + t) * m->padded + b * PMPD_VQ_BLOCK, d + (t0 + t) * n_blocks + b,
                                       blocks, &in[t]);
#pragma GCC unroll 4
    for (i = 0; i < nr; i++) {
        __m512i w[PMPD_ROTATED_AVX512_WIDE];
        vq_avx512_wide_weights(m->index + (r0 + i * stride) * m->row_bytes + b * 2 * (size_t)pair_bits, pair_bits, k,
                               w);
#pragma GCC unroll 2
        for (t = 0; t < nt; t++)
            acc[i][t] = pmpd_rotated_avx512_wide_dot(w, blocks, &in[t], acc[i][t]);
    }
}

/* The blocks b from which 32 bytes lie inside the row: 4p-byte pairs
 * starting there may be loaded by a full 32-byte load. */
static inline size_t vq_avx512_open_blocks(const pmpd_vq_matrix *m, unsigned pair_bits)
{
    return m->row_bytes < 32 ? 0 : (m->row_bytes - 32) / (2 * pair_bits) + 1;
}

/* Rows r0 + i stride (i < nr <= 4) times tokens t0..t0+nt-1 (nt <= 2). */
VQ_AVX512_INLINE void vq_avx512_tile(const pmpd_vq_matrix *m, const vq_avx512_consts *k, unsigned pair_bits,
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
    /* Wide steps while their 64 bytes lie inside the row (at p = 5..7
     * they pass their 4 blocks' 8p), then pairs. */
    for (; b + VQ_AVX512_WIDE_BLOCKS(pair_bits) <= n_blocks && b * 2 * pair_bits + 64 <= m->row_bytes;
         b += VQ_AVX512_WIDE_BLOCKS(pair_bits))
        vq_avx512_wide_step(m, k, pair_bits, q, d, n_blocks, b, r0, stride, nr, t0, nt, acc);
#define VQ_AVX512_STEP(b, blocks, bounded)                                                                           \
    vq_avx512_step(m, k, pair_bits, q, d, n_blocks, b, blocks, bounded, r0, stride, nr, t0, nt, acc)
    PMPD_ROTATED_AVX512_STEPS(b, n_blocks, vq_avx512_open_blocks(m, pair_bits), VQ_AVX512_STEP);
#undef VQ_AVX512_STEP
    PMPD_ROTATED_STORE(acc, _mm512_reduce_add_ps, m->scale, k->unit, r0, stride, nr, t0, nt, y, ldy);
}

/* One width's loop, with pair_bits a constant after inlining. */
VQ_AVX512_INLINE void vq_avx512_rows(const pmpd_vq_matrix *m, unsigned pair_bits, const void *act, size_t n_tokens,
                                     size_t row_begin, size_t row_end, float *y, size_t ldy)
{
    const pmpd_rotated rotated = pmpd_vq_rotated(m);
    const int8_t *q = pmpd_rotated_act_q(act);
    const float *d = pmpd_rotated_act_d(&rotated, act, n_tokens);
    const size_t n_blocks = m->padded / PMPD_VQ_BLOCK;
    vq_avx512_consts k;
    vq_avx512_init(pair_bits, &k);
#define VQ_AVX512_TILE(r0, stride, nr, t0, nt)                                                                       \
    vq_avx512_tile(m, &k, pair_bits, q, d, n_blocks, r0, stride, nr, t0, nt, y, ldy)
    PMPD_ROTATED_TILE_GRID(row_begin, row_end, PMPD_ROTATED_AVX512_ROWS, n_tokens, PMPD_ROTATED_TOKENS_BY_2,
                           VQ_AVX512_TILE);
#undef VQ_AVX512_TILE
}

PMPD_INTERNAL void pmpd_vq_matmul(const pmpd_vq_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                                  size_t row_end, float *y, size_t ldy)
{
#define VQ_AVX512_ROWS(p) vq_avx512_rows(m, p, act, n_tokens, row_begin, row_end, y, ldy)
    PMPD_VQ_DISPATCH(m->pair_bits, VQ_AVX512_ROWS);
#undef VQ_AVX512_ROWS
}

#undef VQ_AVX512_TABLES
#undef VQ_AVX512_SELECT
#undef VQ_AVX512_WIDE_BLOCKS
#undef VQ_AVX512_INLINE
#endif
