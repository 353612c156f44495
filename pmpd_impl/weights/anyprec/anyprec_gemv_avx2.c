/* AVX2 any-precision kernels for widths 2..4 of tensors whose planes 0
 * and 1 share a 2-bit slice.  One 32-byte load per slice covers 256
 * columns of a row; for the column groups 2q and 2q+1 a shift and an AND
 * per slice put their codes into the low and high nibble of each byte
 * (ORed together), and one in-lane byte shuffle per group looks the codes
 * up in the row's table.  The GEMV multiplies the entries with int8
 * activations (maddubs, no sign fix-up; below 4 bits two groups' int16
 * pair sums add before one madd widens them), and converts to float once
 * per 256 columns (one activation scale per superblock); the four rows of
 * a block are done together, each reading the activations as the memory
 * operands of its multiplies, and the block's slices are prefetched ahead.
 * On Zen3 the multiplies (2 pipes) and the bit placement bound it:
 * llvm-mca gives 1.4 / 2.0 / 2.6 cycles per 32 weights of a row at 2 / 3 /
 * 4 bits.
 * The GEMM (prefill) looks a row block's entries up once per superblock
 * and multiplies them with a tile of tokens' int8 activations. */
#include "pmpd_impl/weights/anyprec/anyprec.h"

#if PMPD_USE_AVX2
#include <immintrin.h>
#include <string.h>

#include "pmpd_impl/weights/anyprec/anyprec_x86.h"
#include "pmpd_impl/weights/anyprec/anyprec_store_x86.h"

/* Bytes ahead in the 2-bit slice that the GEMV prefetches (half as far in
 * the 1-bit slices, which advance half as fast): 1-4 KB measured alike on
 * Zen3, and 0.5 KB or none 10-20% slower at 2 and 3 bits. */
#define ANYPREC_AVX2_PREFETCH 2048
/* VPDPBUSD (AVX-512 VNNI with VL, or AVX-VNNI) multiplies, pairs and adds
 * in one instruction, so no int16 stage remains. */
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define ANYPREC_AVX2_VNNI 1
#define ANYPREC_AVX2_DPBUSD _mm256_dpbusd_epi32
#elif defined(__AVXVNNI__)
#define ANYPREC_AVX2_VNNI 1
#define ANYPREC_AVX2_DPBUSD _mm256_dpbusd_avx_epi32
#else
#define ANYPREC_AVX2_VNNI 0
#endif




/* Tokens whose (row, token) sums a GEMM tile keeps (4 KB of vectors). */
#define ANYPREC_AVX2_TOKEN_TILE 32
#if defined(__GNUC__)
#define ANYPREC_AVX2_INLINE static inline __attribute__((always_inline))
/* volatile: GCC merges identical non-volatile asm statements. */
#define ANYPREC_AVX2_OPAQUE(p) __asm__ volatile("" : "+r"(p))
#else
#define ANYPREC_AVX2_INLINE static inline
#define ANYPREC_AVX2_OPAQUE(p) ((void)0)
#endif

