/* AVX-512 any-precision GEMV (decode) for widths 2..4 of tensors whose
 * planes 0 and 1 share a 2-bit slice; the GEMM (prefill) stays with the
 * AVX2 kernel.  Built where PMPD_USE_AVX512 holds (F, BW, VNNI, VBMI).
 *
 * One 64-byte load of the 2-bit slice is a row's whole superblock: its low
 * half holds column groups 0, 2, 1, 3 and its high half groups 4, 6, 5, 7
 * (bit pairs 0, 2, 4, 6), so every step below works on two groups four
 * apart at once, one per 256-bit half, and meets activation vectors built
 * the same way (x of group k | x of group k + 4, once per superblock for
 * the block's four rows).  An upper plane's 32 bytes are loaded into both
 * halves; a per-half shift (VPSLLVW / VPSRLVW) and one VPTERNLOGD bit
 * select place its bits where the codes want them.
 *
 * The lookups are VPERMB on a 64-byte table that repeats the row's 2^k
 * entries: VPERMB reads an index's low six bits and never zeroes, so the
 * bits above a code may hold anything (the neighbouring code, bits shifted
 * in from the next byte) and no AND isolates a nibble.  Per row and
 * superblock the codes and products are 9 / 15 / 18 vector operations at
 * 2 / 3 / 4 bits (4 lookups and 4 VPDPBUSD among them); the compiled
 * superblock of a 4-row block, loads, prefetches and float steps included,
 * is 97 / 138 / 174 instructions against the 256-bit VNNI kernel's 144 /
 * 195 / 258 (llvm-mca's count, gcc 12 -march=icelake-server, make mca). */
#include "pmpd_impl/weights/anyprec/anyprec.h"

#if PMPD_USE_AVX512
#include <immintrin.h>
#include <string.h>

#include "pmpd_impl/weights/anyprec/anyprec_store_x86.h"

/* Bytes ahead in the 2-bit slice that the GEMV prefetches (half as far in
 * the 1-bit slices, which advance half as fast).  Twice the 256-bit
 * kernel's distance since this kernel runs faster: in decode on Zen5
 * (pmpd-run, 1.1B shape, three alternated rounds) 4 KiB beat 2 KiB by
 * 0-6% at 4 bits and 0-7% at 2; 8 KiB was no better. */
#define ANYPREC_AVX512_PREFETCH 4096

/* VPTERNLOGD's truth table for "a ? b : c" (a bitwise select). */
#define ANYPREC_AVX512_SELECT 0xCA

#if defined(__GNUC__)
#define ANYPREC_AVX512_INLINE static inline __attribute__((always_inline))
#else
#define ANYPREC_AVX512_INLINE static inline
#endif

/* Row r's 2^bits table entries, zero past the last row (a block's padding
 * rows), as the low bytes of a 16-byte vector. */
static __m128i anyprec_avx512_row_entries(const pmpd_anyprec_matrix *m, unsigned bits, uint32_t r)
{
    unsigned char entries[16];
    pmpd_anyprec_row_entries(m, bits, r, entries);
    return _mm_loadu_si128((const __m128i *)(const void *)entries);
}

/* The lookup tables of the block at r0, two per row (row i: table[i] and
 * table[4 + i]), each 64 bytes indexed by a byte's low six bits:
 *   2 bits: entry n % 4 (the code in bits 0..1) and entry (n / 4) % 4 (in
 *           bits 2..3);
 *   3 bits: entry n % 8;
 *   4 bits: entry n % 16, and the same with the code's two halves swapped
 *           (entry (n % 16) / 4 + 4 (n % 4)) for the pairs whose lower two
 *           code bits lie above the upper two.
 * A block without padding rows broadcasts its entries straight from the
 * matrix: going through a zeroed 16-byte copy per row (the padding rows'
 * way) stalled each load on the stores before it and took a third of the
 * 2-bit GEMV's time at 2048 columns. */
