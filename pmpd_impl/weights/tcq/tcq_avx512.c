/* TCQ product with AVX-512 (PMPD_TCQ_USE_AVX512: F, BW, VNNI, VBMI,
 * VBMI2), the GEMV of decode and the token tiles of prefill; the AVX2
 * kernel (tcq_avx2.c) stays for the other x86 builds.  The layout is
 * tcq.h's.
 *
 * Only bits 6..15 of h = S (S + 1) are used, so h mod 2^16 does: the
 * states live in 16-bit lanes, 32 steps to a register.  A unit of 64 steps
 * (128 rotated columns, half a sequence) goes:
 *   windows  the sequence's n s / 8 <= 128 bytes (n = 128 steps, or 64 in a
 *            row's short last one, a unit alone) sit in two registers, so one
 *            VPERMI2B per 32 steps places bytes f + 1, f and one more f + 3,
 *            f + 2 (f = i s / 8, modulo the sequence: the tail-biting wrap
 *            costs nothing) in each 16-bit lane, and VPSHLDVW by the
 *            lane's constant (i s) % 8 leaves the window;
 *   hash     VPADDW, VPMULLW, and VPSRLW by 6: each 16-bit lane then
 *            holds h bits 6-13 in its low byte (the representative, bits
 *            0-6, and the swap, bit 7) and bits 14-15 in its high byte
 *            (the signs of the second and the first value);
 *   lookup   the table is symmetric (tcq.h), so only its 128
 *            representatives are kept, as value + 128 in two byte planes
 *            (first value, second) of 128 bytes.  One VPERMI2B packs the
 *            two registers' low bytes into 64 byte lanes in step order,
 *            one more their high bytes; each plane is one VPERMI2B by the
 *            low byte (VPERMI2B ignores bit 7), and two VPBLENDMB by the
 *            swap bit (VPMOVB2M) put the two looked-up values in order;
 *   values   masked VPSUBBs from zero negate the biased values whose sign
 *            bit is set (two VPTESTMB; -v mod 256 is -value + 128): byte
 *            j of the two registers is step j's first and second value;
 *   product  VPDPBUSD of the biased values (unsigned) with the int8
 *            activations put in the same order (the unit's even columns
 *            for the first values, the odd for the second: two VPERMI2B
 *            per token, shared by the tile's rows), started from minus
 *            128 times the sum of each lane's 8 activations, so every
 *            32-bit lane sums 8 exact products of one block (lanes 4 b ..
 *            4 b + 3 are block b): one conversion and one FMA with the
 *            four blocks' steps per 128 columns.
 * That is 8 VPERMI2B (2 of them the lookup) among about 27 operations per
 * unit and row on one token.  Format version 3's table had no symmetry:
 * four sub-tables of 128 entries per plane, 8 lookups and 6 blends, and
 * the two planes were interleaved into column order (VPUNPCKL/HBW) to meet
 * the activations as stored, two conversions and two FMAs per unit: 14
 * VPERMI2B among about 38 (1.2x slower in L2 on Zen5); version 1's int16
 * table took 22 among 66.  A VPGATHERDD per 16 steps would cost more:
 * gathers from the 2 KiB table took 0.85 cycles per element on Zen5 (14
 * cycles per 16), VPERMI2B runs 2 per cycle.
 *
 * The byte planes (256 bytes) and the shifts' window indices are built on the
 * stack once per call.  Rows go in tiles of 4 (below), each through the
 * token tiles of rotated_simd.h (a sequence decoded once per tile of up to
 * 4 tokens), the float sums kept per row and token across the row. */
#include "pmpd_impl/weights/tcq/tcq.h"
#include "pmpd_impl/weights/rotated/rotated_simd.h"

#if PMPD_TCQ_USE_AVX512
#include <immintrin.h>

#if defined(__GNUC__)
#define TCQ_AVX512_INLINE static inline __attribute__((always_inline))
#else
#define TCQ_AVX512_INLINE static inline
#endif

#define TCQ_AVX512_GROUPS (PMPD_TCQ_STEPS / 32) /* 32-step groups per sequence */
#define TCQ_AVX512_PLANES 2                     /* first and second values */

typedef struct tcq_avx512_shift {
    __m512i window[TCQ_AVX512_GROUPS][2]; /* VPERMI2B: bytes f + 1, f | f + 3, f + 2 per 16-bit lane */
    __m512i offset;                       /* per 16-bit lane: (i s) % 8 */
    __mmask64 load[2];                    /* the sequence's n s / 8 bytes in two 64-byte halves */
    size_t high_at;                       /* where the second half's load starts (0 when empty) */
} tcq_avx512_shift;

