/*
 * AVX2 GEMV and GEMM for q8 / q4 / q2cb (qformat.h) with int8 activations.
 *
 * One 32-byte vector holds 8 consecutive weights of each of a block's 4
 * rows, so after vpmaddubsw + vpmaddwd every int32 lane belongs to one row
 * (two lanes per row): no horizontal sums until a row block is finished.
 * vpmaddubsw multiplies unsigned by signed bytes, so
 *   q4    nibbles are biased back to q+8 (one XOR 0x88 undoes the storage
 *         form) and 8 * sum(x), kept with the activations, is subtracted;
 *         four products of <= 15*127 fit int16, so one vpmaddwd per block;
 *   q2cb  one vpshufb looks up (codebook of the row, 2-bit index) in a
 *         16-byte table of the codebooks of the lane's 2 rows, biased by
 *         +64 into [0, 128] (PMPD_Q2CB_LEVEL_LIMIT), and 64 * sum(x) is
 *         subtracted (the decode GEMV has its own loop,
 *         pmpd_avx2_q2cb_decode);
 *   q8    the classic sign trick: |w| times x with w's sign.
 * Where the compiler targets AVX-VNNI, VPDPBUSD does the multiply and both
 * pairwise adds in one instruction.
 * GEMM walks 4 tokens at a time so each unpacked block serves 4 tokens
 * (GEMV is the same walk with one token); the weights of a row block stay
 * in L1 across the token tiles.
 */
#include "pmpd_impl/weights/grouped/qmatmul.h"
#include "pmpd_impl/weights/grouped/qwalk.h"

#if PMPD_USE_AVX2

#include <immintrin.h>
#include <string.h>

#include "pmpd_impl/model/f16.h"

#define PMPD_AVX2_TOKENS 4
#ifndef PMPD_AVX2_PREFETCH
#define PMPD_AVX2_PREFETCH 1024
#endif

#if defined(__AVXVNNI__)
#define PMPD_AVX2_VNNI 1
#else
#define PMPD_AVX2_VNNI 0
#endif

/* The walk is instantiated once per weight type and token count; forcing
 * the inlining lets those constants remove every branch on them and keep
 * the per-token accumulators in registers. */
#if defined(__GNUC__)
#define PMPD_AVX2_INLINE static inline __attribute__((always_inline))
#else
#define PMPD_AVX2_INLINE static inline
#endif

/* Hides a value from the compiler's shuffle combining: clang turns the
 * two vshufps + add of pmpd_avx2_q2cb_fold back into vphaddd (one every
 * other cycle on Zen 5) and a blend of two broadcast loads into vmovq,
 * vpunpcklqdq and a cross-lane vpermq.  GCC and clang only. */
#if defined(__GNUC__)
#define PMPD_AVX2_OPAQUE(v) __asm__("" : "+x"(v))
#else
#define PMPD_AVX2_OPAQUE(v) ((void)0)
#endif

/* One unpacked block: w[c] holds weights 8c..8c+7 of rows 0..3 as the
 * unsigned operand of vpmaddubsw; q8 keeps the signed weights in sign[c]. */
typedef struct pmpd_avx2_block {
    __m256i w[4];
    __m256i sign[4];
    __m256 scale; /* the rows' scales, each twice: s0 s0 s1 s1 s2 s2 s3 s3 */
} pmpd_avx2_block;

static inline __m256 pmpd_avx2_scales(const unsigned char *block)
{
#if defined(__F16C__)
    __m128 s = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(const void *)block));
#else
    uint16_t h[4];
    __m128 s;
    memcpy(h, block, sizeof h);
    s = _mm_setr_ps(pmpd_f16_to_f32(h[0]), pmpd_f16_to_f32(h[1]), pmpd_f16_to_f32(h[2]),
                    pmpd_f16_to_f32(h[3]));
#endif
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(s), _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
}

static inline __m256i pmpd_avx2_load(const unsigned char *p)
{
    return _mm256_loadu_si256((const __m256i *)(const void *)p);
}

