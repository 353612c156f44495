/*
 * AVX-512 GEMV (one token) for q8 / q4 / q2cb (qformat.h) with int8
 * activations: the decode product.  GEMM stays with x86_avx2/qmatmul.c.
 *
 * Memory.  A thread's rows are cut into four quarters and a tile takes one
 * row block from each, so the weights are read as four long sequential
 * streams, each prefetched PMPD_AVX512_PREFETCH bytes ahead into L2.
 * Streaming from RAM, that is what reaches the bandwidth: with the tile's 4
 * row blocks adjacent instead (4 interleaved streams 3-30 KB apart), q2cb
 * reached 57-75% of the bandwidth probe and q4 ~85% with prefetch distances
 * up to 12 KiB, and distances of 16 KiB or more did not help q2cb where a
 * row block is shorter than a 4 KiB page; quartered, both stream at or near
 * the probe (a single sequential stream) at every shape tried.
 *
 * Compute.  A tile walks its 4 row blocks one group at a time and ends each
 * group with a single 16-lane vector holding the integer dot product of
 * every row of the tile (lane 4j + i: row i of row block j), so the float
 * work -- one conversion, one multiply by the rows' scales times the
 * activation scale, one FMA -- is shared by 16 rows, and the 16 f16 scales
 * are one conversion.  VPDPBUSD multiplies unsigned by signed bytes without
 * intermediate saturation, so the weights are made unsigned and bias *
 * sum(x) is subtracted afterwards.
 *
 *   q8, q4  64 bytes of a block are loaded as they are stored: the low 256
 *           bits hold weights 8c..8c+7 of rows 0..3, the high 256 bits the
 *           next 8, so both halves meet the activation vectors
 *             xlo = x0..7 (x4) | x8..15 (x4),  xhi = x16..23 | x24..31;
 *           each row gets four int32 lanes, which 6 shuffles and 3 adds
 *           fold into the tile vector.  q8: w ^ 0x80 = w + 128 (bias 128).
 *           q4: nibbles as 16 (q + 8): the high ones by one VPTERNLOGD
 *           ((b & 0xF0) ^ 0x80), the low ones by one GF2P8AFFINEQB (bits
 *           0..3 to 4..7, bit 7 flipped); bias 128, then an exact shift by 4.
 *   q2cb    the index bytes are gathered so that lane 4j + i holds 4 index
 *           bytes of row i of row block j (2 shuffles per tile and index
 *           half); GF2P8AFFINEQB moves one 2-bit level of each byte to
 *           bits 0..1, VPTERNLOGD adds the row's codebook id at bits 2..5
 *           (one vector per tile), VPERMB looks the byte up in the 64-byte
 *           table of all 16 codebooks biased by +64 (bias 64), and the
 *           activation operand is 4 bytes broadcast from memory: no fold.
 * With the weights in L2 (pmpd-bench --gemv, one thread) this runs q4 at ~40
 * and q2cb at ~20 GB/s of weights, against ~34 and ~12 for the AVX2 kernel
 * with AVX-VNNI.
 *
 * Lanes of a tile past the last row block repeat its first row block and
 * are not stored.
 */
#include "pmpd_impl/weights/grouped/qmatmul.h"
#include "pmpd_impl/weights/grouped/qwalk.h"

#if PMPD_QMATMUL_AVX512

#include <immintrin.h>
#include <string.h>

/* Software prefetch distance per stream, and its target (L2). */
#ifndef PMPD_AVX512_PREFETCH
#define PMPD_AVX512_PREFETCH 1024
#endif
#define PMPD_AVX512_PREFETCH_HINT _MM_HINT_T1
#define PMPD_AVX512_TILE PMPD_QWALK_STREAMS /* row blocks per tile, one per stream of the walk */

#if defined(__GNUC__)
#define PMPD_AVX512_INLINE static inline __attribute__((always_inline))
#else
#define PMPD_AVX512_INLINE static inline
#endif

/* Constants of a walk, in registers for its whole length. */
typedef struct pmpd_avx512_consts {
    __m512i q4_low;       /* GF2P8AFFINEQB matrix: bits 0..3 -> 4..7 */
    __m512i high;         /* 0xF0 */
    __m512i flip;         /* 0x80 */
    __m512i fold_even;    /* VPERMT2D indexes of the fold's last step */
    __m512i q2_levels[4]; /* GF2P8AFFINEQB matrices: level s -> bits 0..1 */
    __m512i q2_gather[2]; /* VPERMT2D indexes: index dword 2i + h of block j */
    __m512i q2_ids;       /* VPMULTISHIFTQB control: id of (j, i) to bits 2..5 */
    __m512i q2_table;     /* the 16 codebooks, biased */
    __m512i three;        /* 0x03 */
} pmpd_avx512_consts;

