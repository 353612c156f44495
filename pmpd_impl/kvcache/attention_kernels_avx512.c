/* AVX-512 versions of the exact-attention row kernels and of the
 * exponential (attention_kernels.h; the other attention kernels stay
 * AVX2).  A 64-dim f32 row is four 512-bit
 * vectors, so where the AVX2 kernels issue two operations per sixteen row
 * elements and query head these issue one; binary16 rows are widened with
 * one VCVTPH2PS per sixteen elements.  Lanes (query heads) come in groups
 * of four, as in the AVX2 set. */
#include "pmpd_impl/kvcache/attention_kernels.h"

#if PMPD_USE_AVX512
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "pmpd_impl/core/vexp.h"
#include "pmpd_impl/kvcache/attention_rows_x86.h"

/* Rows read this far ahead, over all streams: 4 KB of f32 rows, 6 KB of
 * f16 ones at head_dim 64, whose conversions leave fewer misses in flight
 * per byte (Zen5, steps from memory, 16/48/128 rows tried, 9 alternated
 * rounds: f16 at 16-32K about 1.07-1.1x faster with 48 than with 16, f32
 * best at 16; the AVX2 set was best at 16 for both).  The scores' four
 * streams each prefetch a quarter of that (96 and 32 rows measured no
 * better with them). */
#define KV512_PREFETCH_ROWS(half) ((half) ? 48 : 16)
#define KV512_ROW_BLOCK 16     /* value rows per pass over one dimension slice */
#define KV512_SLICE 64         /* value dimensions per slice: 4 lanes x 4 vectors in registers */

#if defined(__GNUC__)
#define KV512_INLINE static inline __attribute__((always_inline))
#else
#define KV512_INLINE static inline
#endif

KV512_INLINE const void *kv512_row(const void *rows, size_t t, size_t stride, const int half)
{
    return half ? (const void *)((const uint16_t *)rows + t * stride) : (const void *)((const float *)rows + t * stride);
}

/* Elements [d, d + 16) of a row, as floats. */
KV512_INLINE __m512 kv512_load16(const void *row, uint32_t d, const int half)
{
    if (half)
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)((const uint16_t *)row + d)));
    return _mm512_loadu_ps((const float *)row + d);
}

/* The same for the elements of mask only, zeros elsewhere; masked-out
 * elements are not read (no access past the row's end). */
KV512_INLINE __m512 kv512_load16_masked(const void *row, uint32_t d, __mmask16 mask, const int half)
{
    if (half)
        return _mm512_cvtph_ps(
            _mm512_castsi512_si256(_mm512_maskz_loadu_epi16((__mmask32)mask, (const uint16_t *)row + d)));
    return _mm512_maskz_loadu_ps(mask, (const float *)row + d);
}

/* Lanes whose elements d + i lie below end. */
static inline __mmask16 kv512_mask_below(uint32_t d, uint32_t end)
{
    return d >= end ? 0 : end - d >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (end - d)) - 1u);
}

KV512_INLINE void kv512_prefetch_row(const void *rows, size_t t, size_t n, size_t stride, uint32_t dim,
                                     const int half)
{
    const char *p;
    size_t bytes, b;
    if (t >= n)
        return;
    p = (const char *)kv512_row(rows, t, stride, half);
    bytes = (size_t)dim * (half ? 2 : 4);
    for (b = 0; b < bytes; b += 64)
        _mm_prefetch(p + b, _MM_HINT_T0);
}

/* pair(a, b): element i of the result sums elements i and i + 2 of a's or
 * b's 128-bit block, interleaved [a0+a2, b0+b2, a1+a3, b1+b3] per block. */
KV512_INLINE __m512 kv512_pair(__m512 a, __m512 b)
{
    return _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
}

/* quad(p, q) of two pairs: each 128-bit block holds one partial sum of each
 * of the four vectors, in order. */
KV512_INLINE __m512 kv512_quad(__m512 p, __m512 q)
{
    __m512d pd = _mm512_castps_pd(p), qd = _mm512_castps_pd(q);
    return _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(pd, qd)), _mm512_castpd_ps(_mm512_unpackhi_pd(pd, qd)));
}

/* Sixteen sums: element 4r + l of the result is the sum of all sixteen
 * elements of a_rl.  45 shuffles and adds for 16 horizontal sums. */