/* The q2cb levels of one block, biased by +64: w[s] holds weights
 * 8s..8s+7 of rows 0..3.  Lane 0 holds rows 0, 1 and lane 1 rows 2, 3, so
 * each lane's vpshufb table needs only its own two rows' codebooks: the
 * pair table entry of the lane's id byte (levels of the even row at bytes
 * 0..3, of the odd row at 4..7), one 8-byte broadcast each.  A table
 * index is the 2-bit index plus 4 for the odd row.
 * vpshufb reads bits 0..3 of an index byte and zeroes on bit 7 and ignores
 * bits 4..6, so one AND keeps two 2-bit indexes of each byte (bits 0, 1
 * and 4, 5), one OR sets the row bit at bits 2 and 6, and the upper index
 * needs only a 16-bit shift by 4: what it brings into bits 4..7 from the
 * next byte is a lower index (ignored) and a clear bit 3 (bit 7 clear).
 * Indexes 1 and 3 take the same two steps after one shift by 2.  That is 7
 * operations for 4 lookups, against 11 with a mask and a row OR per
 * lookup. */
PMPD_AVX2_INLINE void pmpd_avx2_q2cb_levels(const unsigned char *block, const uint64_t *pairs, __m256i w[4])
{
    const unsigned char *body = block + 2 * PMPD_QROWS;
    const __m256i keep = _mm256_set1_epi8(0x33);
    const __m256i odd_row = _mm256_setr_epi64x(0, 0x4444444444444444LL, 0, 0x4444444444444444LL);
    __m256i low = _mm256_set1_epi64x((long long)pairs[body[0]]), table;
    PMPD_AVX2_OPAQUE(low);
    table = _mm256_blend_epi32(low, _mm256_set1_epi64x((long long)pairs[body[1]]), 0xF0);
    __m256i raw = _mm256_loadu_si256((const __m256i *)(const void *)(body + 2));
    __m256i even = _mm256_or_si256(_mm256_and_si256(raw, keep), odd_row);
    __m256i odd = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 2), keep), odd_row);
    w[0] = _mm256_shuffle_epi8(table, even);
    w[1] = _mm256_shuffle_epi8(table, odd);
    w[2] = _mm256_shuffle_epi8(table, _mm256_srli_epi16(even, 4));
    w[3] = _mm256_shuffle_epi8(table, _mm256_srli_epi16(odd, 4));
}

PMPD_AVX2_INLINE void pmpd_avx2_unpack(uint32_t type, const unsigned char *block, const uint64_t *pairs,
                                    pmpd_avx2_block *b)
{
    const unsigned char *body = block + 2 * PMPD_QROWS;
    int c;
    b->scale = pmpd_avx2_scales(block);
    if (type == PMPD_TENSOR_Q8) {
#pragma GCC unroll 8
        for (c = 0; c < 4; c++) {
            b->sign[c] = pmpd_avx2_load(body + 32 * c);
            b->w[c] = _mm256_abs_epi8(b->sign[c]);
        }
    } else if (type == PMPD_TENSOR_Q4) {
        const __m256i low = _mm256_set1_epi8(0x0F), bias = _mm256_set1_epi8((char)0x88);
        __m256i u0 = _mm256_xor_si256(pmpd_avx2_load(body), bias);
        __m256i u1 = _mm256_xor_si256(pmpd_avx2_load(body + 32), bias);
        b->w[0] = _mm256_and_si256(u0, low);
        b->w[1] = _mm256_and_si256(u1, low);
        b->w[2] = _mm256_and_si256(_mm256_srli_epi16(u0, 4), low);
        b->w[3] = _mm256_and_si256(_mm256_srli_epi16(u1, 4), low);
    } else {
        pmpd_avx2_q2cb_levels(block, pairs, b->w);
    }
}

static inline __m256i pmpd_avx2_chunk(const int8_t *p)
{
    int64_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi64x(v);
}