static inline long long pmpd_avx512_load64(const void *p)
{
    long long v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The matrix qword of GF2P8AFFINEQB whose result bit i is source bit
 * from[i] (from[i] < 0: zero); byte 7 - i of the matrix selects bit i. */
static long long pmpd_avx512_bit_matrix(const int from[8])
{
    unsigned long long m = 0;
    int i;
    for (i = 0; i < 8; i++)
        if (from[i] >= 0)
            m |= (unsigned long long)(1u << from[i]) << (8 * (7 - i));
    return (long long)m;
}

static void pmpd_avx512_init(const pmpd_qmatrix *w, pmpd_avx512_consts *k)
{
    static const int low[8] = {-1, -1, -1, -1, 0, 1, 2, 3};
    int32_t idx[16];
    unsigned char ids[64];
    int level[8], s, i, j;
    k->q4_low = _mm512_set1_epi64(pmpd_avx512_bit_matrix(low));
    k->high = _mm512_set1_epi8((char)0xF0);
    k->flip = _mm512_set1_epi8((char)0x80);
    k->three = _mm512_set1_epi8(3);
    /* Fold, last step: lane 4j + i takes row i's lane pair of block j from
     * [block 0 | block 1] (first operand) or [block 2 | block 3]. */
    for (j = 0; j < 4; j++)
        for (i = 0; i < 4; i++)
            idx[4 * j + i] = (j & 1) * 8 + (j >> 1) * 16 + 2 * i;
    k->fold_even = _mm512_loadu_si512((const void *)idx);
    for (s = 0; s < 4; s++) {
        for (i = 0; i < 8; i++)
            level[i] = i < 2 ? 2 * s + i : -1;
        k->q2_levels[s] = _mm512_set1_epi64(pmpd_avx512_bit_matrix(level));
    }
    /* q2cb gather: [block 0 | block 1] and [block 2 | block 3] index bytes,
     * 8 dwords per block; lane 4j + i takes dword 2i + h of block j. */
    for (s = 0; s < 2; s++) {
        for (j = 0; j < 4; j++)
            for (i = 0; i < 4; i++)
                idx[4 * j + i] = (j >> 1) * 16 + (j & 1) * 8 + 2 * i + s;
        k->q2_gather[s] = _mm512_loadu_si512((const void *)idx);
    }
    /* The 4 blocks' 16-bit id words side by side in a qword: the id of row
     * i of block j is bits 16j + 4i..+3; a byte starting 2 bits lower puts
     * it at bits 2..5 (bits 0, 1 are replaced by the level, 6, 7 ignored). */
    for (j = 0; j < 4; j++)
        for (i = 0; i < 4; i++)
            for (s = 0; s < 4; s++)
                ids[16 * j + 4 * i + s] = (unsigned char)((16 * j + 4 * i + 62) % 64);
    /* Qword q of the control serves lanes 2q, 2q + 1 (bytes 8q..8q+7). */
    k->q2_ids = _mm512_loadu_si512((const void *)ids);
    k->q2_table = _mm512_setzero_si512();
    if (w->type == PMPD_TENSOR_Q2CB)
        k->q2_table = _mm512_add_epi8(_mm512_loadu_si512((const void *)w->data),
                                      _mm512_set1_epi8(PMPD_Q2CB_LEVEL_LIMIT));
}

/* Integer products of one q8 or q4 block with the group: four lanes per
 * row (lanes 2i, 2i + 1, 8 + 2i, 9 + 2i), biased. */
PMPD_AVX512_INLINE __m512i pmpd_avx512_block(uint32_t type, const unsigned char *block, __m512i xlo, __m512i xhi,
                                             const pmpd_avx512_consts *k)
{
    const unsigned char *body = block + 2 * PMPD_QROWS;
    __m512i a, b, dot;
    if (type == PMPD_TENSOR_Q8) {
        a = _mm512_xor_si512(_mm512_loadu_si512((const void *)body), k->flip);
        b = _mm512_xor_si512(_mm512_loadu_si512((const void *)(body + 64)), k->flip);
    } else {
        __m512i u = _mm512_loadu_si512((const void *)body);
        a = _mm512_gf2p8affine_epi64_epi8(u, k->q4_low, 0x80);
        b = _mm512_ternarylogic_epi32(u, k->high, k->flip, 0x6A); /* (u & B) ^ C */
    }
    dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), a, xlo);
    return _mm512_dpbusd_epi32(dot, b, xhi);
}

