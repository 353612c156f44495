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

#include "pmpd_impl/weights/anyprec/anyprec_x86.h"
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

/* A row's lookup table (anyprec_avx512_block_tables: the block at r0 has
 * two per row, row i's table[i] and table[4 + i]), each 64 bytes indexed by
 * a byte's low six bits:
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
ANYPREC_AVX512_INLINE __m512i anyprec_avx512_row_table(const pmpd_anyprec_matrix *m, uint32_t r, const int whole,
                                                      const unsigned bits)
{
    const unsigned char *entries = m->tables[bits] + ((size_t)r << bits);
    if (!whole) {
        const __m512i t = _mm512_broadcast_i32x4(pmpd_anyprec_entries_x86(m, bits, r));
        return bits == 2 ? _mm512_broadcastd_epi32(_mm512_castsi512_si128(t))
               : bits == 3 ? _mm512_broadcastq_epi64(_mm512_castsi512_si128(t)) : t;
    }
    if (bits == 2) {
        int32_t four;
        memcpy(&four, entries, sizeof four);
        return _mm512_set1_epi32(four);
    }
    if (bits == 3) {
        long long eight;
        memcpy(&eight, entries, sizeof eight);
        return _mm512_set1_epi64(eight);
    }
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)entries));
}

/* The second table of a row at 2 and 4 bits (table[4 + i] above) from its
 * first: the same permutation within every 16 bytes (an in-lane shuffle,
 * so a share's merged table keeps each member's entries in its lanes). */
ANYPREC_AVX512_INLINE __m512i anyprec_avx512_high_table(__m512i t, const unsigned bits)
{
    const __m512i two_pairs = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
    const __m512i swap_halves =
        _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    return _mm512_shuffle_epi8(t, bits == 2 ? two_pairs : swap_halves);
}

/* The tables of the block at r0's four rows. */
ANYPREC_AVX512_INLINE void anyprec_avx512_block_tables(const pmpd_anyprec_matrix *m, uint32_t r0, __m512i *table,
                                                       const unsigned bits)
{
    const int whole = r0 + PMPD_ANYPREC_ROW_BLOCK <= m->rows;
    unsigned i;
    for (i = 0; i < PMPD_ANYPREC_ROW_BLOCK; i++) {
        table[i] = anyprec_avx512_row_table(m, r0 + i, whole, bits);
        if (bits != 3)
            table[PMPD_ANYPREC_ROW_BLOCK + i] = anyprec_avx512_high_table(table[i], bits);
    }
}

/* Plane p's 32 bytes of a row's superblock in both halves. */
ANYPREC_AVX512_INLINE __m512i anyprec_avx512_plane(const unsigned char *plane)
{
    return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)plane));
}

/* The row blocks of a share read its partial superblock in one pass
 * (anyprec_avx512_gemv_share): member b's codes sit in bytes [b span,
 * (b + 1) span) of each 32, and its table in the b-th 64 / members bytes of
 * a merged one, so an index keeps its low 6 - tail_shift bits (keep) and
 * takes the member's number above them (member, per byte); lanes[b]
 * selects the int32 sums of member b's bytes. */
typedef struct anyprec_avx512_share {
    __m512i keep, member;
    __mmask16 lanes[4];
} anyprec_avx512_share;

/* VPTERNLOGD's truth table for "(a & b) | c". */
#define ANYPREC_AVX512_KEEP_OR 0xEA

/* dot + entries (unsigned) times activations x, in int32 sums of four;
 * with sh, codes index a share's merged table. */