/* acc + sums of 4 adjacent products of unsigned u by signed s bytes: one
 * VPDPBUSD where the compiler targets AVX-VNNI, else VPMADDUBSW (pairs
 * into int16) + VPMADDWD (pairs into int32). */
PMPD_AVX2_INLINE __m256i pmpd_avx2_dot4(__m256i acc, __m256i u, __m256i s)
{
#if PMPD_AVX2_VNNI
    return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

/* Integer dot products of one block with one token's group (x: its 4
 * chunks, 16 bytes apart; sum: their sum): two int32 lanes per row. */
PMPD_AVX2_INLINE __m256i pmpd_avx2_dot(uint32_t type, const pmpd_avx2_block *b, const int8_t *x,
                                       const int32_t *sum)
{
    __m256i acc, odd;
    int c;
#if !PMPD_AVX2_VNNI
    if (type == PMPD_TENSOR_Q4) {
        /* Four products of at most 15 * 127 fit int16: one VPMADDWD. */
        __m256i p = _mm256_maddubs_epi16(b->w[0], pmpd_avx2_chunk(x));
#pragma GCC unroll 8
        for (c = 1; c < 4; c++)
            p = _mm256_add_epi16(p, _mm256_maddubs_epi16(b->w[c], pmpd_avx2_chunk(x + 16 * c)));
        return _mm256_sub_epi32(_mm256_madd_epi16(p, _mm256_set1_epi16(1)),
                                _mm256_slli_epi32(_mm256_set1_epi32(*sum), 2));
    }
#endif
    /* Two accumulators halve the chain of dependent multiply-adds. */
    acc = odd = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (c = 0; c < 4; c++) {
        __m256i xc = pmpd_avx2_chunk(x + 16 * c);
        if (type == PMPD_TENSOR_Q8)
            xc = _mm256_sign_epi8(xc, b->sign[c]);
        if (c % 2 == 0)
            acc = pmpd_avx2_dot4(acc, b->w[c], xc);
        else
            odd = pmpd_avx2_dot4(odd, b->w[c], xc);
    }
    acc = _mm256_add_epi32(acc, odd);
    /* Each row's two lanes share its bias: 8 (q4) or 64 (q2cb) times sum. */
    if (type == PMPD_TENSOR_Q4)
        acc = _mm256_sub_epi32(acc, _mm256_slli_epi32(_mm256_set1_epi32(*sum), 2));
    if (type == PMPD_TENSOR_Q2CB)
        acc = _mm256_sub_epi32(acc, _mm256_slli_epi32(_mm256_set1_epi32(*sum), 5));
    return acc;
}

/* One group of the GEMV: acc + the block's products with token t. */
PMPD_AVX2_INLINE __m256 pmpd_avx2_gemv_group(uint32_t type, const unsigned char *block, const pmpd_qact *act,
                                             const uint64_t *pairs, size_t t, size_t g, __m256 acc)
{
    pmpd_avx2_block b;
    size_t i = t * act->n_groups + g;
    __m256i dot;
    pmpd_avx2_unpack(type, block, pairs, &b);
    dot = pmpd_avx2_dot(type, &b, pmpd_qact_chunk(act, t, 4 * g), &act->sum[i]);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(b.scale, _mm256_set1_ps(act->scale[i])), acc);
}

/* Writes a row block's results from lanes holding each row twice. */
PMPD_AVX2_INLINE void pmpd_avx2_store(__m256 acc, float *y, size_t ldy, size_t t, size_t first_row,
                                      size_t row_end)
{
    float lanes[8], result[4];
    int i;
    _mm256_storeu_ps(lanes, acc);
#pragma GCC unroll 8
    for (i = 0; i < 4; i++)
        result[i] = lanes[2 * i] + lanes[2 * i + 1];
    pmpd_qmatmul_store(y, ldy, t, first_row, row_end, result);
}

/* GEMV of row block rb with token t (a GEMM's leftover tokens): even and
 * odd groups go to separate accumulators, halving the chain of dependent
 * FMAs. */