typedef struct tcq_avx512_consts {
    __m512i planes[TCQ_AVX512_PLANES][2]; /* the 128 entries' first, second values */
    __m512i high_bytes, low_bytes; /* VPERMI2B: two registers' 16-bit lanes into 64 bytes, step order */
    __m512i even_columns, odd_columns; /* VPERMI2B: a unit's 128 activations into the steps' two values' order */
    tcq_avx512_shift shift[2];
    tcq_avx512_shift last; /* a row's last sequence (s2, m->last_steps) */
} tcq_avx512_consts;

/* x modulo bytes for x below a few times bytes: subtraction, where the
 * 512 divisions by a runtime divisor per call took 8.7% of a 1024 x 384
 * tcq3 GEMV (perf, Zen5). */
static unsigned tcq_avx512_wrap(unsigned x, unsigned bytes)
{
    while (x >= bytes)
        x -= bytes;
    return x;
}

/* The constants of a sequence of steps steps (128 or 64) at shift: its
 * steps s / 8 bytes, the windows' bytes taken modulo that. */
static void tcq_avx512_shift_for(unsigned shift, unsigned steps, tcq_avx512_shift *k)
{
    const unsigned bytes = (unsigned)pmpd_tcq_bytes(steps, shift);
    uint8_t index[2][64];
    uint16_t offset[32];
    unsigned g, p;
    for (g = 0; g < TCQ_AVX512_GROUPS; g++) {
        for (p = 0; p < 32; p++) {
            const unsigned at = (32 * g + p) * shift, f = at / 8;
            index[0][2 * p] = (uint8_t)tcq_avx512_wrap(f + 1, bytes);
            index[0][2 * p + 1] = (uint8_t)tcq_avx512_wrap(f, bytes);
            index[1][2 * p] = (uint8_t)tcq_avx512_wrap(f + 3, bytes);
            index[1][2 * p + 1] = (uint8_t)tcq_avx512_wrap(f + 2, bytes);
            offset[p] = (uint16_t)(at % 8);
        }
        k->window[g][0] = _mm512_loadu_si512((const void *)index[0]);
        k->window[g][1] = _mm512_loadu_si512((const void *)index[1]);
    }
    k->offset = _mm512_loadu_si512((const void *)offset);
    k->load[0] = bytes >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << bytes) - 1;
    k->load[1] = bytes <= 64 ? 0 : bytes >= 128 ? ~(__mmask64)0 : ((__mmask64)1 << (bytes - 64)) - 1;
    k->high_at = bytes > 64 ? 64 : 0;
}

/* The planes hold value + 128 as unsigned bytes (entries are within
 * -127..127), VPDPBUSD's unsigned operand; negating such a byte modulo 256
 * gives -value + 128, so the sign needs no unbiasing. */
static void tcq_avx512_consts_for(const pmpd_tcq_matrix *m, tcq_avx512_consts *c)
{
    const int16_t *table = pmpd_tcq_table();
    uint8_t planes[TCQ_AVX512_PLANES][PMPD_TCQ_TABLE_REPS], pack[2][64], columns[2][64];
    unsigned e, p, j;
    for (e = 0; e < PMPD_TCQ_TABLE_REPS; e++)
        for (p = 0; p < TCQ_AVX512_PLANES; p++)
            planes[p][e] = (uint8_t)(table[2 * e + p] + 128);
    for (p = 0; p < TCQ_AVX512_PLANES; p++) {
        c->planes[p][0] = _mm512_loadu_si512((const void *)planes[p]);
        c->planes[p][1] = _mm512_loadu_si512((const void *)(planes[p] + 64));
    }
    /* Byte j of the packed lanes is step j: lane j % 32 of register j /
     * 32.  The activations go to the even and odd columns' order alike
     * (the first and the second value of each step). */
    for (j = 0; j < 64; j++) {
        const unsigned from = (j < 32 ? 0 : 64) + 2 * (j % 32);
        pack[0][j] = (uint8_t)(from + 1);
        pack[1][j] = (uint8_t)from;
        columns[0][j] = (uint8_t)(2 * j);
        columns[1][j] = (uint8_t)(2 * j + 1);
    }
    c->even_columns = _mm512_loadu_si512((const void *)columns[0]);
    c->odd_columns = _mm512_loadu_si512((const void *)columns[1]);
    c->high_bytes = _mm512_loadu_si512((const void *)pack[0]);
    c->low_bytes = _mm512_loadu_si512((const void *)pack[1]);
    tcq_avx512_shift_for(m->shift[0], PMPD_TCQ_STEPS, &c->shift[0]);
    tcq_avx512_shift_for(m->shift[1], PMPD_TCQ_STEPS, &c->shift[1]);
    tcq_avx512_shift_for(m->shift[1], m->last_steps, &c->last);
}

