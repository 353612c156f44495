/* VQ product with AVX2 (x86 without AVX-512: Zen2/3, Intel client cores,
 * Gracemont; vq_avx512.c else).  The layout is vq.h's, unchanged.
 *
 * A step takes a pair of blocks b, b + 1 (32 pairs, 64 weights) of a row
 * with block b in the lower 128-bit lane and b + 1 in the upper one, so
 * that each operation on the indices serves 32 pairs, and looks them up
 * once per coordinate in tables holding 16 points' coordinate in both
 * lanes:
 *   index bytes: one load (p = 8, 32 bytes), one 16-byte broadcast (p =
 *     4: both blocks' 8 nibble bytes), else two 16-byte loads, block b's
 *     from its start and b + 1's ending at its end (never past the pair);
 *   p < 8: VPSHUFB puts each lane's 8 nibble bytes twice, VPSRLVQ shifts
 *     the copy of pairs 8-15 by 4 and a mask keeps the nibble; plane i
 *     (bit 4 + i of the index) becomes a byte mask by VPSHUFB (a plane
 *     byte to 8 bytes), AND with each byte's bit and VPCMPEQB;
 *   lookups: chunk c (points 16c..16c+15) by VPSHUFB on the nibbles, the
 *     2^(p-4) chunks merged by a tree of VPBLENDVB on the plane masks (bit
 *     4 first); p = 8 takes the bytes as they are (VPSHUFB reads bits 0-3
 *     and zeroes where bit 7 is set): bits 4-6 moved to bit 7 by VPSLLW
 *     are the masks of two trees of 8 chunks, looked up with bit 7 as
 *     stored and flipped, and OR'ed.
 * Per row and step that is 5 operations at p = 4, 13 at p = 5, 24 at
 * p = 6, 43 at p = 7 and 67 at p = 8, against the former kernel's 12 to
 * 96 (a row at a time, its lanes the two coordinates of one block: each
 * index operation served 16 pairs, and chunks went by a subtraction,
 * lookup and XOR each).  Every VPSHUFB loads its table (the tables are
 * its data operand, not its memory one): at p = 8 the 32 table loads per
 * row and step, the blends and the spills bound the loop (llvm-mca
 * znver3: the vector load pipes), and it runs no faster than the former
 * kernel's (measured on Zen5; p = 5..7 1.7-1.9x, p = 4 1.5x).
 *
 * The dot product: the activations are permuted to the weights' order
 * once per token and step (x[k]: coordinate k of block b | of block b +
 * 1) and serve every row of the tile.  Without VNNI, VPMADDUBSW(|x|,
 * sign(w, x)) (|x|, |w| <= 127: pairs fit int16) and VPMADDWD per
 * coordinate, added in int32, one conversion and FMA with the lanes'
 * block steps: 9 operations per row, token and step.  With AVX-VNNI (or
 * AVX512-VNNI with VL, in builds without PMPD_USE_AVX512) the tables hold
 * 128 + the coordinate and two VPDPBUSD start from -128 times each lane's
 * activations (per token): 4 operations.  Integer sums are exact either
 * way.
 *
 * Tiles: a one-token GEMV (decode) takes 4 rows, one from each quarter of
 * the caller's rows, so that the weights stream as 4 long sequential
 * streams (as the AVX-512 kernels do) and the permuted activations serve
 * 4 rows; more tokens (prefill) take 2 rows (halves) x 4 tokens, each
 * row's lookups serving 4 tokens. */
#include "pmpd_impl/weights/rotated/rotated_simd.h"
#include "pmpd_impl/weights/vq/vq.h"

#if PMPD_USE_AVX2 && !PMPD_USE_AVX512 /* else vq_avx512.c */
#include <immintrin.h>
#include <string.h>

#if defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))
#define VQ_AVX2_VNNI 1
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define VQ_AVX2_DPBUSD _mm256_dpbusd_epi32
#else
#define VQ_AVX2_DPBUSD _mm256_dpbusd_avx_epi32
#endif
#else
#define VQ_AVX2_VNNI 0
#endif

#define VQ_AVX2_CHUNKS 16   /* of 16 points, at 256 points */
#define VQ_AVX2_GEMV_ROWS 4 /* rows of a one-token tile */
#define VQ_AVX2_GEMM_ROWS 2 /* rows of a tile of PMPD_ROTATED_TILE tokens */
#define VQ_AVX2_INLINE static inline __attribute__((always_inline))