PMPD_AVX2_INLINE void pmpd_avx2_gemv(uint32_t type, const pmpd_qmatrix *w, const pmpd_qact *act,
                                     const uint64_t *pairs, size_t rb, size_t t, size_t row_end, float *y,
                                     size_t ldy)
{
    const unsigned char *blocks = pmpd_qformat_block(w, rb, 0);
    size_t g, n_groups = act->n_groups, step = pmpd_qformat_block_bytes(type);
    __m256 even = _mm256_setzero_ps(), odd = _mm256_setzero_ps();
    for (g = 0; g + 2 <= n_groups; g += 2) {
        even = pmpd_avx2_gemv_group(type, blocks + g * step, act, pairs, t, g, even);
        odd = pmpd_avx2_gemv_group(type, blocks + (g + 1) * step, act, pairs, t, g + 1, odd);
    }
    if (g < n_groups)
        even = pmpd_avx2_gemv_group(type, blocks + g * step, act, pairs, t, g, even);
    pmpd_avx2_store(_mm256_add_ps(even, odd), y, ldy, t, rb * PMPD_QROWS, row_end);
}

/* Tile i of the decode GEMVs' walk (qwalk.h): its four row blocks'
 * weights (the tile's first for a stream with none). */
PMPD_AVX2_INLINE void pmpd_avx2_tile_blocks(const pmpd_qmatrix *w, const pmpd_qwalk *q, size_t i,
                                            const unsigned char **blocks)
{
    size_t j;
#pragma GCC unroll 4
    for (j = 0; j < PMPD_QWALK_STREAMS; j++) {
        size_t rb = pmpd_qwalk_block(q, i, j);
        blocks[j] = pmpd_qformat_block(w, rb < q->rb_end ? rb : q->rb0 + i, 0);
    }
}

/* The decode GEMV of q8 and q4 (and of q2cb with VNNI) on that walk, each
 * stream prefetched PMPD_AVX2_PREFETCH bytes ahead into L2. */
PMPD_AVX2_INLINE void pmpd_avx2_decode(uint32_t type, const pmpd_qmatrix *w, const pmpd_qact *act,
                                       const uint64_t *pairs, size_t row_begin, size_t row_end, float *y)
{
    const size_t step = pmpd_qformat_block_bytes(type), n_groups = act->n_groups;
    const pmpd_qwalk q = pmpd_qwalk_of(row_begin, row_end);
    size_t i, j, g;
    for (i = 0; i < q.tiles; i++) {
        const unsigned char *blocks[PMPD_QWALK_STREAMS];
        __m256 acc[PMPD_QWALK_STREAMS];
        pmpd_avx2_tile_blocks(w, &q, i, blocks);
#pragma GCC unroll 4
        for (j = 0; j < PMPD_QWALK_STREAMS; j++)
            acc[j] = _mm256_setzero_ps();
        for (g = 0; g < n_groups; g++) {
#pragma GCC unroll 4
            for (j = 0; j < PMPD_QWALK_STREAMS; j++) {
                const unsigned char *block = blocks[j] + g * step;
                size_t line;
#pragma GCC unroll 4
                for (line = 0; line < step; line += 64)
                    _mm_prefetch((const char *)(block + line) + PMPD_AVX2_PREFETCH, _MM_HINT_T1);
                acc[j] = pmpd_avx2_gemv_group(type, block, act, pairs, 0, g, acc[j]);
            }
        }
#pragma GCC unroll 4
        for (j = 0; j < PMPD_QWALK_STREAMS; j++) {
            size_t rb = pmpd_qwalk_block(&q, i, j);
            if (rb < q.rb_end)
                pmpd_avx2_store(acc[j], y, 0, 0, rb * PMPD_QROWS, row_end);
        }
    }
}

/* GEMM: row block rb by tokens t0..t0+PMPD_AVX2_TOKENS-1, each unpacked
 * block serving every token of the tile. */