ANYPREC_AVX512_INLINE void anyprec_avx512_block_tables(const pmpd_anyprec_matrix *m, uint32_t r0, __m512i *table,
                                                       const unsigned bits)
{
    const __m512i two_pairs = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
    const __m512i swap_halves =
        _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    const unsigned char *entries = m->tables[bits] + ((size_t)r0 << bits);
    const int whole = r0 + PMPD_ANYPREC_ROW_BLOCK <= m->rows;
    unsigned i;
    for (i = 0; i < PMPD_ANYPREC_ROW_BLOCK; i++) {
        __m512i t;
        if (!whole) {
            t = _mm512_broadcast_i32x4(anyprec_avx512_row_entries(m, bits, r0 + i));
            t = bits == 2 ? _mm512_broadcastd_epi32(_mm512_castsi512_si128(t))
                : bits == 3 ? _mm512_broadcastq_epi64(_mm512_castsi512_si128(t)) : t;
        } else if (bits == 2) {
            int32_t four;
            memcpy(&four, entries + 4 * i, sizeof four);
            t = _mm512_set1_epi32(four);
        } else if (bits == 3) {
            long long eight;
            memcpy(&eight, entries + 8 * i, sizeof eight);
            t = _mm512_set1_epi64(eight);
        } else {
            t = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)(entries + 16 * i)));
        }
        table[i] = t;
        if (bits != 3)
            table[PMPD_ANYPREC_ROW_BLOCK + i] = _mm512_permutexvar_epi8(bits == 2 ? two_pairs : swap_halves, t);
    }
}

/* Plane p's 32 bytes of a row's superblock in both halves. */
ANYPREC_AVX512_INLINE __m512i anyprec_avx512_plane(const unsigned char *plane)
{
    return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)plane));
}

/* dot + entries (unsigned) times activations x, in int32 sums of four. */
ANYPREC_AVX512_INLINE __m512i anyprec_avx512_dot(__m512i dot, __m512i table, __m512i codes, __m512i x)
{
    return _mm512_dpbusd_epi32(dot, _mm512_permutexvar_epi8(codes, table), x);
}

/* Superblock s of row i of the block (f: the row's 64 bytes of the 2-bit
 * slice, plane[p] + at its 32 bytes of plane p), against the superblock's
 * activations x[k] (group k | group k + 4).  The bit selects:
 *   3 bits: codes of groups (0 | 4) and (1 | 5) in the low and high nibble
 *           of c02 = F's bits 0, 1, 4, 5 beside plane 2 shifted by (2 | 0),
 *           of groups (2 | 6), (3 | 7) in c13 = F >> 2 beside that >> 1.
 *   4 bits: planes 2 and 3 merged first (e: their bits of groups 0, 4, 1,
 *           5 at bit pairs 0, 2, 4, 6; o: of 2, 6, 3, 7), then c02 = F's
 *           bits 0, 1, 4, 5 beside e shifted by (2 | 0), c13 = o shifted
 *           by (0 | 2) beside F's bits 2, 3, 6, 7, whose lower two code
 *           bits lie above the upper two (the swapped table). */