typedef struct vq_avx2_consts {
    __m256i table[VQ_AVX2_CHUNKS][2]; /* chunk c, coordinate k, in both lanes (+128 with VNNI) */
    __m256i nibbles;                  /* VPSHUFB: each lane's 8 nibble bytes, twice */
    __m256i shifts;                   /* VPSRLVQ: 4 for the qwords of pairs 8-15 */
    __m256i spread[3];                /* VPSHUFB: plane i's low byte to bytes 0-7, high byte to 8-15 */
    __m256i bit;                      /* byte j of a lane: 1 << (j % 8) */
    __m256i low4;                     /* 0x0F */
    float unit;
} vq_avx2_consts;

/* The byte of a lane's 16 loaded bytes where its block starts: block b + 1
 * is loaded as the 16 bytes ending at its end (p < 8; p = 8 loads both
 * blocks as 32 bytes, p = 4 broadcasts their 16). */
static unsigned vq_avx2_lane_start(unsigned pair_bits, unsigned lane)
{
    return lane && pair_bits < 8 ? 16 - 2 * pair_bits : 0;
}

static void vq_avx2_init(unsigned pair_bits, vq_avx2_consts *k)
{
    const int8_t *book = pmpd_vq_book(pair_bits);
    const unsigned chunks = 1u << (pair_bits - 4);
    int8_t bytes[32];
    long long shifts[4];
    unsigned c, coord, n, plane;
    for (c = 0; c < chunks; c++)
        for (coord = 0; coord < 2; coord++) {
            for (n = 0; n < 32; n++)
                bytes[n] = (int8_t)(book[2 * (16 * c + n % 16) + coord] + (VQ_AVX2_VNNI ? 128 : 0));
            k->table[c][coord] = _mm256_loadu_si256((const __m256i *)(const void *)bytes);
        }
    for (n = 0; n < 32; n++)
        bytes[n] = (int8_t)(vq_avx2_lane_start(pair_bits, n / 16) + n % 8);
    k->nibbles = _mm256_loadu_si256((const __m256i *)(const void *)bytes);
    for (plane = 0; plane < 3; plane++) {
        for (n = 0; n < 32; n++)
            bytes[n] = (int8_t)(vq_avx2_lane_start(pair_bits, n / 16) + 8 + 2 * plane + n % 16 / 8);
        k->spread[plane] = _mm256_loadu_si256((const __m256i *)(const void *)bytes);
    }
    for (n = 0; n < 32; n++)
        bytes[n] = (int8_t)(1u << (n % 8));
    k->bit = _mm256_loadu_si256((const __m256i *)(const void *)bytes);
    for (n = 0; n < 4; n++)
        shifts[n] = (long long)(n % 2) * 4;
    k->shifts = _mm256_loadu_si256((const __m256i *)(const void *)shifts);
    k->low4 = _mm256_set1_epi8(15);
    k->unit = pmpd_vq_unit(pair_bits);
}

/* Coordinate coord of chunks first..first+n-1 looked up by idx and merged
 * by mask[i] (bit 7: bit 4 + i of the index set), n a power of 2. */
VQ_AVX2_INLINE __m256i vq_avx2_tree(const vq_avx2_consts *k, unsigned coord, __m256i idx, const __m256i *mask,
                                    unsigned first, unsigned n)
{
    __m256i level[8];
    unsigned c, i, width;
#pragma GCC unroll 8
    for (c = 0; c < n; c++)
        level[c] = _mm256_shuffle_epi8(k->table[first + c][coord], idx);
    /* Halving widths rather than a shift in the condition: UBSan's shift
     * check there left GCC unable to apply the unroll annotations. */
#pragma GCC unroll 3
    for (i = 0, width = n / 2; width > 0; i++, width /= 2)
#pragma GCC unroll 4
        for (c = 0; c < width; c++)
            level[c] = _mm256_blendv_epi8(level[2 * c], level[2 * c + 1], mask[i]);
    return level[0];
}

/* The 64 weights of blocks b (lower lane) and b + 1 (upper), the lanes'
 * 16 index bytes at low and high (vq_avx2_lane_start): w[k] their
 * coordinate k. */
