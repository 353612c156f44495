/* SIMD steps shared by the kernels of the rotated formats on the
 * int8-prepared input (rotated.h; nuq/nuq_avx2.c, nuq/nuq_avx512.c,
 * nuq/nuq_neon.c, vq/vq_avx2.c, vq/vq_neon.c, tcq/tcq_avx2.c): the token
 * tiles, and what follows a block's weight lookup, the exact int8 products
 * with the activations and the float accumulation. */
#ifndef PMPD_WEIGHTS_ROTATED_SIMD_H
#define PMPD_WEIGHTS_ROTATED_SIMD_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd_impl/core/config.h"

/* The token loops of a tile of rows: TILE(r0, stride, nr, t0, nt) for the
 * tokens [0, n_tokens) in tiles of 4 (PMPD_ROTATED_TILE) or of 2, the
 * last tile's nt a constant at its call so that the tile's loops unroll. */
#define PMPD_ROTATED_TILE 4
#define PMPD_ROTATED_TOKENS_BY_4(n_tokens, TILE, r0, stride, nr)                                                   \
    do {                                                                                                           \
        size_t pmpd_t0_;                                                                                           \
        for (pmpd_t0_ = 0; pmpd_t0_ + PMPD_ROTATED_TILE <= (n_tokens); pmpd_t0_ += PMPD_ROTATED_TILE)              \
            TILE(r0, stride, nr, pmpd_t0_, PMPD_ROTATED_TILE);                                                     \
        switch ((n_tokens) - pmpd_t0_) {                                                                           \
        case 3: TILE(r0, stride, nr, pmpd_t0_, 3); break;                                                          \
        case 2: TILE(r0, stride, nr, pmpd_t0_, 2); break;                                                          \
        case 1: TILE(r0, stride, nr, pmpd_t0_, 1); break;                                                          \
        default: break;                                                                                            \
        }                                                                                                          \
    } while (0)
#define PMPD_ROTATED_TOKENS_BY_2(n_tokens, TILE, r0, stride, nr)                                                   \
    do {                                                                                                           \
        size_t pmpd_t0_;                                                                                           \
        for (pmpd_t0_ = 0; pmpd_t0_ + 2 <= (n_tokens); pmpd_t0_ += 2)                                              \
            TILE(r0, stride, nr, pmpd_t0_, 2);                                                                     \
        if (pmpd_t0_ < (n_tokens))                                                                                 \
            TILE(r0, stride, nr, pmpd_t0_, 1);                                                                     \
    } while (0)

/* The block loop of a kernel's tile: BLOCK(b, acc) for the blocks
 * [0, n_blocks), even blocks into the accumulators even and odd ones into
 * odd (two chains of dependent FMAs). */
#define PMPD_ROTATED_BLOCKS(n_blocks, BLOCK, even, odd)                                                            \
    do {                                                                                                           \
        size_t pmpd_b_;                                                                                            \
        for (pmpd_b_ = 0; pmpd_b_ + 2 <= (n_blocks); pmpd_b_ += 2) {                                               \
            BLOCK(pmpd_b_, even);                                                                                  \
            BLOCK(pmpd_b_ + 1, odd);                                                                               \
        }                                                                                                          \
        if (pmpd_b_ < (n_blocks))                                                                                  \
            BLOCK(pmpd_b_, even);                                                                                  \
    } while (0)

/* Every tile of a kernel's rows and tokens: TOKENS(n_tokens, TILE, r0,
 * stride, nr) (PMPD_ROTATED_TOKENS_BY_4 or _BY_2) for the rows r0 + i
 * stride, i < nr: row j of each of parts parts of [row_begin, row_end) (nr
 * = parts), then the rows left over one at a time (nr 1).  Rows from
 * different parts read the weights as parts long sequential streams, as
 * the q4 kernel does (x86_avx512/qmatmul.c): nuq4 streamed 15 GB/s from
 * RAM on one Zen5 thread with 4 adjacent rows (4 streams of one row each),
 * 20 with software prefetch one tile ahead, 34 quartered (where
 * prefetching gained nothing). */