/* h = S (S + 1) mod 2^16 of group g's 32 steps (sequence in lo, hi). */
TCQ_AVX512_INLINE __m512i tcq_avx512_hash(__m512i lo, __m512i hi, const tcq_avx512_shift *k, unsigned g)
{
    const __m512i first = _mm512_permutex2var_epi8(lo, k->window[g][0], hi);
    const __m512i second = _mm512_permutex2var_epi8(lo, k->window[g][1], hi);
    const __m512i state = _mm512_shldv_epi16(first, second, k->offset);
    return _mm512_mullo_epi16(state, _mm512_add_epi16(state, _mm512_set1_epi16(1)));
}

/* The biased values of unit u (steps 64 u..64 u + 63, rotated columns
 * 128 u..128 u + 127 of the sequence in lo, hi) in step order: byte j of
 * w[0] is step j's first value (column 2 j), of w[1] its second. */
TCQ_AVX512_INLINE void tcq_avx512_unit(__m512i lo, __m512i hi, const tcq_avx512_consts *c,
                                       const tcq_avx512_shift *k, unsigned u, __m512i *w)
{
    const __m512i h0 = _mm512_srli_epi16(tcq_avx512_hash(lo, hi, k, 2 * u), 6);
    const __m512i h1 = _mm512_srli_epi16(tcq_avx512_hash(lo, hi, k, 2 * u + 1), 6);
    /* per step: h bits 6-13 (the entry, the swap in bit 7), h bits 14-15 */
    const __m512i index = _mm512_permutex2var_epi8(h0, c->low_bytes, h1);
    const __m512i signs = _mm512_permutex2var_epi8(h0, c->high_bytes, h1);
    const __mmask64 swap = _mm512_movepi8_mask(index);
    const __mmask64 negate_second = _mm512_test_epi8_mask(signs, _mm512_set1_epi8(1));
    const __mmask64 negate_first = _mm512_test_epi8_mask(signs, _mm512_set1_epi8(2));
    const __m512i rep_x = _mm512_permutex2var_epi8(c->planes[0][0], index, c->planes[0][1]);
    const __m512i rep_y = _mm512_permutex2var_epi8(c->planes[1][0], index, c->planes[1][1]);
    const __m512i zero = _mm512_setzero_si512();
    __m512i first = _mm512_mask_blend_epi8(swap, rep_x, rep_y), second = _mm512_mask_blend_epi8(swap, rep_y, rep_x);
    first = _mm512_mask_sub_epi8(first, negate_first, zero, first);
    second = _mm512_mask_sub_epi8(second, negate_second, zero, second);
    w[0] = first;
    w[1] = second;
}

/* One token's side of a unit (x, d at its first column and block): its
 * 128 activations as the 64 steps' first (even) and second (odd) columns,
 * per 32-bit lane minus 128 times the sum of the 8 activations of the
 * lane's 4 steps (what the weights' bias adds to VPDPBUSD's sums), and
 * per 32-bit lane its block's step (lanes 4 b .. 4 b + 3: block b). */
typedef struct tcq_avx512_input {
    __m512i even, odd, unbias;
    __m512 d;
} tcq_avx512_input;

TCQ_AVX512_INLINE void tcq_avx512_input_for(const tcq_avx512_consts *c, const int8_t *x, const float *d,
                                            tcq_avx512_input *in)
{
    const __m512i low = _mm512_loadu_si512((const void *)x), high = _mm512_loadu_si512((const void *)(x + 64));
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    in->even = _mm512_permutex2var_epi8(low, c->even_columns, high);
    in->odd = _mm512_permutex2var_epi8(low, c->odd_columns, high);
    in->unbias = _mm512_sub_epi32(_mm512_setzero_si512(),
                                  _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, in->even),
                                                      bias, in->odd));
    in->d = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                                  _mm512_castps128_ps512(_mm_loadu_ps(d)));
}

/* acc + the unit's values w (tcq_avx512_unit) times the input, exactly in
 * int32 per block (the bias taken off before the conversion): one
 * conversion and one FMA per 128 columns. */
TCQ_AVX512_INLINE __m512 tcq_avx512_dot(const __m512i *w, const tcq_avx512_input *in, __m512 acc)
{
    const __m512i sums = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(in->unbias, w[0], in->even), w[1], in->odd);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), in->d, acc);
}

/* Rows per tile: one from each quarter of the caller's rows (as
 * rotated_simd.h's tiles), 4 independent decodes for the core to overlap
 * and one activation step per unit for the 4 rows: 11.7 Gweights/s against
 * 10.4 one row at a time (1024 x 1024, one Zen5 thread). */