PMPD_AVX2_INLINE void pmpd_avx2_gemm_tile(uint32_t type, const pmpd_qmatrix *w, const pmpd_qact *act,
                                          const uint64_t *pairs, size_t rb, size_t t0, size_t row_end,
                                          float *y, size_t ldy)
{
    const size_t n_tokens = PMPD_AVX2_TOKENS;
    __m256 acc[PMPD_AVX2_TOKENS];
    pmpd_avx2_block b;
    size_t g, j, n_groups = act->n_groups;
    const unsigned char *blocks = pmpd_qformat_block(w, rb, 0);
#pragma GCC unroll 8
    for (j = 0; j < n_tokens; j++)
        acc[j] = _mm256_setzero_ps();
    for (g = 0; g < n_groups; g++) {
        pmpd_avx2_unpack(type, blocks + g * pmpd_qformat_block_bytes(type), pairs, &b);
#pragma GCC unroll 8
        for (j = 0; j < n_tokens; j++) {
            size_t t = t0 + j;
            __m256i dot = pmpd_avx2_dot(type, &b, pmpd_qact_chunk(act, t, 4 * g), &act->sum[t * n_groups + g]);
            __m256 scale = _mm256_mul_ps(b.scale, _mm256_set1_ps(act->scale[t * n_groups + g]));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc[j]);
        }
    }
#pragma GCC unroll 8
    for (j = 0; j < n_tokens; j++)
        pmpd_avx2_store(acc[j], y, ldy, t0 + j, rb * PMPD_QROWS, row_end);
}

#if !PMPD_AVX2_VNNI
/* The q2cb decode GEMV, on the same quartered walk, with less work per
 * block (without AVX-VNNI, where every multiply-add is three
 * instructions):
 *   - two chunks' vpmaddubsw results are added in int16 and the bias of the
 *     unsigned levels subtracted there: each int16 lane then holds 4
 *     products l * x with |l| <= 64, |x| <= 127, at most 32512 in
 *     magnitude, so the wrapping adds are exact whatever the biased
 *     intermediate was (each vpmaddubsw alone, two products of at most
 *     128 * 127, cannot saturate).  One vpmaddwd per two chunks instead of
 *     one per chunk, and no int32 bias.  The bias vectors (64 times the
 *     pair sums of x) are made once per group for the tile's 4 blocks
 *     (four vpmaddubsw: measured faster than one on the 4 chunks side by
 *     side and the shuffles that then spread its sums);
 *   - the two row blocks of each half of the tile share one float step:
 *     their int32 lanes are folded to one per row (pmpd_avx2_q2cb_fold),
 *     and one vcvtph2ps converts both blocks' scales, interleaved to match;
 *   - the vpshufb tables and indexes take fewer operations
 *     (pmpd_avx2_q2cb_levels).
 * On a Zen3 core (AVX2 without VNNI, where this loop runs), pmpd-bench's
 * q2cb rows in L2 read 5.5-10.5 GB/s against 4.7-7.0 for the generic walk,
 * alternated (docs/kernels.md). */
PMPD_AVX2_INLINE __m256i pmpd_avx2_q2cb_dot(const unsigned char *block, const uint64_t *pairs, const __m256i x[4],
                                            __m256i bias01, __m256i bias23)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i w[4], even, odd;
    pmpd_avx2_q2cb_levels(block, pairs, w);
    even = _mm256_sub_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(w[0], x[0]), _mm256_maddubs_epi16(w[1], x[1])),
                            bias01);
    odd = _mm256_sub_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(w[2], x[2]), _mm256_maddubs_epi16(w[3], x[3])),
                           bias23);
    return _mm256_add_epi32(_mm256_madd_epi16(even, ones), _mm256_madd_epi16(odd, ones));
}

/* Per lane [p0 + p1, p2 + p3, q0 + q1, q2 + q3] (vphaddd's result): two
 * vshufps and an add, which issue on any of Zen 5's vector pipes where
 * vphaddd issues one every other cycle. */