ANYPREC_AVX2_INLINE __m256i anyprec_avx2_load(const void *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

/* dot + the products of two groups' entries (ea, eb: unsigned bytes) with
 * their activations (xa, xb), as int32 sums of 4: one VPDPBUSD each where
 * the target has VNNI; otherwise maddubs, then below 4 bits (6-bit entries)
 * one int16 add before the madd that widens (anyprec.h), at 4 bits a madd
 * each. */
ANYPREC_AVX2_INLINE __m256i anyprec_avx2_dot2(__m256i dot, __m256i ea, __m256i xa, __m256i eb, __m256i xb,
                                              const unsigned bits)
{
#if ANYPREC_AVX2_VNNI
    (void)bits;
    return ANYPREC_AVX2_DPBUSD(ANYPREC_AVX2_DPBUSD(dot, ea, xa), eb, xb);
#else
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i a = _mm256_maddubs_epi16(ea, xa), b = _mm256_maddubs_epi16(eb, xb);
    if (bits > 3)
        return _mm256_add_epi32(dot, _mm256_add_epi32(_mm256_madd_epi16(a, ones), _mm256_madd_epi16(b, ones)));
    return _mm256_add_epi32(dot, _mm256_madd_epi16(_mm256_add_epi16(a, b), ones));
#endif
}

/* Plane 2's bits of column groups 2q and 2q+1 (bits q and q+4 of each
 * byte) moved to bits 2 and 6, where the 3-bit codes want them. */
ANYPREC_AVX2_INLINE __m256i anyprec_avx2_plane2_bits(const unsigned char *plane, unsigned q)
{
    __m256i v = anyprec_avx2_load(plane);
    if (q < 2)
        v = _mm256_slli_epi16(v, (int)(2 - q));
    else if (q > 2)
        v = _mm256_srli_epi16(v, (int)(q - 2));
    return _mm256_and_si256(v, _mm256_set1_epi8(0x44));
}

/* The codes of one row's superblock as four vectors, pair q holding column
 * group 2q in the low nibble of each byte and 2q+1 in the high one, from
 * the row's 64 bytes of the 2-bit slice (halves f0: groups 0, 2, 1, 3 at
 * bit pairs 0, 2, 4, 6; f1: groups 4, 6, 5, 7) and 32 bytes of each upper
 * plane at plane[p] + at (bit b: group 2 (b % 4) + b / 4).
 *
 * 3 bits: each pair is the slice's fields of its groups ORed with plane
 * 2's bits shifted into place.
 *
 * 4 bits: planes 2 and 3 are merged first, e holding the upper two code
 * bits of groups 0, 4, 1, 5 at bit pairs 0, 2, 4, 6 and o those of groups
 * 2, 6, 3, 7; each pair then takes an AND-OR of a slice half and e or o
 * (34 vector operations per row and superblock with the nibble split,
 * against 40 placing each plane's bits pair by pair).  Pairs 1 and 3 come
 * out with their lower two bits above the upper two: their lookups use
 * the row's table with the index's halves swapped
 * (anyprec_avx2_block_tables).  Written out, not looped, so the compiler
 * keeps everything in registers. */
ANYPREC_AVX2_INLINE void anyprec_avx2_codes(const unsigned char *field, const unsigned char *const *plane, size_t at,
                                            __m256i *codes, const unsigned bits)
{
    const __m256i m33 = _mm256_set1_epi8(0x33), mcc = _mm256_set1_epi8((char)0xCC);
    const __m256i f0 = anyprec_avx2_load(field), f1 = anyprec_avx2_load(field + 32);
    if (bits == 4) {
        const __m256i m55 = _mm256_set1_epi8(0x55), maa = _mm256_set1_epi8((char)0xAA);
        const __m256i b2 = anyprec_avx2_load(plane[2] + at), b3 = anyprec_avx2_load(plane[3] + at);
        const __m256i e = _mm256_or_si256(_mm256_and_si256(b2, m55), _mm256_slli_epi16(_mm256_and_si256(b3, m55), 1));
        const __m256i o = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2, 1), m55), _mm256_and_si256(b3, maa));
        codes[0] = _mm256_or_si256(_mm256_and_si256(f0, m33), _mm256_and_si256(_mm256_slli_epi16(e, 2), mcc));
        codes[1] = _mm256_or_si256(_mm256_and_si256(f0, mcc), _mm256_and_si256(o, m33));
        codes[2] = _mm256_or_si256(_mm256_and_si256(f1, m33), _mm256_and_si256(e, mcc));
        codes[3] = _mm256_or_si256(_mm256_and_si256(f1, mcc), _mm256_and_si256(_mm256_srli_epi16(o, 2), m33));
    } else {
        codes[0] = _mm256_or_si256(_mm256_and_si256(f0, m33), anyprec_avx2_plane2_bits(plane[2] + at, 0));
        codes[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(f0, 2), m33),
                                   anyprec_avx2_plane2_bits(plane[2] + at, 1));
        codes[2] = _mm256_or_si256(_mm256_and_si256(f1, m33), anyprec_avx2_plane2_bits(plane[2] + at, 2));
        codes[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(f1, 2), m33),
                                   anyprec_avx2_plane2_bits(plane[2] + at, 3));
    }
}