ANYPREC_AVX512_INLINE __m512i anyprec_avx512_row_super(const __m512i *table, unsigned i, const unsigned char *field,
                                                       const unsigned char *const *plane, size_t at,
                                                       const __m512i *x, const unsigned bits)
{
    const __m512i f = _mm512_loadu_si512((const void *)(field + 64 * i));
    const __m512i m33 = _mm512_set1_epi8(0x33), m55 = _mm512_set1_epi8(0x55);
    const __m512i left_low = _mm512_inserti64x4(_mm512_set1_epi16(2), _mm256_setzero_si256(), 1);
    const __m512i left_high = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i t = table[i];
    __m512i dot = _mm512_setzero_si512(), c02, c13, t13 = t;
    if (bits == 2) {
        const __m512i hi = _mm512_srli_epi16(f, 4), by_high = table[PMPD_ANYPREC_ROW_BLOCK + i];
        dot = anyprec_avx512_dot(dot, t, f, x[0]);
        dot = anyprec_avx512_dot(dot, by_high, f, x[2]);
        dot = anyprec_avx512_dot(dot, t, hi, x[1]);
        return anyprec_avx512_dot(dot, by_high, hi, x[3]);
    }
    if (bits == 3) {
        const __m512i p2 = _mm512_sllv_epi16(anyprec_avx512_plane(plane[2] + at), left_low);
        c02 = _mm512_ternarylogic_epi32(m33, f, p2, ANYPREC_AVX512_SELECT);
        c13 = _mm512_ternarylogic_epi32(m33, _mm512_srli_epi16(f, 2), _mm512_srli_epi16(p2, 1), ANYPREC_AVX512_SELECT);
    } else {
        const __m512i b2 = anyprec_avx512_plane(plane[2] + at), b3 = anyprec_avx512_plane(plane[3] + at);
        const __m512i e = _mm512_ternarylogic_epi32(m55, b2, _mm512_slli_epi16(b3, 1), ANYPREC_AVX512_SELECT);
        const __m512i o = _mm512_ternarylogic_epi32(m55, _mm512_srli_epi16(b2, 1), b3, ANYPREC_AVX512_SELECT);
        c02 = _mm512_ternarylogic_epi32(m33, f, _mm512_sllv_epi16(e, left_low), ANYPREC_AVX512_SELECT);
        c13 = _mm512_ternarylogic_epi32(m33, _mm512_srlv_epi16(o, left_high), f, ANYPREC_AVX512_SELECT);
        t13 = table[PMPD_ANYPREC_ROW_BLOCK + i];
    }
    dot = anyprec_avx512_dot(dot, t, c02, x[0]);
    dot = anyprec_avx512_dot(dot, t, _mm512_srli_epi16(c02, 4), x[1]);
    dot = anyprec_avx512_dot(dot, t13, c13, x[2]);
    return anyprec_avx512_dot(dot, t13, _mm512_srli_epi16(c13, 4), x[3]);
}

/* The superblock's activations as x[k] = group k | group k + 4. */
ANYPREC_AVX512_INLINE void anyprec_avx512_input(const int8_t *in, __m512i *x)
{
    unsigned k;
    /* Unrolled so that x stays in four registers: as a loop, gcc 12 kept x
     * on the stack and every VPDPBUSD reloaded it (2 bits in L2 on Zen5:
     * 100 -> 134 G weights/s). */
#pragma GCC unroll 4
    for (k = 0; k < 4; k++)
        x[k] = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)(in + 32 * k))),
            _mm256_loadu_si256((const __m256i *)(const void *)(in + 128 + 32 * k)), 1);
}

/* Superblock s of the four rows of the block (field: their 2-bit slice,
 * plane[p]: plane p's bytes), added to acc. */
ANYPREC_AVX512_INLINE void anyprec_avx512_block_super(const unsigned char *field, const unsigned char *const *plane,
                                                      const pmpd_anyprec_matrix *m, const int8_t *xq,
                                                      const pmpd_anyprec_units *u, uint32_t s, const __m512i *table,
                                                      __m512 *acc, const unsigned bits)
{
    const __m512 scale = _mm512_set1_ps(u->scale[s]);
    __m512i x[4];
    unsigned i, p;
    for (i = 0; i < 4; i++)
        _mm_prefetch((const char *)field + ANYPREC_AVX512_PREFETCH + 64 * i, _MM_HINT_T0);
    for (p = 2; p < bits; p++) {
        _mm_prefetch((const char *)plane[p] + ANYPREC_AVX512_PREFETCH / 2, _MM_HINT_T0);
        _mm_prefetch((const char *)plane[p] + ANYPREC_AVX512_PREFETCH / 2 + 64, _MM_HINT_T0);
    }
    anyprec_avx512_input(pmpd_anyprec_super_input(xq, u, m->cols, s), x);
#pragma GCC unroll 4
    for (i = 0; i < PMPD_ANYPREC_ROW_BLOCK; i++)
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(anyprec_avx512_row_super(table, i, field, plane, 32 * i, x, bits)),
                                 scale, acc[i]);
}