#define PMPD_ROTATED_ROWS 4 /* rows of a tile, the parts of most kernels */
#define PMPD_ROTATED_TILE_GRID(row_begin, row_end, parts, n_tokens, TOKENS, TILE)                                  \
    do {                                                                                                           \
        const size_t pmpd_part_ = ((row_end) - (row_begin)) / (parts);                                             \
        size_t pmpd_r_;                                                                                            \
        for (pmpd_r_ = (row_begin); pmpd_r_ < (row_begin) + pmpd_part_; pmpd_r_++)                                 \
            TOKENS(n_tokens, TILE, pmpd_r_, pmpd_part_, (parts));                                                  \
        for (pmpd_r_ = (row_begin) + (parts) * pmpd_part_; pmpd_r_ < (row_end); pmpd_r_++)                         \
            TOKENS(n_tokens, TILE, pmpd_r_, 0, 1);                                                                 \
    } while (0)

/* The end of every tile: y[(t0 + t) * ldy + r] = scale[r] * unit *
 * SUM(acc[i][t]) for the tile's rows r = r0 + i stride (i < nr) and tokens
 * t < nt, SUM the ISA's sum of a vector's lanes. */
#define PMPD_ROTATED_STORE(acc, SUM, scale, unit, r0, stride, nr, t0, nt, y, ldy)                                  \
    do {                                                                                                           \
        size_t pmpd_i_, pmpd_t_;                                                                                   \
        _Pragma("GCC unroll 4") for (pmpd_i_ = 0; pmpd_i_ < (nr); pmpd_i_++)                                       \
            _Pragma("GCC unroll 4") for (pmpd_t_ = 0; pmpd_t_ < (nt); pmpd_t_++)                                   \
                (y)[((t0) + pmpd_t_) * (ldy) + (r0) + pmpd_i_ * (stride)] =                                        \
                    (scale)[(r0) + pmpd_i_ * (stride)] * (unit) * SUM((acc)[pmpd_i_][pmpd_t_]);                    \
    } while (0)

#if PMPD_USE_AVX2
#include <immintrin.h>

static inline float pmpd_rotated_avx2_sum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* A tile of the AVX2 kernels, which go over the blocks in pairs (one per
 * 128-bit lane): acc[i][t] from START(t0 + t) for i < nr, t < nt, STEP(b,
 * 2) for each pair of blocks from b, STEP(b, 1) for a last lone block,
 * then the store. */
#define PMPD_ROTATED_AVX2_TILE(acc, START, n_blocks, STEP, scale, unit, r0, stride, nr, t0, nt, y, ldy)            \
    do {                                                                                                           \
        size_t pmpd_zi_, pmpd_zt_, pmpd_b_;                                                                        \
        _Pragma("GCC unroll 4") for (pmpd_zi_ = 0; pmpd_zi_ < (nr); pmpd_zi_++)                                    \
            _Pragma("GCC unroll 4") for (pmpd_zt_ = 0; pmpd_zt_ < (nt); pmpd_zt_++)                                \
                (acc)[pmpd_zi_][pmpd_zt_] = START((t0) + pmpd_zt_);                                                \
        for (pmpd_b_ = 0; pmpd_b_ + 2 <= (n_blocks); pmpd_b_ += 2)                                                 \
            STEP(pmpd_b_, 2);                                                                                      \
        if (pmpd_b_ < (n_blocks))                                                                                  \
            STEP(pmpd_b_, 1);                                                                                      \
        PMPD_ROTATED_STORE(acc, pmpd_rotated_avx2_sum, scale, unit, r0, stride, nr, t0, nt, y, ldy);               \
    } while (0)

/* acc + d * (the 32 int8 weights w times the 32 int8 activations at x,
 * exactly in int32: |w|, |x| <= 127, so VPMADDUBSW's pairs fit int16);
 * ones: int16 ones for VPMADDWD. */