static inline __m256i pmpd_avx2_q2cb_fold(__m256i p, __m256i q)
{
    __m256 a = _mm256_castsi256_ps(p), b = _mm256_castsi256_ps(q);
    __m256 even = _mm256_shuffle_ps(a, b, 0x88), odd = _mm256_shuffle_ps(a, b, 0xDD);
    PMPD_AVX2_OPAQUE(even);
    return _mm256_add_epi32(_mm256_castps_si256(even), _mm256_castps_si256(odd));
}

/* Both blocks' scales, ordered as pmpd_avx2_q2cb_fold leaves their rows:
 * p0 p1 q0 q1 p2 p3 q2 q3. */
static inline __m256 pmpd_avx2_q2cb_scales(const unsigned char *p, const unsigned char *q)
{
    __m128i h = _mm_unpacklo_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p),
                                   _mm_loadl_epi64((const __m128i *)(const void *)q));
#if defined(__F16C__)
    return _mm256_cvtph_ps(h);
#else
    uint16_t f[8];
    int i;
    float v[8];
    _mm_storeu_si128((__m128i *)(void *)f, h);
    for (i = 0; i < 8; i++)
        v[i] = pmpd_f16_to_f32(f[i]);
    return _mm256_loadu_ps(v);
#endif
}

/* The q2cb tile's lanes hold exactly the walk's 4 streams' row blocks. */
typedef char pmpd_avx2_q2cb_four_streams[PMPD_QWALK_STREAMS == 4 ? 1 : -1];

/* Group g of a tile's 4 row blocks (blocks[j]: row block j's first
 * block): acc[0] gathers blocks 0 and 1, acc[1] blocks 2 and 3. */
PMPD_AVX2_INLINE void pmpd_avx2_q2cb_group(const unsigned char *const blocks[4], const pmpd_qact *act,
                                           const uint64_t *pairs, size_t g, __m256 acc[2])
{
    const __m256i bias_level = _mm256_set1_epi8(PMPD_Q2CB_LEVEL_LIMIT);
    const int8_t *xg = act->qs + g * 64; /* token 0: chunk c at 16c */
    __m256i x[4], bias01, bias23;
    __m256 as = _mm256_set1_ps(act->scale[g]);
    size_t j;
#pragma GCC unroll 4
    for (j = 0; j < 4; j++)
        x[j] = pmpd_avx2_chunk(xg + 16 * j);
    bias01 = _mm256_add_epi16(_mm256_maddubs_epi16(bias_level, x[0]), _mm256_maddubs_epi16(bias_level, x[1]));
    bias23 = _mm256_add_epi16(_mm256_maddubs_epi16(bias_level, x[2]), _mm256_maddubs_epi16(bias_level, x[3]));
#pragma GCC unroll 2
    for (j = 0; j < 2; j++) {
        const unsigned char *p = blocks[2 * j] + g * PMPD_Q2CB_BLOCK_BYTES;
        const unsigned char *q = blocks[2 * j + 1] + g * PMPD_Q2CB_BLOCK_BYTES;
        __m256i d;
        _mm_prefetch((const char *)p + PMPD_AVX2_PREFETCH, _MM_HINT_T1);
        _mm_prefetch((const char *)q + PMPD_AVX2_PREFETCH, _MM_HINT_T1);
        d = pmpd_avx2_q2cb_fold(pmpd_avx2_q2cb_dot(p, pairs, x, bias01, bias23),
                                pmpd_avx2_q2cb_dot(q, pairs, x, bias01, bias23));
        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_mul_ps(pmpd_avx2_q2cb_scales(p, q), as), acc[j]);
    }
}