ANYPREC_AVX512_INLINE __m512i anyprec_avx512_dot(__m512i dot, __m512i table, __m512i codes, __m512i x,
                                                 const anyprec_avx512_share *sh)
{
    if (sh)
        codes = _mm512_ternarylogic_epi32(codes, sh->keep, sh->member, ANYPREC_AVX512_KEEP_OR);
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
                                                       const __m512i *x, const anyprec_avx512_share *sh,
                                                       const unsigned bits)
{
    const __m512i f = _mm512_loadu_si512((const void *)(field + 64 * i));
    const __m512i m33 = _mm512_set1_epi8(0x33), m55 = _mm512_set1_epi8(0x55);
    const __m512i left_low = _mm512_inserti64x4(_mm512_set1_epi16(2), _mm256_setzero_si256(), 1);
    const __m512i left_high = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i t = table[i];
    __m512i dot = _mm512_setzero_si512(), c02, c13, t13 = t;
    if (bits == 2) {
        const __m512i hi = _mm512_srli_epi16(f, 4), by_high = table[PMPD_ANYPREC_ROW_BLOCK + i];
        dot = anyprec_avx512_dot(dot, t, f, x[0], sh);
        dot = anyprec_avx512_dot(dot, by_high, f, x[2], sh);
        dot = anyprec_avx512_dot(dot, t, hi, x[1], sh);
        return anyprec_avx512_dot(dot, by_high, hi, x[3], sh);
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
    dot = anyprec_avx512_dot(dot, t, c02, x[0], sh);
    dot = anyprec_avx512_dot(dot, t, _mm512_srli_epi16(c02, 4), x[1], sh);
    dot = anyprec_avx512_dot(dot, t13, c13, x[2], sh);
    return anyprec_avx512_dot(dot, t13, _mm512_srli_epi16(c13, 4), x[3], sh);
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
    unsigned i;
    pmpd_anyprec_prefetch_x86(field, plane, bits, ANYPREC_AVX512_PREFETCH);
    anyprec_avx512_input(pmpd_anyprec_super_input(xq, u, m->cols, s), x);
#pragma GCC unroll 4
    for (i = 0; i < PMPD_ANYPREC_ROW_BLOCK; i++)
        acc[i] = _mm512_fmadd_ps(
            _mm512_cvtepi32_ps(anyprec_avx512_row_super(table, i, field, plane, 32 * i, x, NULL, bits)), scale, acc[i]);
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

/* The whole superblocks of the four rows of block r0 added to acc (their
 * addresses advance by pmpd_anyprec_whole_step), and with partial the
 * partial superblock too, read for this block alone. */
ANYPREC_AVX512_INLINE void anyprec_avx512_block_sums(const pmpd_anyprec_matrix *m, const int8_t *xq,
                                                     const pmpd_anyprec_units *u, uint32_t r0, __m512 *acc,
                                                     const int partial, const unsigned bits)
{
    __m512i table[2 * PMPD_ANYPREC_ROW_BLOCK];
    const unsigned char *plane[PMPD_ANYPREC_MAX_BITS], *field;
    uint32_t s;
    unsigned p;
    if (m->full == 0 && !(partial && m->superblocks > 0))
        return;
    anyprec_avx512_block_tables(m, r0, table, bits);
    field = pmpd_anyprec_super_slices(m, r0, 0, bits, plane);
    for (s = 0; s < m->full; s++) {
        anyprec_avx512_block_super(field, plane, m, xq, u, s, table, acc, bits);
        field += pmpd_anyprec_whole_step(m, 0);
        for (p = 2; p < bits; p++)
            plane[p] += pmpd_anyprec_whole_step(m, p);
    }
    if (partial && m->full < m->superblocks) {
        field = pmpd_anyprec_super_slices(m, r0, m->full, bits, plane);
        anyprec_avx512_block_super(field, plane, m, xq, u, m->full, table, acc, bits);
    }
}

/* The four rows of block r0 (r0 a multiple of 4), its partial superblock
 * (if any) read for this block alone; stores the rows inside [row_begin,
 * row_end).  (When whole and partial superblocks had their tables built
 * apart, 460 columns ran 1.13-1.2x slower at 2 and 4 bits.) */
ANYPREC_AVX512_INLINE void anyprec_avx512_gemv_block(const pmpd_anyprec_matrix *m, const int8_t *xq,
                                                     const pmpd_anyprec_units *u, float *y, uint32_t r0,
                                                     uint32_t row_begin, uint32_t row_end, const unsigned bits)
{
    __m512 acc[PMPD_ANYPREC_ROW_BLOCK];
    uint32_t i;
    for (i = 0; i < PMPD_ANYPREC_ROW_BLOCK; i++)
        acc[i] = _mm512_setzero_ps();
    anyprec_avx512_block_sums(m, xq, u, r0, acc, 1, bits);
    pmpd_anyprec_store_block_x86(m, bits, u->sum, anyprec_avx512_sum4(acc), y, r0, row_begin, row_end);
}

/* The members of a share (row blocks r0, r0 + 4, ...: members = 1 <<
 * tail_shift of them, a constant after inlining): each member's whole
 * superblocks, then the partial superblock they share in one pass.  Each
 * row's 64 bytes there hold every member's codes (anyprec.h), and xdup
 * holds the tail activations once for each member's slots, so one pass
 * gives every member's sums in its own lanes, where reading it once per
 * member spent (members - 1) / members of the work on zero activations:
 * on pycode21M's 384 columns the passes per row block fall from 2 to 1.5
 * (2728 x 384 in L2, Zen5: 1.15-1.19x faster at 2 and 3 bits, the same at
 * 4).  The members' accumulators stay in registers so that the slices are
 * read in their stored order, whole superblocks first, and the shared one
 * is prefetched like the others: without that, 32000 x 384 streamed about
 * 1.1x slower than reading it per block, at 2 and 4 bits. */
ANYPREC_AVX512_INLINE void anyprec_avx512_gemv_share(const pmpd_anyprec_matrix *m, const int8_t *xq,
                                                     const pmpd_anyprec_units *u, const int8_t *xdup,
                                                     const anyprec_avx512_share *sh, float *y, uint32_t r0,
                                                     uint32_t row_begin, uint32_t row_end, const unsigned members,
                                                     const unsigned bits)
{
    const __m512 scale = _mm512_set1_ps(u->scale[m->full]);
    __m512i table[2 * PMPD_ANYPREC_ROW_BLOCK], x[4];
    __m512 acc[4][PMPD_ANYPREC_ROW_BLOCK];
    const unsigned char *plane[PMPD_ANYPREC_MAX_BITS], *field;
    unsigned i, b;
#pragma GCC unroll 4
    for (b = 0; b < members; b++) {
#pragma GCC unroll 4
        for (i = 0; i < PMPD_ANYPREC_ROW_BLOCK; i++)
            acc[b][i] = _mm512_setzero_ps();
        anyprec_avx512_block_sums(m, xq, u, r0 + PMPD_ANYPREC_ROW_BLOCK * b, acc[b], 0, bits);
    }
#pragma GCC unroll 4
    for (i = 0; i < PMPD_ANYPREC_ROW_BLOCK; i++) {
        /* member b's table in 64-bit lanes [8 b / members, 8 (b + 1) / members) */
        __m512i t = anyprec_avx512_row_table(m, r0 + i, r0 + PMPD_ANYPREC_ROW_BLOCK <= m->rows, bits);
#pragma GCC unroll 4
        for (b = 1; b < members; b++) {
            const uint32_t rb = r0 + PMPD_ANYPREC_ROW_BLOCK * b;
            t = _mm512_mask_blend_epi64((__mmask8)(((1u << (8 / members)) - 1) << (8 / members * b)), t,
                                        anyprec_avx512_row_table(m, rb + i, rb + PMPD_ANYPREC_ROW_BLOCK <= m->rows,
                                                                 bits));
        }
        table[i] = t;
        if (bits != 3)
            table[PMPD_ANYPREC_ROW_BLOCK + i] = anyprec_avx512_high_table(t, bits);
    }
    field = pmpd_anyprec_super_slices(m, r0, m->full, bits, plane);
    pmpd_anyprec_prefetch_x86(field, plane, bits, ANYPREC_AVX512_PREFETCH);
    anyprec_avx512_input(xdup, x);
#pragma GCC unroll 4
    for (i = 0; i < PMPD_ANYPREC_ROW_BLOCK; i++) {
        const __m512 dot =
            _mm512_cvtepi32_ps(anyprec_avx512_row_super(table, i, field, plane, 32 * i, x, sh, bits));
#pragma GCC unroll 4
        for (b = 0; b < members; b++)
            acc[b][i] = _mm512_mask3_fmadd_ps(dot, scale, acc[b][i], sh->lanes[b]);
    }
#pragma GCC unroll 4
    for (b = 0; b < members; b++)
        pmpd_anyprec_store_block_x86(m, bits, u->sum, anyprec_avx512_sum4(acc[b]), y, r0 + PMPD_ANYPREC_ROW_BLOCK * b,
                                     row_begin, row_end);
}

/* Rows [row_begin, row_end) by shares where a whole share lies in the
 * range, else block by block; bits a constant after inlining. */
ANYPREC_AVX512_INLINE void anyprec_avx512_gemv_rows(const pmpd_anyprec_matrix *m, const int8_t *xq,
                                                    const pmpd_anyprec_units *u, const int8_t *xdup,
                                                    const anyprec_avx512_share *sh, float *y, uint32_t row_begin,
                                                    uint32_t row_end, const unsigned bits)
{
    const uint32_t share_rows = PMPD_ANYPREC_ROW_BLOCK << m->tail_shift;
    uint32_t r0 = row_begin / PMPD_ANYPREC_ROW_BLOCK * PMPD_ANYPREC_ROW_BLOCK;
    while (r0 < row_end) {
        if (sh && r0 % share_rows == 0 && r0 + share_rows - PMPD_ANYPREC_ROW_BLOCK < row_end) {
            if (m->tail_shift == 1)
                anyprec_avx512_gemv_share(m, xq, u, xdup, sh, y, r0, row_begin, row_end, 2, bits);
            else
                anyprec_avx512_gemv_share(m, xq, u, xdup, sh, y, r0, row_begin, row_end, 4, bits);
            r0 += share_rows;
        } else {
            anyprec_avx512_gemv_block(m, xq, u, y, r0, row_begin, row_end, bits);
            r0 += PMPD_ANYPREC_ROW_BLOCK;
        }
    }
}

/* The share constants for a layout whose partial superblock is shared
 * (tail_shift 1 or 2), and xdup (pmpd_anyprec_dup_tail_x86); span = 32 >>
 * tail_shift, so a member's number is a shift, not a division. */
static void anyprec_avx512_share_setup(const pmpd_anyprec_matrix *m, const pmpd_anyprec_units *u, int8_t *xdup,
                                       anyprec_avx512_share *sh)
{
    const unsigned span_bits = 5 - m->tail_shift, low = 6 - m->tail_shift;
    unsigned char member[64];
    unsigned k, b;
    pmpd_anyprec_dup_tail_x86(m, u, xdup);
    for (k = 0; k < 64; k++)
        member[k] = (unsigned char)((k % PMPD_ANYPREC_GROUP) >> span_bits << low);
    sh->member = _mm512_loadu_si512((const void *)member);
    sh->keep = _mm512_set1_epi8((char)((1u << low) - 1));
    for (b = 0; b < 4; b++) {
        unsigned lanes = 0;
        for (k = 0; k < 16; k++)
            if ((4 * k % PMPD_ANYPREC_GROUP) >> span_bits == b)
                lanes |= 1u << k;
        sh->lanes[b] = (__mmask16)lanes;
    }
}

PMPD_INTERNAL void pmpd_anyprec_gemv_avx512(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                            const float *xscale, float *y, uint32_t row_begin, uint32_t row_end)
{
    pmpd_anyprec_units u;
    anyprec_avx512_share share, *sh = NULL;
    int8_t xdup[PMPD_ANYPREC_SUPER];
    pmpd_anyprec_prepare_units(m, xq, xscale, &u);
    if (m->tail_shift > 0 && m->full < m->superblocks) {
        anyprec_avx512_share_setup(m, &u, xdup, &share);
        sh = &share;
    }
    if (bits == 2)
        anyprec_avx512_gemv_rows(m, xq, &u, xdup, sh, y, row_begin, row_end, 2);
    else if (bits == 3)
        anyprec_avx512_gemv_rows(m, xq, &u, xdup, sh, y, row_begin, row_end, 3);
    else
        anyprec_avx512_gemv_rows(m, xq, &u, xdup, sh, y, row_begin, row_end, 4);
}

#undef ANYPREC_AVX512_PREFETCH
#undef ANYPREC_AVX512_SELECT
#undef ANYPREC_AVX512_KEEP_OR
#undef ANYPREC_AVX512_INLINE
#endif