/* The tile's 16 row sums from 4 blocks' four lanes per row. */
PMPD_AVX512_INLINE __m512i pmpd_avx512_fold(const __m512i d[4], const pmpd_avx512_consts *k)
{
    /* [block 0 | block 1] and [block 2 | block 3]: 256-bit halves added,
     * so row i holds lanes 2i, 2i + 1 of each half. */
    __m512i d01 = _mm512_add_epi32(_mm512_shuffle_i64x2(d[0], d[1], 0x44), _mm512_shuffle_i64x2(d[0], d[1], 0xEE));
    __m512i d23 = _mm512_add_epi32(_mm512_shuffle_i64x2(d[2], d[3], 0x44), _mm512_shuffle_i64x2(d[2], d[3], 0xEE));
    __m512i odd = _mm512_add_epi32(k->fold_even, _mm512_set1_epi32(1));
    return _mm512_add_epi32(_mm512_permutex2var_epi32(d01, k->fold_even, d23),
                            _mm512_permutex2var_epi32(d01, odd, d23));
}

/* The tile's 16 biased row sums for one q2cb group. */
PMPD_AVX512_INLINE __m512i pmpd_avx512_q2cb(const unsigned char *const p[4], const int8_t *x, int32_t bias,
                                            const pmpd_avx512_consts *k)
{
    const size_t body = 2 * PMPD_QROWS;
    __m512i b01 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(
                                         (const __m256i *)(const void *)(p[0] + body + 2))),
                                     _mm256_loadu_si256((const __m256i *)(const void *)(p[1] + body + 2)), 1);
    __m512i b23 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(
                                         (const __m256i *)(const void *)(p[2] + body + 2))),
                                     _mm256_loadu_si256((const __m256i *)(const void *)(p[3] + body + 2)), 1);
    uint16_t id[4];
    uint64_t packed;
    __m512i ids, acc[2];
    int h, s;
    memcpy(&id[0], p[0] + body, 2);
    memcpy(&id[1], p[1] + body, 2);
    memcpy(&id[2], p[2] + body, 2);
    memcpy(&id[3], p[3] + body, 2);
    packed = (uint64_t)id[0] | (uint64_t)id[1] << 16 | (uint64_t)id[2] << 32 | (uint64_t)id[3] << 48;
    ids = _mm512_multishift_epi64_epi8(k->q2_ids, _mm512_set1_epi64((long long)packed));
    acc[0] = _mm512_set1_epi32(bias);
    acc[1] = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (h = 0; h < 2; h++) {
        /* Lane 4j + i: index bytes 4h..4h+3 of row i of block j, i.e.
         * weights 8s + 4h .. 8s + 4h + 3 at level s. */
        __m512i raw = _mm512_permutex2var_epi32(b01, k->q2_gather[h], b23);
#pragma GCC unroll 4
        for (s = 0; s < 4; s++) {
            __m512i level = _mm512_gf2p8affine_epi64_epi8(raw, k->q2_levels[s], 0);
            __m512i w = _mm512_permutexvar_epi8(_mm512_ternarylogic_epi32(level, ids, k->three, 0xE4), k->q2_table);
            int32_t xs;
            memcpy(&xs, x + 16 * s + 4 * h, sizeof xs);
            acc[s & 1] = _mm512_dpbusd_epi32(acc[s & 1], w, _mm512_set1_epi32(xs));
        }
    }
    return _mm512_add_epi32(acc[0], acc[1]);
}

/* Row blocks rbs[0..3] over all groups; those whose bit in valid is clear
 * read rbs[0] again and are not stored. */