static inline __attribute__((always_inline)) __m256 pmpd_rotated_avx2_dot(__m256i w, __m256i magnitude,
                                                                          const int8_t *x, float d, __m256i ones,
                                                                          __m256 acc)
{
    const __m256i xs = _mm256_loadu_si256((const __m256i *)(const void *)x);
    const __m256i sums = _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(xs, w)), ones);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_set1_ps(d), acc);
}
#endif

#if PMPD_USE_AVX512
/* The AVX-512 kernels' tiles (nuq/nuq_avx512.c, vq/vq_avx512.c): 4 rows x
 * 2 tokens (PMPD_ROTATED_TILE_GRID, PMPD_ROTATED_TOKENS_BY_2), a step a
 * pair of blocks. */
#define PMPD_ROTATED_AVX512_ROWS PMPD_ROTATED_ROWS
#define PMPD_ROTATED_AVX512_TOKENS 2

/* STEP(b, blocks, bounded) for the blocks [first, n_blocks) in pairs from
 * b (blocks 2), an odd last one alone (blocks 1); bounded is 0 for the
 * pairs that start below open_blocks, which may load past their own bytes
 * (a kernel's full-width load, where a masked one halved VQ's speed from
 * RAM), and 1 for those that may not (the row's last bytes). */
#define PMPD_ROTATED_AVX512_STEPS(first, n_blocks, open_blocks, STEP)                                              \
    do {                                                                                                           \
        size_t pmpd_b_;                                                                                            \
        for (pmpd_b_ = (first); pmpd_b_ + 2 <= (n_blocks) && pmpd_b_ < (open_blocks); pmpd_b_ += 2)                \
            STEP(pmpd_b_, 2, 0);                                                                                   \
        for (; pmpd_b_ + 2 <= (n_blocks); pmpd_b_ += 2)                                                            \
            STEP(pmpd_b_, 2, 1);                                                                                   \
        if (pmpd_b_ < (n_blocks))                                                                                  \
            STEP(pmpd_b_, 1, 1);                                                                                   \
    } while (0)

/* A tile's accumulators, [row][token]. */
typedef __m512 pmpd_rotated_avx512_sums[PMPD_ROTATED_AVX512_ROWS][PMPD_ROTATED_AVX512_TOKENS];

/* One token's side of a pair of blocks (64 rotated columns) in an AVX-512
 * kernel, built once per tile and used by each of its rows.  VPDPBUSD
 * multiplies unsigned by signed bytes, so the kernels look up weights
 * biased by +128 (unsigned) and start each product from -128 times the sum
 * of its lane's four activations: the int32 lanes are then the exact
 * signed products, whatever the order the kernel keeps its bytes in. */
typedef struct pmpd_rotated_avx512_input {
    __m512i x;       /* the 64 int8 activations in the kernel's byte order */
    __m512i negbias; /* per dword lane: -128 * the sum of its 4 activations */
    __m512 d;        /* per dword lane: its block's activation step */
} pmpd_rotated_avx512_input;

/* Blocks b and b + 1 of one token (x and d at block b's activations and
 * step), or with blocks == 1 block b alone, the other half zero (no read
 * past the block).  order: VPERMB index, the activation under each byte of
 * the kernel's weights; lanes: VPERMPS index, the block (0 or 1) of each
 * dword lane. */
static inline __attribute__((always_inline)) pmpd_rotated_avx512_input
pmpd_rotated_avx512_input_pair(const int8_t *x, const float *d, unsigned blocks, __m512i order, __m512i lanes)
{
    const __m512i zero = _mm512_setzero_si512();
    const __m512i raw = blocks == 2 ? _mm512_loadu_si512((const void *)x)
                                    : _mm512_maskz_loadu_epi8((__mmask64)0xFFFFFFFFu, (const void *)x);
    const __m128 steps = blocks == 2 ? _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)(const void *)d))
                                     : _mm_load_ss(d);
    pmpd_rotated_avx512_input in;
    in.x = _mm512_permutexvar_epi8(order, raw);
    in.negbias = _mm512_dpbusd_epi32(zero, _mm512_set1_epi8(-128), _mm512_sub_epi8(zero, in.x));
    in.d = _mm512_permutexvar_ps(lanes, _mm512_castps128_ps512(steps));
    return in;
}