KV512_INLINE __m512 kv512_sum16(__m512 a00, __m512 a01, __m512 a02, __m512 a03, __m512 a10, __m512 a11, __m512 a12,
                                __m512 a13, __m512 a20, __m512 a21, __m512 a22, __m512 a23, __m512 a30, __m512 a31,
                                __m512 a32, __m512 a33)
{
    /* u_r block j: row r's four lanes summed over quarter j of the vector */
    __m512 u0 = kv512_quad(kv512_pair(a00, a01), kv512_pair(a02, a03));
    __m512 u1 = kv512_quad(kv512_pair(a10, a11), kv512_pair(a12, a13));
    __m512 u2 = kv512_quad(kv512_pair(a20, a21), kv512_pair(a22, a23));
    __m512 u3 = kv512_quad(kv512_pair(a30, a31), kv512_pair(a32, a33));
    /* w0 blocks: u0 (quarters 0+2), u0 (1+3), u1 (0+2), u1 (1+3) */
    __m512 w0 = _mm512_add_ps(_mm512_shuffle_f32x4(u0, u1, 0x44), _mm512_shuffle_f32x4(u0, u1, 0xEE));
    __m512 w1 = _mm512_add_ps(_mm512_shuffle_f32x4(u2, u3, 0x44), _mm512_shuffle_f32x4(u2, u3, 0xEE));
    return _mm512_add_ps(_mm512_shuffle_f32x4(w0, w1, 0x88), _mm512_shuffle_f32x4(w0, w1, 0xDD));
}

/* The empty asm puts x in a register: GCC otherwise folds each use of a
 * vector read from memory (a query or f32 key vector in the scores, an f32
 * row vector in the value sums) into its FMA as a memory operand, 16 loads
 * where 4 do. */
#if defined(__GNUC__)
#define KV512_IN_REGISTER(x) __asm__("" : "+v"(x))
#else
#define KV512_IN_REGISTER(x) (void)0
#endif

/* Row r's vector k times the four heads' query vectors. */
#define KV512_SCORES_ROW(r, k)                                                                      \
    do {                                                                                           \
        __m512 k_ = (k);                                                                           \
        KV512_IN_REGISTER(k_);                                                                     \
        a##r##0 = _mm512_fmadd_ps(q0, k_, a##r##0);                                                \
        a##r##1 = _mm512_fmadd_ps(q1, k_, a##r##1);                                                \
        a##r##2 = _mm512_fmadd_ps(q2, k_, a##r##2);                                                \
        a##r##3 = _mm512_fmadd_ps(q3, k_, a##r##3);                                                \
    } while (0)


/* One 16-dim step of the scores: four rows' vectors (load(row, d)) times
 * four heads'.  Named accumulators: an array of them stayed in memory. */
#define KV512_SCORES_STEP(load)                                                                     \
    do {                                                                                           \
        __m512 q0 = _mm512_loadu_ps(q[0] + (d - d0)), q1 = _mm512_loadu_ps(q[1] + (d - d0));       \
        __m512 q2 = _mm512_loadu_ps(q[2] + (d - d0)), q3 = _mm512_loadu_ps(q[3] + (d - d0));       \
        KV512_IN_REGISTER(q0);                                                                     \
        KV512_IN_REGISTER(q1);                                                                     \
        KV512_IN_REGISTER(q2);                                                                     \
        KV512_IN_REGISTER(q3);                                                                     \
        KV512_SCORES_ROW(0, load(r0));                                                             \
        KV512_SCORES_ROW(1, load(r1));                                                             \
        KV512_SCORES_ROW(2, load(r2));                                                             \
        KV512_SCORES_ROW(3, load(r3));                                                             \
    } while (0)
#define KV512_LOAD_FULL(row) kv512_load16(row, d, half)
#define KV512_LOAD_TAIL(row) kv512_load16_masked(row, d, tail, half)

/* Row j * quarter + i of the scores' step i, or where that lies past n
 * (the last quarter is short) row i, computed again and not stored. */
KV512_INLINE size_t kv512_stream_row(size_t i, size_t j, size_t quarter, size_t n)
{
    return j * quarter + i < n ? j * quarter + i : i;
}