/* The table pair q's codes index (the swapped one for pairs 1 and 3 at 4
 * bits, table[PMPD_ANYPREC_ROW_BLOCK + i]). */
ANYPREC_AVX2_INLINE __m256i anyprec_avx2_pair_table(const __m256i *table, unsigned i, unsigned q, const unsigned bits)
{
    return bits == 4 && q % 2 ? table[PMPD_ANYPREC_ROW_BLOCK + i] : table[i];
}

/* Groups 2q and 2q+1 of one row (pair q's codes, the table they index)
 * added to its int32 sums.  At 3 bits the
 * codes leave bits 3 and 7 of each byte clear, so the low nibble needs no
 * AND (vpshufb ignores bits 4..6) and the high one none after the shift;
 * their 6-bit entries let both groups' pair sums add in int16 (anyprec.h)
 * before one madd widens them.  At 4 bits each group widens alone. */
ANYPREC_AVX2_INLINE __m256i anyprec_avx2_row_pair(__m256i dot, __m256i table, __m256i codes, unsigned q,
                                                  const int8_t *x, const unsigned bits)
{
    const __m256i low = _mm256_set1_epi8(0x0F);
    __m256i lo = bits > 3 ? _mm256_and_si256(codes, low) : codes, hi = _mm256_srli_epi16(codes, 4);
    if (bits > 3)
        hi = _mm256_and_si256(hi, low);
    return anyprec_avx2_dot2(dot, _mm256_shuffle_epi8(table, lo), anyprec_avx2_load(x + 64 * q),
                             _mm256_shuffle_epi8(table, hi), anyprec_avx2_load(x + 64 * q + 32), bits);
}

/* At 2 bits a nibble of the 2-bit slice holds two codes whole (groups 4h
 * and 4h+2 low, 4h+1 and 4h+3 high); a table indexed by its low two bits
 * and one by its high two bits read them with no further shift.  Groups
 * 4h..4h+3 of one row added to its sums, two groups per int16 sum. */
ANYPREC_AVX2_INLINE __m256i anyprec_avx2_row_quad(__m256i dot, __m256i by_low, __m256i by_high,
                                                  const unsigned char *field, unsigned h, const int8_t *x)
{
    const __m256i low = _mm256_set1_epi8(0x0F);
    const int8_t *xh = x + 128 * h;
    __m256i f = anyprec_avx2_load(field + 32 * h);
    __m256i lo = _mm256_and_si256(f, low), hi = _mm256_and_si256(_mm256_srli_epi16(f, 4), low);
    dot = anyprec_avx2_dot2(dot, _mm256_shuffle_epi8(by_low, lo), anyprec_avx2_load(xh),
                            _mm256_shuffle_epi8(by_high, lo), anyprec_avx2_load(xh + 64), 2);
    return anyprec_avx2_dot2(dot, _mm256_shuffle_epi8(by_low, hi), anyprec_avx2_load(xh + 32),
                             _mm256_shuffle_epi8(by_high, hi), anyprec_avx2_load(xh + 96), 2);
}

/* Superblock s of row i of the block at r0 (the block's rows lie 64 bytes
 * apart in the 2-bit slice, 32 in the others), added to acc: int32 sums
 * (at most 8 groups of 32 products of 127 * 127), one conversion. */
ANYPREC_AVX2_INLINE __m256 anyprec_avx2_row_super(__m256 acc, const __m256i *table, unsigned i,
                                                  const unsigned char *field, const unsigned char *const *plane,
                                                  const int8_t *x, __m256 scale, const unsigned bits)
{
    __m256i dot = _mm256_setzero_si256();
    unsigned q;
    if (bits == 2) {
        dot = anyprec_avx2_row_quad(dot, table[i], table[PMPD_ANYPREC_ROW_BLOCK + i], field + 64 * i, 0, x);
        dot = anyprec_avx2_row_quad(dot, table[i], table[PMPD_ANYPREC_ROW_BLOCK + i], field + 64 * i, 1, x);
    } else {
        __m256i codes[4];
        anyprec_avx2_codes(field + 64 * i, plane, 32 * i, codes, bits);
#pragma GCC unroll 4
        for (q = 0; q < 4; q++)
            dot = anyprec_avx2_row_pair(dot, anyprec_avx2_pair_table(table, i, q, bits), codes[q], q, x, bits);
    }
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc);
}