/* One token's side of a wide step: 64 bytes of one row's weight codes
 * loaded as stored, 16 to a 128-bit lane, from which a kernel derives up
 * to 4 vectors of 64 biased weights (shifts, lookups) whose lane s still
 * belongs to the lane's blocks, so that their VPDPBUSD sums add up in
 * int32 before one conversion and FMA:
 *   8 blocks (16 activations' codes in 16 bytes: NUQ 2 bits, VQ 4 bits):
 *     x[k] lane s = activations 8k..8k+7 of blocks 2s and 2s + 1;
 *   4 blocks (32 in 16: NUQ 4 bits, VQ 8 bits): x[k] lane s =
 *     activations 16k..16k+15 of block s, x[2] and x[3] zero. */
#define PMPD_ROTATED_AVX512_WIDE 4 /* weight vectors per wide step, at most */

typedef struct pmpd_rotated_avx512_wide {
    __m512i x[PMPD_ROTATED_AVX512_WIDE];
    __m512i negbias; /* -128 * each dword lane's activations summed over x[k] */
    __m512 d;        /* each dword lane's block step */
} pmpd_rotated_avx512_wide;

/* The wide step's activations of blocks b.. (x and d at block b's) into
 * in.  (Filled through a pointer, with no loops over the vectors: clang
 * copied a returned struct with memcpy and kept 2-trip loops.) */
static inline __attribute__((always_inline)) void pmpd_rotated_avx512_wide_input(const int8_t *x, const float *d,
                                                                                 unsigned blocks,
                                                                                 pmpd_rotated_avx512_wide *in)
{
    const __m512i zero = _mm512_setzero_si512(), bias = _mm512_set1_epi8(-128);
    __m512i sum;
    if (blocks == 8) {
        /* Blocks 2s, 2s + 1 as loaded: qword k = block 2s's activations
         * 8k.., qword 4 + k block 2s + 1's; gathered two sources at a time. */
        const __m512i low = _mm512_setr_epi64(0, 4, 8, 12, 1, 5, 9, 13);
        const __m512i high = _mm512_setr_epi64(2, 6, 10, 14, 3, 7, 11, 15);
        const __m512i pair0 = _mm512_loadu_si512((const void *)x), pair1 = _mm512_loadu_si512((const void *)(x + 64));
        const __m512i pair2 = _mm512_loadu_si512((const void *)(x + 128));
        const __m512i pair3 = _mm512_loadu_si512((const void *)(x + 192));
        const __m512i low01 = _mm512_permutex2var_epi64(pair0, low, pair1);
        const __m512i low23 = _mm512_permutex2var_epi64(pair2, low, pair3);
        const __m512i high01 = _mm512_permutex2var_epi64(pair0, high, pair1);
        const __m512i high23 = _mm512_permutex2var_epi64(pair2, high, pair3);
        in->x[0] = _mm512_shuffle_i64x2(low01, low23, _MM_SHUFFLE(1, 0, 1, 0));
        in->x[1] = _mm512_shuffle_i64x2(low01, low23, _MM_SHUFFLE(3, 2, 3, 2));
        in->x[2] = _mm512_shuffle_i64x2(high01, high23, _MM_SHUFFLE(1, 0, 1, 0));
        in->x[3] = _mm512_shuffle_i64x2(high01, high23, _MM_SHUFFLE(3, 2, 3, 2));
        in->d = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7),
                                      _mm512_castps256_ps512(_mm256_loadu_ps(d)));
        sum = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, bias, in->x[0]), bias, in->x[1]);
        sum = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(sum, bias, in->x[2]), bias, in->x[3]);
    } else {
        const __m512i low = _mm512_loadu_si512((const void *)x), high = _mm512_loadu_si512((const void *)(x + 64));
        in->x[0] = _mm512_shuffle_i64x2(low, high, _MM_SHUFFLE(2, 0, 2, 0));
        in->x[1] = _mm512_shuffle_i64x2(low, high, _MM_SHUFFLE(3, 1, 3, 1));
        in->x[2] = in->x[3] = zero;
        in->d = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                                      _mm512_castps128_ps512(_mm_loadu_ps(d)));
        sum = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, bias, in->x[0]), bias, in->x[1]);
    }
    in->negbias = _mm512_sub_epi32(zero, sum);
}