#define TCQ_AVX512_ROWS 4

/* Bytes ahead in each of the tile's 4 row streams that the kernel
 * prefetches: from RAM on one Zen5 thread (4096 x 4096, best of 9, against
 * no prefetch in the same run) 0.5 / 1 / 2 / 4 KiB gave 1.23 / 1.17 / 1.24
 * / 1.22x at tcq4 and 1.05-1.07x at tcq2; the hardware prefetcher alone
 * left tcq4 at two thirds of its rate in L2.  With version 4's kernel,
 * about 1.3x faster, 1, 2, 4 and 8 KiB read alike. */
#define TCQ_AVX512_PREFETCH 2048

/* Rows r0 + i stride (i < nr) against the nt tokens at q, d (token stride
 * padded, n_blocks): each sequence decoded once for the tile. */
TCQ_AVX512_INLINE void tcq_avx512_tile(const pmpd_tcq_matrix *m, const tcq_avx512_consts *c, size_t r0,
                                       size_t stride, size_t nr, const int8_t *q, const float *d, size_t n_blocks,
                                       size_t nt, float *y, size_t ldy)
{
    const size_t blocks_per_sequence = PMPD_TCQ_SEQUENCE / PMPD_ROTATED_BLOCK;
    __m512 acc[TCQ_AVX512_ROWS][PMPD_ROTATED_TILE];
    size_t i, j, t;
    unsigned u;
    for (i = 0; i < nr; i++)
        for (t = 0; t < nt; t++)
            acc[i][t] = _mm512_setzero_ps();
    for (j = 0; j < m->sequences; j++) {
        __m512i lo[TCQ_AVX512_ROWS], hi[TCQ_AVX512_ROWS];
        const unsigned units = pmpd_tcq_steps(m, j) / 64;
        const tcq_avx512_shift *k = j + 1 == m->sequences ? &c->last : &c->shift[j < m->first_half ? 0 : 1];
        for (i = 0; i < nr; i++) {
            unsigned shift;
            const uint8_t *sequence = pmpd_tcq_sequence(m, r0 + i * stride, j, &shift);
            _mm_prefetch((const char *)sequence + TCQ_AVX512_PREFETCH, _MM_HINT_T0);
            _mm_prefetch((const char *)sequence + TCQ_AVX512_PREFETCH + 64, _MM_HINT_T0);
            lo[i] = _mm512_maskz_loadu_epi8(k->load[0], (const void *)sequence);
            hi[i] = _mm512_maskz_loadu_epi8(k->load[1], (const void *)(sequence + k->high_at));
        }
        for (u = 0; u < units; u++) {
            __m512i w[TCQ_AVX512_ROWS][2];
            for (i = 0; i < nr; i++)
                tcq_avx512_unit(lo[i], hi[i], c, k, u, w[i]);
            for (t = 0; t < nt; t++) {
                tcq_avx512_input in;
                tcq_avx512_input_for(c, q + t * m->padded + j * PMPD_TCQ_SEQUENCE + 128 * u,
                                     d + t * n_blocks + j * blocks_per_sequence + 4 * u, &in);
                for (i = 0; i < nr; i++)
                    acc[i][t] = tcq_avx512_dot(w[i], &in, acc[i][t]);
            }
        }
    }
    PMPD_ROTATED_STORE(acc, _mm512_reduce_add_ps, m->scale, pmpd_tcq_unit(), r0, stride, nr, 0, nt, y, ldy);
}

PMPD_INTERNAL void pmpd_tcq_matmul(const pmpd_tcq_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                                   size_t row_end, float *y, size_t ldy)
{
    const pmpd_rotated rotated = pmpd_tcq_rotated(m);
    const int8_t *q = pmpd_rotated_act_q(act);
    const float *d = pmpd_rotated_act_d(&rotated, act, n_tokens);
    const size_t n_blocks = m->padded / PMPD_ROTATED_BLOCK;
    tcq_avx512_consts consts;
    tcq_avx512_consts_for(m, &consts);
#define TCQ_AVX512_TILE(r0, stride, nr, t0, nt)                                                                     \
    tcq_avx512_tile(m, &consts, r0, stride, nr, q + (t0) * m->padded, d + (t0) * n_blocks, n_blocks, nt,           \
                    y + (t0) * ldy, ldy)
    PMPD_ROTATED_TILE_GRID(row_begin, row_end, TCQ_AVX512_ROWS, n_tokens, PMPD_ROTATED_TOKENS_BY_4, TCQ_AVX512_TILE);
#undef TCQ_AVX512_TILE
}

#undef TCQ_AVX512_ROWS
#undef TCQ_AVX512_GROUPS
#undef TCQ_AVX512_PLANES
#endif