/* One superblock of the four rows of a block: its 2-bit slice at field,
 * plane p at plane[p], the superblock's activations x (slot order) and
 * scale; each row's sums added to acc[i]. */
ANYPREC_AVX2_INLINE void anyprec_avx2_super_rows(const int8_t *x, __m256 scale, const unsigned char *field,
                                                 const unsigned char *const *plane, const __m256i *table, __m256 *acc,
                                                 const unsigned bits)
{
    unsigned i;
    pmpd_anyprec_prefetch_x86(field, plane, bits, ANYPREC_AVX2_PREFETCH);
#pragma GCC unroll 4
    for (i = 0; i < PMPD_ANYPREC_ROW_BLOCK; i++) {
        /* Each row reads the activations through a copy of the pointer the
         * compiler cannot see through: with one pointer GCC loads the
         * superblock's 8 activation vectors once for the four rows and,
         * short of registers, stores them to the stack and reloads them;
         * read per row, each load folds into its VPMADDUBSW.  The tables
         * go the same way, reloaded per row (a load each), which leaves
         * registers for the accumulators: GCC 12 kept those on the stack,
         * each row's FMA waiting on a store-forwarded reload (2 bits, 384
         * columns in L2 on Zen5: 9% faster). */
        const int8_t *xr = x;
        const __m256i *tr = table;
        ANYPREC_AVX2_OPAQUE(xr);
        ANYPREC_AVX2_OPAQUE(tr);
        acc[i] = anyprec_avx2_row_super(acc[i], tr, i, field, plane, xr, scale, bits);
    }
}

/* One superblock of the four rows of the block at r0. */
ANYPREC_AVX2_INLINE void anyprec_avx2_block_super(const pmpd_anyprec_matrix *m, const int8_t *xq,
                                                  const pmpd_anyprec_units *u, uint32_t r0, uint32_t s,
                                                  const __m256i *table, __m256 *acc, const unsigned bits)
{
    const unsigned char *plane[PMPD_ANYPREC_MAX_BITS];
    const unsigned char *field = pmpd_anyprec_super_slices(m, r0, s, bits, plane);
    anyprec_avx2_super_rows(pmpd_anyprec_super_input(xq, u, m->cols, s), _mm256_set1_ps(u->scale[s]), field, plane,
                            table, acc, bits);
}

/* Row r's 2^bits entries in a 128-bit lane (zero past the last row when
 * the block is not whole), straight from the matrix's tables. */
ANYPREC_AVX2_INLINE __m128i anyprec_avx2_row_entries(const pmpd_anyprec_matrix *m, uint32_t r, int whole,
                                                    const unsigned bits)
{
    const unsigned char *entries = m->tables[bits] + ((size_t)r << bits);
    if (!whole)
        return pmpd_anyprec_entries_x86(m, bits, r);
    if (bits == 4)
        return _mm_loadu_si128((const __m128i *)(const void *)entries);
    if (bits == 3)
        return _mm_loadl_epi64((const __m128i *)(const void *)entries);
    {
        int32_t four;
        memcpy(&four, entries, sizeof four);
        return _mm_set1_epi32(four);
    }
}

/* Row i's two tables from t (its entries in each 128-bit lane): at 2 bits
 * by low bits, then all four by high bits; at 4 bits also the one with the
 * index's halves swapped.  In-lane shuffles, so a share's table (a row of
 * each of two blocks, one per lane) stays per lane. */