/* A wide step's 64 code bytes of one row, in two 32-byte loads: streamed
 * from RAM, one 64-byte load per cache line ran nuq2 at 13-15 GB/s on one
 * Zen5 thread and nuq4 at 21-25 (below 64-column steps' 19-21 and 28-31),
 * two halves at 21-22 and 30-36, for one more operation.  The empty asm
 * keeps clang from merging the halves back into one load. */
static inline __attribute__((always_inline)) __m512i pmpd_rotated_avx512_wide_codes(const uint8_t *codes)
{
    __m256i high = _mm256_loadu_si256((const __m256i *)(const void *)(codes + 32));
#if defined(__GNUC__)
    __asm__("" : "+v"(high));
#endif
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)codes)), high,
                              1);
}

/* acc + d * (the biased weights w[0..blocks / 2) times x[k]), exactly in
 * int32 before the float step. */
static inline __attribute__((always_inline)) __m512 pmpd_rotated_avx512_wide_dot(const __m512i *w, unsigned blocks,
                                                                                 const pmpd_rotated_avx512_wide *in,
                                                                                 __m512 acc)
{
    __m512i dot = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(in->negbias, w[0], in->x[0]), w[1], in->x[1]);
    if (blocks == 8)
        dot = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(dot, w[2], in->x[2]), w[3], in->x[3]);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), in->d, acc);
}

/* acc + d * (the 64 weights w, each 128 + its int8 level, times the
 * activations), exactly in int32 before the float step (|x| <= 127). */
static inline __attribute__((always_inline)) __m512 pmpd_rotated_avx512_dot(__m512i w,
                                                                            const pmpd_rotated_avx512_input *in,
                                                                            __m512 acc)
{
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(in->negbias, w, in->x)), in->d, acc);
}
#endif

#if PMPD_USE_NEON && defined(__aarch64__) && !PMPD_USE_AVX2
#include <arm_neon.h>

/* The NEON kernels' tiles (nuq/nuq_neon.c, vq/vq_neon.c): up to 4 rows x
 * up to PMPD_ROTATED_TILE tokens, a step one block of 32 columns.  The
 * tile's rows are one from each quarter of the caller's rows, so that the
 * weights stream as 4 sequential reads (as the AVX-512 tiles'), and each
 * activation load serves the 4 rows.  Per row and block the kernel looks
 * up 32 int8 weights; their exact int32 products with the activations
 * (two SDOTs from zero) become float and meet the block's step in one FMA
 * per (row, token): with one token the 4 rows' chains (load, unpack, TBL,
 * SDOT, SCVTF, FMLA, 4 cycles each on the Cortex-A55) interleave, which
 * one row's two blocks could not (docs/kernels.md). */
#define PMPD_ROTATED_NEON_ROWS PMPD_ROTATED_ROWS /* rows quartered by PMPD_ROTATED_TILE_GRID */

/* A tile's accumulators, [row][token]. */
typedef float32x4_t pmpd_rotated_neon_sums[PMPD_ROTATED_NEON_ROWS][PMPD_ROTATED_TILE];