/* scores[t][l0 .. l0+4) (+)= q chunk . row t over dims [d0, d1): four rows
 * at a time, one from each quarter of the n rows, so that four sequential
 * streams are in flight (one stream: the f32 step from memory 1.2-1.3x
 * slower, f16 1.15-1.2x, Zen5); sixteen accumulators summed by one shuffle
 * tree. */
KV512_INLINE void kv512_scores_chunk(const float (*q)[PMPD_KV_Q_CHUNK], uint32_t lanes, uint32_t l0, uint32_t dim,
                                     uint32_t d0, uint32_t d1, const void *rows, size_t stride, size_t n,
                                     float *scores, const int half)
{
    const uint32_t d_full = d0 + (d1 - d0) / 16 * 16;
    const __mmask16 tail = kv512_mask_below(d_full, d1);
    const size_t quarter = (n + 3) / 4;
    size_t i, r;
    uint32_t d;
    for (i = 0; i < quarter; i++) {
        const void *r0 = kv512_row(rows, i, stride, half);
        const void *r1 = kv512_row(rows, kv512_stream_row(i, 1, quarter, n), stride, half);
        const void *r2 = kv512_row(rows, kv512_stream_row(i, 2, quarter, n), stride, half);
        const void *r3 = kv512_row(rows, kv512_stream_row(i, 3, quarter, n), stride, half);
        __m512 a00 = _mm512_setzero_ps(), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00;
        __m512 a13 = a00, a20 = a00, a21 = a00, a22 = a00, a23 = a00, a30 = a00, a31 = a00, a32 = a00, a33 = a00;
        __m512 sums;
        for (r = 0; r < 4; r++)
            kv512_prefetch_row(rows, r * quarter + i + KV512_PREFETCH_ROWS(half) / 4, n, stride, dim, half);
        for (d = d0; d < d_full; d += 16)
            KV512_SCORES_STEP(KV512_LOAD_FULL);
        if (tail)
            KV512_SCORES_STEP(KV512_LOAD_TAIL);
        sums = kv512_sum16(a00, a01, a02, a03, a10, a11, a12, a13, a20, a21, a22, a23, a30, a31, a32, a33);
        for (r = 0; r < 4 && r * quarter + i < n; r++) {
            float *out = scores + (r * quarter + i) * lanes + l0;
            __m128 s = r == 0 ? _mm512_extractf32x4_ps(sums, 0)
                     : r == 1 ? _mm512_extractf32x4_ps(sums, 1)
                     : r == 2 ? _mm512_extractf32x4_ps(sums, 2)
                              : _mm512_extractf32x4_ps(sums, 3);
            if (d0)
                s = _mm_add_ps(s, _mm_loadu_ps(out));
            _mm_storeu_ps(out, s);
        }
    }
}

KV512_INLINE void kv512_row_scores(const float *qt, uint32_t lanes, uint32_t dim, const void *rows, size_t stride,
                                   size_t n, float *scores, float *max, const int half)
{
    PMPD_KV_ROW_SCORES_PASSES(kv512_scores_chunk, 16, qt, lanes, dim, rows, stride, n, scores, max, half);
}

/* Lane l's four vectors += w_l times the row's four vectors. */
#define KV512_VALUES_LANE(l, w)                                                                     \
    do {                                                                                           \
        __m512 w_ = _mm512_set1_ps(w);                                                             \
        a##l##0 = _mm512_fmadd_ps(w_, x0, a##l##0);                                                \
        a##l##1 = _mm512_fmadd_ps(w_, x1, a##l##1);                                                \
        a##l##2 = _mm512_fmadd_ps(w_, x2, a##l##2);                                                \
        a##l##3 = _mm512_fmadd_ps(w_, x3, a##l##3);                                                \
    } while (0)
#define KV512_SUMS(l, v) (sums[l] + (d - d0) + 16 * (v))

/* sums[l][d - d0 .. + 64) += sum over rows [t0, t1) of weights[t][l0 + l] *
 * row t[d]: sixteen accumulators in registers for the block of rows; the
 * slice's elements at or past d1 are not read (they add zeros). */