ANYPREC_AVX2_INLINE void anyprec_avx2_set_tables(__m256i t, unsigned i, __m256i *table, const unsigned bits)
{
    /* Entry n of the 2-bit tables by low / by high bits: entry n%4 / n/4;
     * of the 4-bit table with the index's halves swapped: entry n/4 + 4 (n%4). */
    const __m256i by_low = _mm256_set1_epi32(0x03020100), by_high = _mm256_setr_epi8(
        0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m256i swapped = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12, 1, 5,
                                             9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    table[i] = bits == 2 ? _mm256_shuffle_epi8(t, by_low) : t;
    table[PMPD_ANYPREC_ROW_BLOCK + i] = _mm256_shuffle_epi8(t, bits == 4 ? swapped : by_high);
}

/* The tables of the four rows of the block at r0, each in both 128-bit
 * lanes, loaded straight from the matrix's tables when the block has no
 * padding rows. */
ANYPREC_AVX2_INLINE void anyprec_avx2_block_tables(const pmpd_anyprec_matrix *m, uint32_t r0, __m256i *table,
                                                   const unsigned bits)
{
    const int whole = r0 + PMPD_ANYPREC_ROW_BLOCK <= m->rows;
    unsigned i;
    for (i = 0; i < PMPD_ANYPREC_ROW_BLOCK; i++)
        anyprec_avx2_set_tables(_mm256_broadcastsi128_si256(anyprec_avx2_row_entries(m, r0 + i, whole, bits)), i,
                                table, bits);
}

/* The four rows' sums of acc: both lanes' partial sums, rows in order in
 * each lane (lane 0: columns 0-3 of every 8, lane 1: 4-7). */
static __m256 anyprec_avx2_lane_sums4(const __m256 *acc)
{
    return _mm256_hadd_ps(_mm256_hadd_ps(acc[0], acc[1]), _mm256_hadd_ps(acc[2], acc[3]));
}

/* The four rows' sums of acc, in row order. */
static __m128 anyprec_avx2_sum4(const __m256 *acc)
{
    const __m256 pairs = anyprec_avx2_lane_sums4(acc);
    return _mm_add_ps(_mm256_castps256_ps128(pairs), _mm256_extractf128_ps(pairs, 1));
}

/* The whole superblocks of the block at r0 (the partial one too with
 * partial), its four rows' sums in row order. */
ANYPREC_AVX2_INLINE __m128 anyprec_avx2_block_sums(const pmpd_anyprec_matrix *m, const int8_t *xq,
                                                   const pmpd_anyprec_units *u, uint32_t r0, int partial,
                                                   const unsigned bits)
{
    __m256i table[2 * PMPD_ANYPREC_ROW_BLOCK];
    __m256 acc[PMPD_ANYPREC_ROW_BLOCK];
    const uint32_t end = partial ? m->superblocks : m->full;
    uint32_t s;
    if (end == 0) /* a share's blocks without whole superblocks: no tables to build */
        return _mm_setzero_ps();
    anyprec_avx2_block_tables(m, r0, table, bits);
    acc[0] = acc[1] = acc[2] = acc[3] = _mm256_setzero_ps();
    for (s = 0; s < end; s++)
        anyprec_avx2_block_super(m, xq, u, r0, s, table, acc, bits);
    return anyprec_avx2_sum4(acc);
}

/* The two row blocks of a share (tail_shift 1: a partial superblock of 65
 * to 128 columns), r0 and r0 + 4: each block's whole superblocks, then one
 * pass over the partial superblock they share.  Its 32-byte groups hold
 * the first block's codes in their low 16 bytes and the second's in the
 * high 16, so with a table holding a row of each block, one per 128-bit
 * lane (VPSHUFB looks up within the lane), and the tail activations in
 * both lanes (xdup), one pass gives both blocks' sums, each in its own
 * lane, where a pass per block spent half its work on zero activations:
 * on pycode21M's 384 columns the passes per block fall from 2 to 1.5. */
ANYPREC_AVX2_INLINE void anyprec_avx2_gemv_share(const pmpd_anyprec_matrix *m, const int8_t *xq,
                                                 const pmpd_anyprec_units *u, const int8_t *xdup, float *y,
                                                 uint32_t r0, uint32_t row_begin, uint32_t row_end,
                                                 const unsigned bits)
{
    const uint32_t r1 = r0 + PMPD_ANYPREC_ROW_BLOCK;
    const int whole0 = r1 <= m->rows, whole1 = r1 + PMPD_ANYPREC_ROW_BLOCK <= m->rows;
    const __m128 first = anyprec_avx2_block_sums(m, xq, u, r0, 0, bits);
    const __m128 second = anyprec_avx2_block_sums(m, xq, u, r1, 0, bits);
    const unsigned char *plane[PMPD_ANYPREC_MAX_BITS], *field = pmpd_anyprec_super_slices(m, r0, m->full, bits, plane);
    __m256i table[2 * PMPD_ANYPREC_ROW_BLOCK];
    __m256 acc[PMPD_ANYPREC_ROW_BLOCK], lanes;
    unsigned i;
    for (i = 0; i < PMPD_ANYPREC_ROW_BLOCK; i++)
        anyprec_avx2_set_tables(_mm256_inserti128_si256(
                                    _mm256_castsi128_si256(anyprec_avx2_row_entries(m, r0 + i, whole0, bits)),
                                    anyprec_avx2_row_entries(m, r1 + i, whole1, bits), 1),
                                i, table, bits);
    acc[0] = acc[1] = acc[2] = acc[3] = _mm256_setzero_ps();
    anyprec_avx2_super_rows(xdup, _mm256_set1_ps(u->scale[m->full]), field, plane, table, acc, bits);
    lanes = anyprec_avx2_lane_sums4(acc);
    pmpd_anyprec_store_block_x86(m, bits, u->sum, _mm_add_ps(first, _mm256_castps256_ps128(lanes)), y, r0, row_begin,
                                 row_end);
    pmpd_anyprec_store_block_x86(m, bits, u->sum, _mm_add_ps(second, _mm256_extractf128_ps(lanes, 1)), y, r1,
                                 row_begin, row_end);
}

/* Rows [row_begin, row_end): by shares of two blocks where the layout
 * shares its partial superblock by two and the whole share lies in the
 * range, else block by block; bits a constant after inlining. */
ANYPREC_AVX2_INLINE void anyprec_avx2_gemv_rows(const pmpd_anyprec_matrix *m, const int8_t *xq,
                                                const pmpd_anyprec_units *u, const int8_t *xdup, float *y,
                                                uint32_t row_begin, uint32_t row_end, const unsigned bits)
{
    const int shared = xdup != NULL;
    uint32_t r0 = row_begin / PMPD_ANYPREC_ROW_BLOCK * PMPD_ANYPREC_ROW_BLOCK;
    while (r0 < row_end) {
        if (shared && r0 % (2 * PMPD_ANYPREC_ROW_BLOCK) == 0 && r0 + PMPD_ANYPREC_ROW_BLOCK < row_end) {
            anyprec_avx2_gemv_share(m, xq, u, xdup, y, r0, row_begin, row_end, bits);
            r0 += 2 * PMPD_ANYPREC_ROW_BLOCK;
        } else {
            pmpd_anyprec_store_block_x86(m, bits, u->sum, anyprec_avx2_block_sums(m, xq, u, r0, 1, bits), y, r0,
                                         row_begin, row_end);
            r0 += PMPD_ANYPREC_ROW_BLOCK;
        }
    }
}

PMPD_INTERNAL void pmpd_anyprec_gemv_avx2(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                          const float *xscale, float *y, uint32_t row_begin, uint32_t row_end)
{
    pmpd_anyprec_units u;
    int8_t dup[PMPD_ANYPREC_SUPER], *xdup = NULL;
    pmpd_anyprec_prepare_units(m, xq, xscale, &u);
    if (m->tail_shift == 1 && m->full < m->superblocks) {
        pmpd_anyprec_dup_tail_x86(m, &u, dup);
        xdup = dup;
    }
    if (bits == 2)
        anyprec_avx2_gemv_rows(m, xq, &u, xdup, y, row_begin, row_end, 2);
    else if (bits == 3)
        anyprec_avx2_gemv_rows(m, xq, &u, xdup, y, row_begin, row_end, 3);
    else
        anyprec_avx2_gemv_rows(m, xq, &u, xdup, y, row_begin, row_end, 4);
}

/* Group g of row i of a block, as looked-up entries: e[8 * i + g]. */
ANYPREC_AVX2_INLINE void anyprec_avx2_block_entries(const pmpd_anyprec_matrix *m, uint32_t r0, uint32_t s,
                                                    const __m256i *table, __m256i *e, const unsigned bits)
{
    const __m256i low = _mm256_set1_epi8(0x0F);
    const unsigned char *plane[PMPD_ANYPREC_MAX_BITS];
    const unsigned char *field = pmpd_anyprec_super_slices(m, r0, s, bits, plane);
    unsigned i, h, q;
#pragma GCC unroll 4
    for (i = 0; i < PMPD_ANYPREC_ROW_BLOCK; i++) {
        __m256i *row = e + 8 * i;
        if (bits == 2) {
            const __m256i by_low = table[i], by_high = table[PMPD_ANYPREC_ROW_BLOCK + i];
#pragma GCC unroll 2
            for (h = 0; h < 2; h++) {
                __m256i f = anyprec_avx2_load(field + 64 * i + 32 * h);
                __m256i lo = _mm256_and_si256(f, low), hi = _mm256_and_si256(_mm256_srli_epi16(f, 4), low);
                row[4 * h] = _mm256_shuffle_epi8(by_low, lo);
                row[4 * h + 1] = _mm256_shuffle_epi8(by_low, hi);
                row[4 * h + 2] = _mm256_shuffle_epi8(by_high, lo);
                row[4 * h + 3] = _mm256_shuffle_epi8(by_high, hi);
            }
        } else {
            __m256i codes[4];
            anyprec_avx2_codes(field + 64 * i, plane, 32 * i, codes, bits);
#pragma GCC unroll 4
            for (q = 0; q < 4; q++) {
                const __m256i t = anyprec_avx2_pair_table(table, i, q, bits);
                __m256i lo = bits > 3 ? _mm256_and_si256(codes[q], low) : codes[q], hi = _mm256_srli_epi16(codes[q], 4);
                if (bits > 3)
                    hi = _mm256_and_si256(hi, low);
                row[2 * q] = _mm256_shuffle_epi8(t, lo);
                row[2 * q + 1] = _mm256_shuffle_epi8(t, hi);
            }
        }
    }
}

/* Slot group g (32 slots) of a token's superblock at xt, its activations
 * in column order: span of them, the rest zero (span < 32 in a shared
 * partial superblock, anyprec.h; the token's row is zero past cols up to
 * its stride, so the loads stay inside it). */
ANYPREC_AVX2_INLINE __m256i anyprec_avx2_group_input(const int8_t *xt, unsigned g, unsigned span)
{
    if (span == PMPD_ANYPREC_GROUP)
        return anyprec_avx2_load(xt + PMPD_ANYPREC_GROUP * g);
    if (span == PMPD_ANYPREC_GROUP / 2)
        return _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(xt + span * g)));
    return _mm256_zextsi128_si256(_mm_loadl_epi64((const __m128i *)(const void *)(xt + span * g)));
}