VQ_AVX2_INLINE void vq_avx2_weights(const uint8_t *low, const uint8_t *high, unsigned pair_bits,
                                    const vq_avx2_consts *k, __m256i *w)
{
    const __m128i first = _mm_loadu_si128((const __m128i *)(const void *)low);
    __m256i loaded, idx, mask[3];
    unsigned coord, plane;
    if (pair_bits == 8) {
        const __m256i stored = _mm256_inserti128_si256(_mm256_castsi128_si256(first),
                                                       _mm_loadu_si128((const __m128i *)(const void *)high), 1);
        const __m256i flipped = _mm256_xor_si256(stored, _mm256_set1_epi8(-128));
#pragma GCC unroll 3
        for (plane = 0; plane < 3; plane++)
            mask[plane] = _mm256_slli_epi16(stored, (int)(3 - plane));
#pragma GCC unroll 2
        for (coord = 0; coord < 2; coord++)
            w[coord] = _mm256_or_si256(vq_avx2_tree(k, coord, stored, mask, 0, 8),
                                       vq_avx2_tree(k, coord, flipped, mask, 8, 8));
        return;
    }
    loaded = pair_bits == 4 ? _mm256_broadcastsi128_si256(first)
                            : _mm256_inserti128_si256(_mm256_castsi128_si256(first),
                                                      _mm_loadu_si128((const __m128i *)(const void *)high), 1);
    idx = _mm256_and_si256(_mm256_srlv_epi64(_mm256_shuffle_epi8(loaded, k->nibbles), k->shifts), k->low4);
#pragma GCC unroll 3
    for (plane = 0; plane + 4 < pair_bits; plane++)
        mask[plane] = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(loaded, k->spread[plane]), k->bit), k->bit);
#pragma GCC unroll 2
    for (coord = 0; coord < 2; coord++)
        w[coord] = vq_avx2_tree(k, coord, idx, mask, 0, 1u << (pair_bits - 4));
}

/* One token's side of a step: its activations in the weights' order, and
 * what the dot product needs of them. */
typedef struct vq_avx2_input {
    __m256i x[2]; /* coordinate k: block b's 16 activations | block b + 1's */
#if VQ_AVX2_VNNI
    __m256i negbias; /* per dword lane: -128 * its activations summed over x[0], x[1] */
#else
    __m256i magnitude[2]; /* |x[k]| */
#endif
    __m256 d; /* per dword lane: its block's step */
} vq_avx2_input;

/* Blocks b, b + 1 (blocks 2) or b alone (blocks 1: the upper lane zero,
 * no read past block b) of one token, x and d at block b's. */
VQ_AVX2_INLINE void vq_avx2_input_make(const int8_t *x, const float *d, unsigned blocks, vq_avx2_input *in)
{
    const __m256i zero = _mm256_setzero_si256();
    const __m128 d0 = _mm_set1_ps(d[0]);
    unsigned coord;
#pragma GCC unroll 2
    for (coord = 0; coord < 2; coord++) {
        const __m128i lower = _mm_loadu_si128((const __m128i *)(const void *)(x + 16 * coord));
        in->x[coord] = blocks == 2 ? _mm256_inserti128_si256(
                                         _mm256_castsi128_si256(lower),
                                         _mm_loadu_si128((const __m128i *)(const void *)(x + 32 + 16 * coord)), 1)
                                   : _mm256_inserti128_si256(zero, lower, 0);
    }
    in->d = _mm256_insertf128_ps(_mm256_castps128_ps256(d0), blocks == 2 ? _mm_set1_ps(d[1]) : _mm_setzero_ps(), 1);
#if VQ_AVX2_VNNI
    {
        const __m256i bias = _mm256_set1_epi8(-128);
        in->negbias = _mm256_sub_epi32(zero, VQ_AVX2_DPBUSD(VQ_AVX2_DPBUSD(zero, bias, in->x[0]), bias, in->x[1]));
    }
#else
    in->magnitude[0] = _mm256_abs_epi8(in->x[0]);
    in->magnitude[1] = _mm256_abs_epi8(in->x[1]);
#endif
}

/* acc + d * (the weights w times the token's activations), exact in int32
 * before the float step. */
VQ_AVX2_INLINE __m256 vq_avx2_dot(const __m256i *w, const vq_avx2_input *in, __m256 acc)
{
#if VQ_AVX2_VNNI
    const __m256i sums = VQ_AVX2_DPBUSD(VQ_AVX2_DPBUSD(in->negbias, w[0], in->x[0]), w[1], in->x[1]);
#else
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i sums = _mm256_add_epi32(
        _mm256_madd_epi16(_mm256_maddubs_epi16(in->magnitude[0], _mm256_sign_epi8(w[0], in->x[0])), ones),
        _mm256_madd_epi16(_mm256_maddubs_epi16(in->magnitude[1], _mm256_sign_epi8(w[1], in->x[1])), ones));
#endif
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), in->d, acc);
}

/* A tile's accumulators, [row][token]. */
typedef __m256 vq_avx2_sums[VQ_AVX2_GEMV_ROWS][PMPD_ROTATED_TILE];

/* Blocks b, b + 1 (or b alone, blocks 1) of the rows r0 + i stride (i <
 * nr) against tokens t0..t0+nt-1 into acc. */