KV512_INLINE void kv512_accumulate_slice(const float *weights, uint32_t lanes, uint32_t l0, uint32_t d, uint32_t d1,
                                         const void *rows, size_t stride, size_t t0, size_t t1,
                                         float (*sums)[PMPD_KV_Q_CHUNK], uint32_t d0, const int half)
{
    const int whole = d + KV512_SLICE <= d1;
    const __mmask16 m0 = kv512_mask_below(d, d1), m1 = kv512_mask_below(d + 16, d1);
    const __mmask16 m2 = kv512_mask_below(d + 32, d1), m3 = kv512_mask_below(d + 48, d1);
    __m512 a00 = _mm512_loadu_ps(KV512_SUMS(0, 0)), a01 = _mm512_loadu_ps(KV512_SUMS(0, 1));
    __m512 a02 = _mm512_loadu_ps(KV512_SUMS(0, 2)), a03 = _mm512_loadu_ps(KV512_SUMS(0, 3));
    __m512 a10 = _mm512_loadu_ps(KV512_SUMS(1, 0)), a11 = _mm512_loadu_ps(KV512_SUMS(1, 1));
    __m512 a12 = _mm512_loadu_ps(KV512_SUMS(1, 2)), a13 = _mm512_loadu_ps(KV512_SUMS(1, 3));
    __m512 a20 = _mm512_loadu_ps(KV512_SUMS(2, 0)), a21 = _mm512_loadu_ps(KV512_SUMS(2, 1));
    __m512 a22 = _mm512_loadu_ps(KV512_SUMS(2, 2)), a23 = _mm512_loadu_ps(KV512_SUMS(2, 3));
    __m512 a30 = _mm512_loadu_ps(KV512_SUMS(3, 0)), a31 = _mm512_loadu_ps(KV512_SUMS(3, 1));
    __m512 a32 = _mm512_loadu_ps(KV512_SUMS(3, 2)), a33 = _mm512_loadu_ps(KV512_SUMS(3, 3));
    size_t t;
    for (t = t0; t < t1; t++) {
        const void *row = kv512_row(rows, t, stride, half);
        const float *w = weights + t * lanes + l0;
        __m512 x0, x1, x2, x3;
        if (whole) {
            x0 = kv512_load16(row, d, half), x1 = kv512_load16(row, d + 16, half);
            x2 = kv512_load16(row, d + 32, half), x3 = kv512_load16(row, d + 48, half);
        } else {
            x0 = kv512_load16_masked(row, d, m0, half), x1 = kv512_load16_masked(row, d + 16, m1, half);
            x2 = kv512_load16_masked(row, d + 32, m2, half), x3 = kv512_load16_masked(row, d + 48, m3, half);
        }
        KV512_IN_REGISTER(x0);
        KV512_IN_REGISTER(x1);
        KV512_IN_REGISTER(x2);
        KV512_IN_REGISTER(x3);
        KV512_VALUES_LANE(0, w[0]);
        KV512_VALUES_LANE(1, w[1]);
        KV512_VALUES_LANE(2, w[2]);
        KV512_VALUES_LANE(3, w[3]);
    }
    _mm512_storeu_ps(KV512_SUMS(0, 0), a00), _mm512_storeu_ps(KV512_SUMS(0, 1), a01);
    _mm512_storeu_ps(KV512_SUMS(0, 2), a02), _mm512_storeu_ps(KV512_SUMS(0, 3), a03);
    _mm512_storeu_ps(KV512_SUMS(1, 0), a10), _mm512_storeu_ps(KV512_SUMS(1, 1), a11);
    _mm512_storeu_ps(KV512_SUMS(1, 2), a12), _mm512_storeu_ps(KV512_SUMS(1, 3), a13);
    _mm512_storeu_ps(KV512_SUMS(2, 0), a20), _mm512_storeu_ps(KV512_SUMS(2, 1), a21);
    _mm512_storeu_ps(KV512_SUMS(2, 2), a22), _mm512_storeu_ps(KV512_SUMS(2, 3), a23);
    _mm512_storeu_ps(KV512_SUMS(3, 0), a30), _mm512_storeu_ps(KV512_SUMS(3, 1), a31);
    _mm512_storeu_ps(KV512_SUMS(3, 2), a32), _mm512_storeu_ps(KV512_SUMS(3, 3), a33);
}

/* The value products build lane-major (sums[l][d], in L1) a block of rows
 * at a time, and are transposed into acc[d][l] once at the end. */