/* One row's entries (8 groups) dotted with one token's superblock x, as
 * int32 sums: below 4 bits two groups share a madd (anyprec.h). */
ANYPREC_AVX2_INLINE __m256i anyprec_avx2_entries_dot(const __m256i *e, const __m256i *x, const unsigned bits)
{
    __m256i dot = _mm256_setzero_si256();
    unsigned q;
#pragma GCC unroll 4
    for (q = 0; q < 4; q++)
        dot = anyprec_avx2_dot2(dot, e[2 * q], x[2 * q], e[2 * q + 1], x[2 * q + 1], bits);
    return dot;
}

/* Tokens t0 .. t0+tile-1 against the block at r0: per superblock the
 * block's entries are looked up once and serve every token of the tile;
 * each (row, token) sum stays a vector until the block is done. */
ANYPREC_AVX2_INLINE void anyprec_avx2_gemm_tile(const pmpd_anyprec_matrix *m, const int8_t *xq, const float *xscale,
                                                const float *xsum, size_t t0, size_t tile, const __m256i *table,
                                                float *y, size_t y_stride, uint32_t r0, uint32_t row_begin,
                                                uint32_t row_end, const unsigned bits)
{
    const size_t stride = pmpd_anyprec_token_stride(m->cols);
    __m256i e[8 * PMPD_ANYPREC_ROW_BLOCK];
    __m256 acc[PMPD_ANYPREC_ROW_BLOCK * ANYPREC_AVX2_TOKEN_TILE];
    uint32_t s, i, g;
    size_t t;
    for (t = 0; t < PMPD_ANYPREC_ROW_BLOCK * tile; t++)
        acc[t] = _mm256_setzero_ps();
    for (s = 0; s < m->superblocks; s++) {
        const unsigned span = s < m->full ? PMPD_ANYPREC_GROUP : m->tail_span;
        anyprec_avx2_block_entries(m, r0, s, table, e, bits);
        for (t = 0; t < tile; t++) {
            const int8_t *xt = xq + (t0 + t) * stride + (size_t)s * PMPD_ANYPREC_SUPER;
            const __m256 scale = _mm256_set1_ps(xscale[(t0 + t) * (stride / PMPD_ANYPREC_GROUP) + 8 * s]);
            __m256i x[8];
#pragma GCC unroll 8
            for (g = 0; g < 8; g++)
                x[g] = anyprec_avx2_group_input(xt, g, span);
#pragma GCC unroll 4
            for (i = 0; i < PMPD_ANYPREC_ROW_BLOCK; i++)
                acc[i * tile + t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(anyprec_avx2_entries_dot(e + 8 * i, x, bits)),
                                                    scale, acc[i * tile + t]);
        }
    }
    for (t = 0; t < tile; t++) {
        __m256 rows[PMPD_ANYPREC_ROW_BLOCK];
        for (i = 0; i < PMPD_ANYPREC_ROW_BLOCK; i++)
            rows[i] = acc[i * tile + t];
        pmpd_anyprec_store_block_x86(m, bits, xsum[t0 + t], anyprec_avx2_sum4(rows), y + (t0 + t) * y_stride, r0,
                                     row_begin, row_end);
    }
}