/* The four accumulators' sums, in order: 14 shuffles and adds where four
 * _mm512_reduce_add_ps ran 32 (8 each, GCC 12). */
ANYPREC_AVX512_INLINE __m128 anyprec_avx512_sum4(const __m512 *acc)
{
    /* quarter pairs added: [acc0 (q0+q2, q1+q3) | acc1 (...)], and for 2, 3 */
    const __m512 t01 = _mm512_add_ps(_mm512_shuffle_f32x4(acc[0], acc[1], 0x44), _mm512_shuffle_f32x4(acc[0], acc[1], 0xEE));
    const __m512 t23 = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2], acc[3], 0x44), _mm512_shuffle_f32x4(acc[2], acc[3], 0xEE));
    /* quarter i: four partial sums of row i */
    __m512 v = _mm512_add_ps(_mm512_shuffle_f32x4(t01, t23, 0x88), _mm512_shuffle_f32x4(t01, t23, 0xDD));
    v = _mm512_add_ps(v, _mm512_permute_ps(v, 0x4E));
    v = _mm512_add_ps(v, _mm512_permute_ps(v, 0xB1));
    return _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), v));
}

/* The four rows of block r0 (r0 a multiple of 4); stores those inside
 * [row_begin, row_end).  The whole superblocks' addresses advance by
 * pmpd_anyprec_whole_step; only the shared partial one is looked up. */
ANYPREC_AVX512_INLINE void anyprec_avx512_gemv_block(const pmpd_anyprec_matrix *m, const int8_t *xq,
                                                     const pmpd_anyprec_units *u, float *y, uint32_t r0,
                                                     uint32_t row_begin, uint32_t row_end, const unsigned bits)
{
    __m512i table[2 * PMPD_ANYPREC_ROW_BLOCK];
    __m512 acc[PMPD_ANYPREC_ROW_BLOCK];
    const unsigned char *plane[PMPD_ANYPREC_MAX_BITS], *field;
    uint32_t s, i;
    unsigned p;
    anyprec_avx512_block_tables(m, r0, table, bits);
    for (i = 0; i < PMPD_ANYPREC_ROW_BLOCK; i++)
        acc[i] = _mm512_setzero_ps();
    field = pmpd_anyprec_super_slices(m, r0, 0, bits, plane);
    for (s = 0; s < m->full; s++) {
        anyprec_avx512_block_super(field, plane, m, xq, u, s, table, acc, bits);
        field += pmpd_anyprec_whole_step(m, 0);
        for (p = 2; p < bits; p++)
            plane[p] += pmpd_anyprec_whole_step(m, p);
    }
    if (s < m->superblocks) {
        field = pmpd_anyprec_super_slices(m, r0, s, bits, plane);
        anyprec_avx512_block_super(field, plane, m, xq, u, s, table, acc, bits);
    }
    pmpd_anyprec_store_block_x86(m, bits, u->sum, anyprec_avx512_sum4(acc), y, r0, row_begin, row_end);
}

PMPD_INTERNAL void pmpd_anyprec_gemv_avx512(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                            const float *xscale, float *y, uint32_t row_begin, uint32_t row_end)
{
    PMPD_ANYPREC_GEMV_BLOCKS(anyprec_avx512_gemv_block, m, bits, xq, xscale, y, row_begin, row_end);
}

#undef ANYPREC_AVX512_PREFETCH
#undef ANYPREC_AVX512_SELECT
#undef ANYPREC_AVX512_INLINE
#endif