KV512_INLINE void kv512_row_accumulate(const float *weights, uint32_t lanes, uint32_t dim, const void *rows,
                                       size_t stride, size_t n, float *acc, const int half)
{
    PMPD_KV_ROW_ACCUMULATE_PASSES(kv512_accumulate_slice, KV512_SLICE, KV512_ROW_BLOCK, kv512_prefetch_row,
                                  KV512_PREFETCH_ROWS(half), weights, lanes, dim, rows, stride, n, acc, half);
}

/* Lane l's sixteen positions of one key block: a##l += q[l] * key row d. */
#define KV512_BLOCK_LANES(a, k)                                                                     \
    do {                                                                                           \
        a##0 = _mm512_fmadd_ps(_mm512_set1_ps(q[0]), k, a##0);                                     \
        a##1 = _mm512_fmadd_ps(_mm512_set1_ps(q[1]), k, a##1);                                     \
        a##2 = _mm512_fmadd_ps(_mm512_set1_ps(q[2]), k, a##2);                                     \
        a##3 = _mm512_fmadd_ps(_mm512_set1_ps(q[3]), k, a##3);                                     \
    } while (0)

/* Four lanes' sixteen positions (a_l: lane l) stored position-major, as
 * [16][4] floats: two rounds of unpacks put position 4 k + j of every lane
 * in 128-bit block k of v_j, and a 4 x 4 transpose of the blocks orders
 * them (16 shuffles). */
KV512_INLINE void kv512_block_transpose(__m512 a0, __m512 a1, __m512 a2, __m512 a3, float *out)
{
    const __m512 u0 = _mm512_unpacklo_ps(a0, a1), u1 = _mm512_unpackhi_ps(a0, a1);
    const __m512 u2 = _mm512_unpacklo_ps(a2, a3), u3 = _mm512_unpackhi_ps(a2, a3);
    const __m512 v0 = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(u0), _mm512_castps_pd(u2)));
    const __m512 v1 = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(u0), _mm512_castps_pd(u2)));
    const __m512 v2 = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(u1), _mm512_castps_pd(u3)));
    const __m512 v3 = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(u1), _mm512_castps_pd(u3)));
    const __m512 t0 = _mm512_shuffle_f32x4(v0, v1, 0x44), t1 = _mm512_shuffle_f32x4(v2, v3, 0x44);
    const __m512 t2 = _mm512_shuffle_f32x4(v0, v1, 0xEE), t3 = _mm512_shuffle_f32x4(v2, v3, 0xEE);
    _mm512_storeu_ps(out, _mm512_shuffle_f32x4(t0, t1, 0x88));
    _mm512_storeu_ps(out + 16, _mm512_shuffle_f32x4(t0, t1, 0xDD));
    _mm512_storeu_ps(out + 32, _mm512_shuffle_f32x4(t2, t3, 0x88));
    _mm512_storeu_ps(out + 48, _mm512_shuffle_f32x4(t2, t3, 0xDD));
}

/* Block b's scores for lanes l0 .. l0 + 3 (a_l) into scores: straight
 * into a whole block's rows where lanes is 4, else through a copy. */
KV512_INLINE void kv512_block_put(__m512 a0, __m512 a1, __m512 a2, __m512 a3, size_t b, size_t n, uint32_t lanes,
                                  uint32_t l0, float *scores)
{
    const size_t t0 = b * PMPD_KV_KEY_BLOCK, count = n - t0 < PMPD_KV_KEY_BLOCK ? n - t0 : PMPD_KV_KEY_BLOCK;
    float block[PMPD_KV_KEY_BLOCK * 4];
    if (lanes == 4 && count == PMPD_KV_KEY_BLOCK) {
        kv512_block_transpose(a0, a1, a2, a3, scores + t0 * 4);
        return;
    }
    kv512_block_transpose(a0, a1, a2, a3, block);
    pmpd_kv_put_block_scores(block, count, lanes, l0, scores + t0 * lanes);
}

/* Key blocks ahead that the scores prefetch, per stream: 4 KiB at head_dim
 * 64 (Zen5, from memory, two alternated rounds: 2 beat 4 by 1.1-1.4x at
 * 4K-32K). */
#define KV512_KEY_BLOCKS_AHEAD 2

/* Dimension d of a key block's sixteen positions, as floats. */
KV512_INLINE __m512 kv512_key_row(const uint16_t *block, uint32_t d)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(block + 16 * (size_t)d)));
}