ANYPREC_AVX2_INLINE void anyprec_avx2_gemm_rows(const pmpd_anyprec_matrix *m, const int8_t *xq, const float *xscale,
                                                const float *xsum, size_t n, float *y, size_t y_stride,
                                                uint32_t row_begin, uint32_t row_end, const unsigned bits)
{
    __m256i table[2 * PMPD_ANYPREC_ROW_BLOCK];
    uint32_t r0;
    size_t t0;
    for (r0 = row_begin / PMPD_ANYPREC_ROW_BLOCK * PMPD_ANYPREC_ROW_BLOCK; r0 < row_end; r0 += PMPD_ANYPREC_ROW_BLOCK) {
        anyprec_avx2_block_tables(m, r0, table, bits);
        for (t0 = 0; t0 < n; t0 += ANYPREC_AVX2_TOKEN_TILE) {
            size_t tile = n - t0 < ANYPREC_AVX2_TOKEN_TILE ? n - t0 : ANYPREC_AVX2_TOKEN_TILE;
            anyprec_avx2_gemm_tile(m, xq, xscale, xsum, t0, tile, table, y, y_stride, r0, row_begin, row_end, bits);
        }
    }
}

PMPD_INTERNAL void pmpd_anyprec_gemm_avx2(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                          const float *xscale, const float *xsum, size_t n, float *y,
                                          size_t y_stride, uint32_t row_begin, uint32_t row_end)
{
    switch (bits) {
    case 2: anyprec_avx2_gemm_rows(m, xq, xscale, xsum, n, y, y_stride, row_begin, row_end, 2); break;
    case 3: anyprec_avx2_gemm_rows(m, xq, xscale, xsum, n, y, y_stride, row_begin, row_end, 3); break;
    default: anyprec_avx2_gemm_rows(m, xq, xscale, xsum, n, y, y_stride, row_begin, row_end, 4); break;
    }
}

#undef ANYPREC_AVX2_TOKEN_TILE
#undef ANYPREC_AVX2_PREFETCH
#undef ANYPREC_AVX2_VNNI
#undef ANYPREC_AVX2_DPBUSD
#undef ANYPREC_AVX2_INLINE
#undef ANYPREC_AVX2_OPAQUE
#endif