/* A NEON tile of a rotated format: rows r0 + i stride (i < nr) of index
 * (row_bytes apart) times tokens t0..t0+nt-1 of the prepared input (per
 * token padded int8 q and n_blocks steps d), stored to y (see
 * PMPD_ROTATED_STORE).  For each block b, WEIGHTS(rows, b, n, w) puts the
 * 32 weights of block b of the n rows whose index bytes start at rows[0..n)
 * into w[0][0..n) (the 16 that meet activations 0..15) and w[1][0..n),
 * and pmpd_rotated_neon_block adds their products.  With one token the
 * rows go together (their chains interleave); with more, one at a time,
 * each row's lookups serving the nt tokens (4 rows' weights beside 16
 * accumulators and the tables would not fit the 32 registers). */
#define PMPD_ROTATED_NEON_TILE(index, row_bytes, padded, n_blocks, q, d, scale, unit, r0, stride, nr, t0, nt, y,   \
                               ldy, WEIGHTS)                                                                       \
    do {                                                                                                           \
        const uint8_t *pmpd_rows_[PMPD_ROTATED_NEON_ROWS];                                                         \
        pmpd_rotated_neon_sums pmpd_acc_;                                                                          \
        const size_t pmpd_group_ = (nt) == 1 ? (nr) : 1;                                                           \
        size_t pmpd_b_, pmpd_ri_, pmpd_zt_;                                                                        \
        _Pragma("GCC unroll 4") for (pmpd_ri_ = 0; pmpd_ri_ < (nr); pmpd_ri_++) {                                  \
            pmpd_rows_[pmpd_ri_] = (index) + ((r0) + pmpd_ri_ * (stride)) * (row_bytes);                           \
            _Pragma("GCC unroll 4") for (pmpd_zt_ = 0; pmpd_zt_ < (nt); pmpd_zt_++)                                \
                pmpd_acc_[pmpd_ri_][pmpd_zt_] = vdupq_n_f32(0.0f);                                                 \
        }                                                                                                          \
        for (pmpd_b_ = 0; pmpd_b_ < (n_blocks); pmpd_b_++)                                                         \
            _Pragma("GCC unroll 4") for (pmpd_ri_ = 0; pmpd_ri_ < (nr); pmpd_ri_ += pmpd_group_) {                 \
                int8x16_t pmpd_w_[2][PMPD_ROTATED_NEON_ROWS];                                                      \
                WEIGHTS(pmpd_rows_ + pmpd_ri_, pmpd_b_, pmpd_group_, pmpd_w_);                                     \
                pmpd_rotated_neon_block(pmpd_w_, pmpd_group_,                                                      \
                                        (q) + (t0) * (padded) + pmpd_b_ * PMPD_ROTATED_BLOCK, (padded),            \
                                        (d) + (t0) * (n_blocks) + pmpd_b_, (n_blocks), (nt), pmpd_acc_ + pmpd_ri_); \
            }                                                                                                      \
        PMPD_ROTATED_STORE(pmpd_acc_, vaddvq_f32, scale, unit, r0, stride, nr, t0, nt, y, ldy);                    \
    } while (0)

/* The end of one step of a 4-row tile's block (an empty volatile asm
 * that may change the 4 rows' vectors v[0..3], ordered after the previous
 * fence): every row's operation of a step issues before any of the next
 * step, so that each result is used 4 operations (4 cycles of the A55's
 * one 128-bit operation a cycle, its latency) after it is made.  Without
 * it gcc 12 and clang 14 (scheduling for no core in particular) put each
 * consumer right after its producer, and the A55 waits on each. */
#if defined(__GNUC__)
#define PMPD_ROTATED_NEON_FENCE(v, n)                                                                              \
    do {                                                                                                           \
        if ((n) == PMPD_ROTATED_NEON_ROWS)                                                                         \
            __asm__ volatile("" : "+w"((v)[0]), "+w"((v)[1]), "+w"((v)[2]), "+w"((v)[3]));                         \
    } while (0)
#else
#define PMPD_ROTATED_NEON_FENCE(v, n) (void)0
#endif