/* Blocked binary16 keys (attention_kernels.h): per group of four lanes,
 * two blocks at a time, one from each half of the blocks (two sequential
 * streams, eight FMA chains), each lane's sixteen positions one vector:
 * one VCVTPH2PS and four FMAs per dimension and block.  Each stream
 * prefetches the line KV512_KEY_BLOCKS_AHEAD blocks ahead of the one it
 * reads, a line every other dimension (whole blocks at once measured
 * slower from memory). */
KV512_INLINE void kv512_block_scores(const float *qt, uint32_t lanes, uint32_t dim, const uint16_t *blocks, size_t n,
                                     float *scores, float *max)
{
    const size_t n_blocks = (n + PMPD_KV_KEY_BLOCK - 1) / PMPD_KV_KEY_BLOCK, half = (n_blocks + 1) / 2;
    const size_t block_halves = (size_t)PMPD_KV_KEY_BLOCK * dim, ahead = KV512_KEY_BLOCKS_AHEAD * block_halves;
    const uint16_t *end = blocks + n_blocks * block_halves;
    uint32_t l0, d;
    size_t i;
    for (l0 = 0; l0 < lanes; l0 += 4) {
        for (i = 0; i < half; i++) {
            const size_t j = i + half < n_blocks ? i + half : i;
            const uint16_t *x = blocks + i * block_halves, *y = blocks + j * block_halves;
            __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
            for (d = 0; d < dim; d++) {
                const float *q = qt + (size_t)d * lanes + l0;
                if (d % 2 == 0) {
                    if (x + ahead + 16 * d < end)
                        _mm_prefetch((const char *)(x + ahead + 16 * d), _MM_HINT_T0);
                    if (y + ahead + 16 * d < end)
                        _mm_prefetch((const char *)(y + ahead + 16 * d), _MM_HINT_T0);
                }
                KV512_BLOCK_LANES(a, kv512_key_row(x, d));
                KV512_BLOCK_LANES(b, kv512_key_row(y, d));
            }
            kv512_block_put(a0, a1, a2, a3, i, n, lanes, l0, scores);
            if (j != i)
                kv512_block_put(b0, b1, b2, b3, j, n, lanes, l0, scores);
        }
        pmpd_kv_lanes_max4(scores, lanes, l0, n, max);
    }
}

#define PMPD_KV_BLOCK_INNER_ kv512_block_scores
PMPD_KV_DEFINE_BLOCK_SCORES(avx512)
#undef PMPD_KV_BLOCK_INNER_

#define KV512_SCORES(size, half) kv512_row_scores(qt, lanes, size, rows, stride, n, scores, max, half)
#define KV512_ACCUMULATE(size, half) kv512_row_accumulate(weights, lanes, size, rows, stride, n, acc, half)
PMPD_KV_DEFINE_ROW_KERNELS(avx512, KV512_SCORES, KV512_ACCUMULATE)

/* Where lanes divides 16, the scores [n][lanes] are one run of floats whose
 * maxima repeat every lanes floats: sixteen at a time (the last ones
 * masked), the sums folded into lanes at the end.  Other lane counts go a
 * token at a time, sixteen lanes per step. */
void pmpd_kv_exp_avx512(float *x, uint32_t lanes, size_t n, const float *max, float *sum)
{
    size_t t, i, total = n * lanes;
    uint32_t l;
    if (16 % lanes == 0) {
        float folded[16];
        __m512 m, s = _mm512_setzero_ps();
        for (l = 0; l < 16; l++)
            folded[l] = max[l % lanes];
        m = _mm512_loadu_ps(folded);
        for (i = 0; i + 16 <= total; i += 16) {
            __m512 e = pmpd_vexp_avx512(_mm512_sub_ps(_mm512_loadu_ps(x + i), m));
            _mm512_storeu_ps(x + i, e);
            s = _mm512_add_ps(s, e);
        }
        if (i < total) {
            __mmask16 tail = kv512_mask_below(0u, (uint32_t)(total - i));
            __m512 e = _mm512_maskz_mov_ps(tail, pmpd_vexp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + i), m)));
            _mm512_mask_storeu_ps(x + i, tail, e);
            s = _mm512_add_ps(s, e);
        }
        _mm512_storeu_ps(folded, s);
        for (l = lanes; l < 16; l++)
            folded[l % lanes] += folded[l];
        for (l = 0; l < lanes; l++)
            sum[l] += folded[l];
        return;
    }
    for (t = 0; t < n; t++)
        for (l = 0; l < lanes; l += 16) {
            __mmask16 part = kv512_mask_below(l, lanes);
            float *row = x + t * lanes + l;
            __m512 e = _mm512_maskz_mov_ps(
                part, pmpd_vexp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(part, row), _mm512_maskz_loadu_ps(part, max + l))));
            _mm512_mask_storeu_ps(row, part, e);
            _mm512_mask_storeu_ps(sum + l, part, _mm512_add_ps(_mm512_maskz_loadu_ps(part, sum + l), e));
        }
}