PMPD_AVX2_INLINE void pmpd_avx2_q2cb_decode(const pmpd_qmatrix *w, const pmpd_qact *act, const uint64_t *pairs,
                                            size_t row_begin, size_t row_end, float *y)
{
    const size_t n_groups = act->n_groups;
    const pmpd_qwalk q = pmpd_qwalk_of(row_begin, row_end);
    size_t i, j, g;
    for (i = 0; i < q.tiles; i++) {
        const unsigned char *blocks[PMPD_QWALK_STREAMS];
        __m256 acc[2];
        float lanes[16];
        acc[0] = acc[1] = _mm256_setzero_ps();
        pmpd_avx2_tile_blocks(w, &q, i, blocks);
        for (g = 0; g < n_groups; g++)
            pmpd_avx2_q2cb_group(blocks, act, pairs, g, acc);
        _mm256_storeu_ps(lanes, acc[0]);
        _mm256_storeu_ps(lanes + 8, acc[1]);
#pragma GCC unroll 4
        for (j = 0; j < 4; j++) {
            /* Block j's rows: lanes 0, 1, 4, 5 (even j) or 2, 3, 6, 7 of its half. */
            const float *l = lanes + 8 * (j / 2) + 2 * (j % 2);
            const size_t rb = pmpd_qwalk_block(&q, i, j);
            float result[4];
            result[0] = l[0];
            result[1] = l[1];
            result[2] = l[4];
            result[3] = l[5];
            if (rb < q.rb_end)
                pmpd_qmatmul_store(y, 0, 0, rb * PMPD_QROWS, row_end, result);
        }
    }
}
#endif /* !PMPD_AVX2_VNNI */

PMPD_AVX2_INLINE void pmpd_avx2_walk(uint32_t type, const pmpd_qmatrix *w, const pmpd_qact *act,
                                     const uint64_t *pairs, size_t row_begin, size_t row_end, float *y,
                                     size_t ldy)
{
    size_t rb, t0, first;
    if (act->n_tokens == 1) {
#if !PMPD_AVX2_VNNI
        if (type == PMPD_TENSOR_Q2CB) {
            pmpd_avx2_q2cb_decode(w, act, pairs, row_begin, row_end, y);
            return;
        }
#endif
        pmpd_avx2_decode(type, w, act, pairs, row_begin, row_end, y);
        return;
    }
    for (first = 0; first < act->n_tokens; first += PMPD_QMATMUL_TOKEN_BLOCK) {
        size_t last = act->n_tokens - first < PMPD_QMATMUL_TOKEN_BLOCK ? act->n_tokens
                                                                       : first + PMPD_QMATMUL_TOKEN_BLOCK;
        for (rb = row_begin / PMPD_QROWS; rb * PMPD_QROWS < row_end; rb++) {
            for (t0 = first; t0 + PMPD_AVX2_TOKENS <= last; t0 += PMPD_AVX2_TOKENS)
                pmpd_avx2_gemm_tile(type, w, act, pairs, rb, t0, row_end, y, ldy);
            for (; t0 < last; t0++)
                pmpd_avx2_gemv(type, w, act, pairs, rb, t0, row_end, y, ldy);
        }
    }
}

PMPD_INTERNAL void pmpd_qmatmul_avx2(const pmpd_qmatrix *w, const pmpd_qact *act, size_t row_begin,
                                     size_t row_end, float *y, size_t ldy)
{
    /* 2 KB of stack: rebuilt per call (256 entries), far less work than
     * the blocks of any matrix that uses it. */
    uint64_t pairs[256];
    switch (w->type) {
    case PMPD_TENSOR_Q8:
        pmpd_avx2_walk(PMPD_TENSOR_Q8, w, act, NULL, row_begin, row_end, y, ldy);
        break;
    case PMPD_TENSOR_Q4:
        pmpd_avx2_walk(PMPD_TENSOR_Q4, w, act, NULL, row_begin, row_end, y, ldy);
        break;
    default:
        pmpd_q2cb_codebook_pairs(w, PMPD_Q2CB_LEVEL_LIMIT, pairs);
        pmpd_avx2_walk(PMPD_TENSOR_Q2CB, w, act, pairs, row_begin, row_end, y, ldy);
        break;
    }
}

#undef PMPD_AVX2_TOKENS
#undef PMPD_AVX2_PREFETCH
#undef PMPD_AVX2_INLINE
#undef PMPD_AVX2_VNNI
#undef PMPD_AVX2_OPAQUE

#endif