/* acc[i][t] += d[t * n_blocks] * (w[.][i] times token t's 32 activations at
 * x + t stride), for rows i < nr and tokens t < nt, exactly in int32
 * before the float step: SDOT where the target has the dot-product
 * extension, else SMULL + SMLAL2 (two products of at most 127 * 127 fit
 * an int16 lane) and SADALP.  Each step is written for all rows before the
 * next, so that the in-order A55 issues the rows' independent operations
 * back to back. */
static inline __attribute__((always_inline)) void pmpd_rotated_neon_block(int8x16_t w[2][PMPD_ROTATED_NEON_ROWS], size_t nr,
                                                                          const int8_t *x, size_t stride,
                                                                          const float *d, size_t n_blocks,
                                                                          size_t nt, pmpd_rotated_neon_sums acc)
{
    size_t t, i;
#pragma GCC unroll 4
    for (t = 0; t < nt; t++) {
        const int8x16_t x0 = vld1q_s8(x + t * stride), x1 = vld1q_s8(x + t * stride + 16);
        const float step = d[t * n_blocks];
        int32x4_t sums[PMPD_ROTATED_NEON_ROWS];
        float32x4_t sumsf[PMPD_ROTATED_NEON_ROWS];
#if PMPD_USE_DOTPROD
        /* SDOT accumulates: a zero per row, made before (else each is a
         * MOV of one zero right before its SDOT). */
#pragma GCC unroll 4
        for (i = 0; i < nr; i++)
            sums[i] = vdupq_n_s32(0);
        PMPD_ROTATED_NEON_FENCE(sums, nr);
#pragma GCC unroll 4
        for (i = 0; i < nr; i++)
            sums[i] = vdotq_s32(sums[i], w[0][i], x0);
        PMPD_ROTATED_NEON_FENCE(sums, nr);
#pragma GCC unroll 4
        for (i = 0; i < nr; i++)
            sums[i] = vdotq_s32(sums[i], w[1][i], x1);
#else
        int16x8_t p0[PMPD_ROTATED_NEON_ROWS], p1[PMPD_ROTATED_NEON_ROWS];
#pragma GCC unroll 4
        for (i = 0; i < nr; i++)
            p0[i] = vmull_s8(vget_low_s8(w[0][i]), vget_low_s8(x0));
        PMPD_ROTATED_NEON_FENCE(p0, nr);
#pragma GCC unroll 4
        for (i = 0; i < nr; i++)
            p1[i] = vmull_s8(vget_low_s8(w[1][i]), vget_low_s8(x1));
        PMPD_ROTATED_NEON_FENCE(p1, nr);
#pragma GCC unroll 4
        for (i = 0; i < nr; i++)
            p0[i] = vmlal_high_s8(p0[i], w[0][i], x0);
        PMPD_ROTATED_NEON_FENCE(p0, nr);
#pragma GCC unroll 4
        for (i = 0; i < nr; i++)
            p1[i] = vmlal_high_s8(p1[i], w[1][i], x1);
        PMPD_ROTATED_NEON_FENCE(p1, nr);
#pragma GCC unroll 4
        for (i = 0; i < nr; i++)
            sums[i] = vpaddlq_s16(p0[i]);
        PMPD_ROTATED_NEON_FENCE(sums, nr);
#pragma GCC unroll 4
        for (i = 0; i < nr; i++)
            sums[i] = vpadalq_s16(sums[i], p1[i]);
#endif
        PMPD_ROTATED_NEON_FENCE(sums, nr);
#pragma GCC unroll 4
        for (i = 0; i < nr; i++)
            sumsf[i] = vcvtq_f32_s32(sums[i]);
        PMPD_ROTATED_NEON_FENCE(sumsf, nr);
#pragma GCC unroll 4
        for (i = 0; i < nr; i++)
            acc[i][t] = vfmaq_n_f32(acc[i][t], sumsf[i], step);
    }
}

#endif

#endif