/* Squared distances from x to centroids [c, c + 16), summed over j in
 * order with separate multiply and add, exactly like the scalar loop. */
static inline __m512 pq512_distances(const float *columns, uint32_t n_centroids, uint32_t sub_dim, const float *x,
                                     uint32_t c)
{
    __m512 diff = _mm512_sub_ps(_mm512_loadu_ps(columns + c), _mm512_set1_ps(x[0]));
    __m512 d = _mm512_mul_ps(diff, diff);
    uint32_t j;
    for (j = 1; j < sub_dim; j++) {
        diff = _mm512_sub_ps(_mm512_loadu_ps(columns + j * n_centroids + c), _mm512_set1_ps(x[j]));
        d = _mm512_add_ps(d, _mm512_mul_ps(diff, diff));
    }
    return d;
}

/* Thirty-two centroids per step in two chains of 16 lanes, each lane
 * keeping its first strict minimum by a compare into a mask and two
 * masked moves; then the lanes' least distance and, among the lanes that
 * hold it, the least index, so ties go to the lowest index as in the
 * scalar search. */
uint32_t pmpd_pq_nearest_avx512(const float *columns, uint32_t n_centroids, uint32_t sub_dim, const float *x)
{
    const __m512i sixteen = _mm512_set1_epi32(16);
    __m512 best0 = _mm512_set1_ps(INFINITY), best1 = best0, least;
    __m512i index0 = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512i index1 = _mm512_add_epi32(index0, sixteen), at0 = _mm512_setzero_si512(), at1 = at0;
    const __m512i step = _mm512_set1_epi32(32);
    __mmask16 closer, tied;
    uint32_t c;
    if (n_centroids % 32 != 0)
        return pmpd_pq_nearest_scalar(columns, n_centroids, sub_dim, x);
    for (c = 0; c < n_centroids; c += 32) {
        __m512 d0 = pq512_distances(columns, n_centroids, sub_dim, x, c);
        __m512 d1 = pq512_distances(columns, n_centroids, sub_dim, x, c + 16);
        closer = _mm512_cmp_ps_mask(d0, best0, _CMP_LT_OQ);
        best0 = _mm512_mask_mov_ps(best0, closer, d0);
        at0 = _mm512_mask_mov_epi32(at0, closer, index0);
        closer = _mm512_cmp_ps_mask(d1, best1, _CMP_LT_OQ);
        best1 = _mm512_mask_mov_ps(best1, closer, d1);
        at1 = _mm512_mask_mov_epi32(at1, closer, index1);
        index0 = _mm512_add_epi32(index0, step);
        index1 = _mm512_add_epi32(index1, step);
    }
    /* Chain 1's lane ahead only where strictly closer, or as close with a
     * lower index (an index 0 there means no centroid beat infinity). */
    closer = _mm512_cmp_ps_mask(best1, best0, _CMP_LT_OQ) |
             (_mm512_cmp_ps_mask(best1, best0, _CMP_EQ_OQ) & _mm512_cmp_epi32_mask(at1, at0, _MM_CMPINT_LT));
    best0 = _mm512_mask_mov_ps(best0, closer, best1);
    at0 = _mm512_mask_mov_epi32(at0, closer, at1);
    least = _mm512_set1_ps(_mm512_reduce_min_ps(best0));
    tied = _mm512_cmp_ps_mask(best0, least, _CMP_EQ_OQ);
    if (!tied) /* every distance NaN or infinite: no centroid is closer than infinity */
        return 0;
    return (uint32_t)_mm512_mask_reduce_min_epi32(tied, at0);
}

#else
typedef int pmpd_attention_kernels_avx512_not_compiled;
#endif