VQ_AVX2_INLINE void vq_avx2_step(const pmpd_vq_matrix *m, const vq_avx2_consts *k, unsigned pair_bits,
                                 const int8_t *q, const float *d, size_t n_blocks, size_t b, unsigned blocks,
                                 size_t r0, size_t stride, size_t nr, size_t t0, size_t nt, vq_avx2_sums acc)
{
    vq_avx2_input in[PMPD_ROTATED_TILE];
    size_t i, t;
#pragma GCC unroll 4
    for (t = 0; t < nt; t++)
        vq_avx2_input_make(q + (t0 + t) * m->padded + b * PMPD_VQ_BLOCK, d + (t0 + t) * n_blocks + b, blocks, &in[t]);
#pragma GCC unroll 4
    for (i = 0; i < nr; i++) {
        const uint8_t *block = m->index + (r0 + i * stride) * m->row_bytes + b * 2 * (size_t)pair_bits;
        __m256i w[2];
        if (blocks == 2) {
            vq_avx2_weights(block, block + 4 * pair_bits - 16, pair_bits, k, w);
        } else {
            /* A lone last block: its bytes alone, the upper lane's
             * weights meeting zero activations. */
            uint8_t copy[16] = {0};
            memcpy(copy, block, 2 * (size_t)pair_bits);
            vq_avx2_weights(copy, copy, pair_bits, k, w);
        }
#pragma GCC unroll 4
        for (t = 0; t < nt; t++)
            acc[i][t] = vq_avx2_dot(w, &in[t], acc[i][t]);
    }
}

/* Rows r0 + i stride (i < nr) times tokens t0..t0+nt-1. */
VQ_AVX2_INLINE void vq_avx2_tile(const pmpd_vq_matrix *m, const vq_avx2_consts *k, unsigned pair_bits,
                                 const int8_t *q, const float *d, size_t n_blocks, size_t r0, size_t stride,
                                 size_t nr, size_t t0, size_t nt, float *y, size_t ldy)
{
    vq_avx2_sums acc;
#define VQ_AVX2_STEP(b, blocks) vq_avx2_step(m, k, pair_bits, q, d, n_blocks, b, blocks, r0, stride, nr, t0, nt, acc)
#define VQ_AVX2_START(t) _mm256_setzero_ps()
    PMPD_ROTATED_AVX2_TILE(acc, VQ_AVX2_START, n_blocks, VQ_AVX2_STEP, m->scale, k->unit, r0, stride, nr, t0, nt, y,
                           ldy);
#undef VQ_AVX2_START
#undef VQ_AVX2_STEP
}

/* One width's loop, with pair_bits a constant after inlining. */
VQ_AVX2_INLINE void vq_avx2_rows(const pmpd_vq_matrix *m, unsigned pair_bits, const void *act, size_t n_tokens,
                                 size_t row_begin, size_t row_end, float *y, size_t ldy)
{
    const pmpd_rotated rotated = pmpd_vq_rotated(m);
    const int8_t *q = pmpd_rotated_act_q(act);
    const float *d = pmpd_rotated_act_d(&rotated, act, n_tokens);
    const size_t n_blocks = m->padded / PMPD_VQ_BLOCK;
    vq_avx2_consts k;
    vq_avx2_init(pair_bits, &k);
#define VQ_AVX2_TILE(r0, stride, nr, t0, nt) vq_avx2_tile(m, &k, pair_bits, q, d, n_blocks, r0, stride, nr, t0, nt, y, ldy)
    if (n_tokens == 1) /* the literal 1 leaves one single-token call per tile */
        PMPD_ROTATED_TILE_GRID(row_begin, row_end, VQ_AVX2_GEMV_ROWS, 1, PMPD_ROTATED_TOKENS_BY_4, VQ_AVX2_TILE);
    else
        PMPD_ROTATED_TILE_GRID(row_begin, row_end, VQ_AVX2_GEMM_ROWS, n_tokens, PMPD_ROTATED_TOKENS_BY_4, VQ_AVX2_TILE);
#undef VQ_AVX2_TILE
}

PMPD_INTERNAL void pmpd_vq_matmul(const pmpd_vq_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                                  size_t row_end, float *y, size_t ldy)
{
#define VQ_AVX2_ROWS(p) vq_avx2_rows(m, p, act, n_tokens, row_begin, row_end, y, ldy)
    PMPD_VQ_DISPATCH(m->pair_bits, VQ_AVX2_ROWS);
#undef VQ_AVX2_ROWS
}

#undef VQ_AVX2_VNNI
#undef VQ_AVX2_DPBUSD
#undef VQ_AVX2_CHUNKS
#undef VQ_AVX2_GEMV_ROWS
#undef VQ_AVX2_GEMM_ROWS
#undef VQ_AVX2_INLINE
#endif