PMPD_AVX512_INLINE void pmpd_avx512_tile(uint32_t type, const pmpd_qmatrix *w, const pmpd_qact *act,
                                         const pmpd_avx512_consts *k, const size_t rbs[4], unsigned valid,
                                         size_t row_end, float *y)
{
    const size_t step = pmpd_qformat_block_bytes(type), n_groups = act->n_groups;
    const unsigned char *base[PMPD_AVX512_TILE];
    __m512 acc = _mm512_setzero_ps();
    const __m512i xlo_index = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2);
    const __m512i xhi_index = _mm512_setr_epi64(4, 4, 4, 4, 6, 6, 6, 6);
    float result[16];
    size_t g, j;
    for (j = 0; j < PMPD_AVX512_TILE; j++)
        base[j] = pmpd_qformat_block(w, valid >> j & 1 ? rbs[j] : rbs[0], 0);
    for (g = 0; g < n_groups; g++) {
        const unsigned char *p[PMPD_AVX512_TILE];
        /* Token 0's chunks are qwords 0, 2, 4, 6 of the group's 64 bytes. */
        const int8_t *x = act->qs + g * 64;
        __m512i dot;
        __m256i scales;
#pragma GCC unroll 4
        for (j = 0; j < PMPD_AVX512_TILE; j++)
            p[j] = base[j] + g * step;
#pragma GCC unroll 4
        for (j = 0; j < PMPD_AVX512_TILE; j++) {
            size_t line;
#pragma GCC unroll 4
            for (line = 0; line < step; line += 64)
                _mm_prefetch((const char *)(p[j] + line) + PMPD_AVX512_PREFETCH, PMPD_AVX512_PREFETCH_HINT);
        }
        if (type == PMPD_TENSOR_Q2CB) {
            dot = pmpd_avx512_q2cb(p, x, -PMPD_Q2CB_LEVEL_LIMIT * act->sum[g], k);
        } else {
            __m512i xv = _mm512_loadu_si512((const void *)x), d[PMPD_AVX512_TILE];
            __m512i xlo = _mm512_permutexvar_epi64(xlo_index, xv), xhi = _mm512_permutexvar_epi64(xhi_index, xv);
#pragma GCC unroll 4
            for (j = 0; j < PMPD_AVX512_TILE; j++)
                d[j] = pmpd_avx512_block(type, p[j], xlo, xhi, k);
            dot = _mm512_sub_epi32(pmpd_avx512_fold(d, k), _mm512_set1_epi32(128 * act->sum[g]));
            if (type == PMPD_TENSOR_Q4)
                dot = _mm512_srai_epi32(dot, 4); /* 16 * the exact dot product */
        }
        /* Qword j: the 4 f16 scales of row block j. */
        scales = _mm256_set1_epi64x(pmpd_avx512_load64(p[0]));
        scales = _mm256_mask_set1_epi64(scales, 2, pmpd_avx512_load64(p[1]));
        scales = _mm256_mask_set1_epi64(scales, 4, pmpd_avx512_load64(p[2]));
        scales = _mm256_mask_set1_epi64(scales, 8, pmpd_avx512_load64(p[3]));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot),
                              _mm512_mul_ps(_mm512_cvtph_ps(scales), _mm512_set1_ps(act->scale[g])), acc);
    }
    _mm512_storeu_ps(result, acc);
    for (j = 0; j < PMPD_AVX512_TILE; j++)
        if (valid >> j & 1)
            pmpd_qmatmul_store(y, 0, 0, rbs[j] * PMPD_QROWS, row_end, result + 4 * j);
}

/* Tile t takes row block t of each quarter of the range (qwalk.h). */
PMPD_AVX512_INLINE void pmpd_avx512_gemv(uint32_t type, const pmpd_qmatrix *w, const pmpd_qact *act,
                                         size_t row_begin, size_t row_end, float *y)
{
    pmpd_avx512_consts k;
    const pmpd_qwalk q = pmpd_qwalk_of(row_begin, row_end);
    size_t t, j;
    pmpd_avx512_init(w, &k);
    for (t = 0; t < q.tiles; t++) {
        size_t rbs[PMPD_AVX512_TILE];
        unsigned valid = 0;
        for (j = 0; j < PMPD_AVX512_TILE; j++) {
            rbs[j] = pmpd_qwalk_block(&q, t, j);
            if (rbs[j] < q.rb_end)
                valid |= 1u << j;
        }
        pmpd_avx512_tile(type, w, act, &k, rbs, valid, row_end, y);
    }
}

PMPD_INTERNAL void pmpd_qgemv_avx512(const pmpd_qmatrix *w, const pmpd_qact *act, size_t row_begin,
                                     size_t row_end, float *y)
{
    switch (w->type) {
    case PMPD_TENSOR_Q8:
        pmpd_avx512_gemv(PMPD_TENSOR_Q8, w, act, row_begin, row_end, y);
        break;
    case PMPD_TENSOR_Q4:
        pmpd_avx512_gemv(PMPD_TENSOR_Q4, w, act, row_begin, row_end, y);
        break;
    default:
        pmpd_avx512_gemv(PMPD_TENSOR_Q2CB, w, act, row_begin, row_end, y);
        break;
    }
}

#undef PMPD_AVX512_PREFETCH
#undef PMPD_AVX512_PREFETCH_HINT
#undef PMPD_AVX512_TILE
#undef PMPD_AVX512_INLINE

#endif
