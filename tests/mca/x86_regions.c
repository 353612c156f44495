/* llvm-mca regions for `make mca` on x86: the loop bodies of the AVX2 (and,
 * where the target has it, AVX-512) GEMV and attention kernels, cut out
 * between LLVM-MCA-BEGIN/END markers (compiled to assembly only, never
 * linked).  As in neon_gemv_regions.c a region's name is
 * kernel/elements/bytes: the weights (or K/V elements) it multiplies and
 * the bytes of them it reads per iteration.
 *   q8 / q4 / q2cb-gemm  two 4-row groups of 32 (the GEMV's even/odd pair;
 *                   for q2cb, the GEMM's leftover tokens);
 *   q2cb            one group of the q2cb decode tile: 4 row blocks;
 *   *-avx512        one group of a tile of 4 row blocks (16 rows);
 *   nested-kbit     one 256-column superblock of a 4-row block (the
 *                   AVX2 kernel; nested-kbit-avx512 the AVX-512 one);
 *   nuqK-avx512     one pair step of a decode tile: 64 rotated columns of
 *                   4 rows, the token's activations permuted for it
 *                   included (a row's end);
 *   nuqK-wide-avx512  a wide step of a decode tile (256 columns of 4 rows
 *                   at 2 bits, 128 at 3 and 4), the bulk of a row;
 *   tcq-avx512      one 64-step unit of a TCQ decode tile: 128 rotated
 *                   columns of 4 rows, the token's activations included
 *                   (the same operations at every width: bytes at 2 bits);
 *   vqP-avx512      the same for VQ with P index bits per pair (full-width
 *                   loads, as at a row's end), vqP-wide-avx512 its wide
 *                   steps (256 columns of 4 rows at P = 4, else 128), the
 *                   bulk of a row;
 *   attn-*-scores   two K rows of a 16-dim head against 4 query heads,
 *                   reduction included (a 64-dim head runs the 16-dim
 *                   loop body 4 times, then one reduction);
 *   attn-*-values   four V rows, 16 of their dims, into 4 heads' sums.
 *   pq-scores       one token's score over four subspaces (4 heads): 4 codes
 *                   (code bytes) per iteration.
 *   pq-lut8-scores  one subspace of a 64-token block through the 8-bit key
 *                   tables (AVX-512 VBMI), 4 heads: 256 lookups of 64
 *                   code bytes (cycles / 64 = per token and subspace).
 */
#include "pmpd_impl/kvcache/attention_kernels_avx2.c"
#include "pmpd_impl/kvcache/pq_lut8_avx512.c"
#include "pmpd_impl/weights/anyprec/anyprec_gemv_avx2.c"
#include "pmpd_impl/weights/anyprec/anyprec_gemv_avx512.c"
#include "pmpd_impl/weights/grouped/x86_avx2/qmatmul.c"
#include "pmpd_impl/weights/grouped/x86_avx512/qmatmul.c"
#include "pmpd_impl/weights/nuq/nuq_avx512.c"
#include "pmpd_impl/weights/tcq/tcq_avx512.c"
#include "pmpd_impl/weights/vq/vq_avx512.c"

#define MCA_BEGIN(name) __asm__ volatile("# LLVM-MCA-BEGIN " name ::: "memory")
#define MCA_END(name) __asm__ volatile("# LLVM-MCA-END " name ::: "memory")

void mca_quantized(uint32_t type, const pmpd_qmatrix *w, const pmpd_qact *act, const uint64_t *pairs, size_t g,
                   __m256 *acc);
void mca_nested(unsigned bits, const pmpd_anyprec_matrix *m, const int8_t *xq, const pmpd_anyprec_units *u,
                uint32_t s, __m256 *acc);
void mca_attention(const float (*q)[256], const void *rows, const float *weights, float *scores,
                   float (*sums)[256], int half);
void mca_pq_scores(const float *lut, const uint8_t *codes, float *scores);

/* Groups g and g+1 of row block 0, as the GEMV runs them. */
#define MCA_GROUPS(type, name)                                                                                       \
    do {                                                                                                             \
        const unsigned char *blocks = pmpd_qformat_block(w, 0, g);                                                  \
        __m256 even = acc[0], odd = acc[1];                                                                          \
        MCA_BEGIN(name);                                                                                             \
        even = pmpd_avx2_gemv_group(type, blocks, act, pairs, 0, g, even);                                           \
        odd = pmpd_avx2_gemv_group(type, blocks + pmpd_qformat_block_bytes(type), act, pairs, 0, g + 1, odd);       \
        MCA_END(name);                                                                                               \
        acc[0] = even;                                                                                               \
        acc[1] = odd;                                                                                                \
    } while (0)

void mca_quantized(uint32_t type, const pmpd_qmatrix *w, const pmpd_qact *act, const uint64_t *pairs, size_t g,
                   __m256 *acc)
{
    if (type == PMPD_TENSOR_Q8)
        MCA_GROUPS(PMPD_TENSOR_Q8, "q8/256/272");
    else if (type == PMPD_TENSOR_Q4)
        MCA_GROUPS(PMPD_TENSOR_Q4, "q4/256/144");
    else
        MCA_GROUPS(PMPD_TENSOR_Q2CB, "q2cb-gemm/256/84");
}

#if !PMPD_AVX2_VNNI
void mca_q2cb_decode(const pmpd_qmatrix *w, const pmpd_qact *act, const uint64_t *pairs, size_t g, __m256 *acc);

/* One group of the q2cb decode tile (4 row blocks), as its loop runs it. */
void mca_q2cb_decode(const pmpd_qmatrix *w, const pmpd_qact *act, const uint64_t *pairs, size_t g, __m256 *acc)
{
    const unsigned char *blocks[4];
    size_t j;
    for (j = 0; j < 4; j++)
        blocks[j] = pmpd_qformat_block(w, j, 0);
    MCA_BEGIN("q2cb/512/168");
    pmpd_avx2_q2cb_group(blocks, act, pairs, g, acc);
    MCA_END("q2cb/512/168");
}
#endif

/* The tables stay in registers across superblocks, as in the real loop. */
#define MCA_NESTED(k, name)                                                                                          \
    do {                                                                                                             \
        __m256i table[2 * PMPD_ANYPREC_ROW_BLOCK];                                                                   \
        anyprec_avx2_block_tables(m, 0, table, k);                                                                   \
        MCA_BEGIN(name);                                                                                             \
        anyprec_avx2_block_super(m, xq, u, 0, s, table, acc, k);                                                     \
        MCA_END(name);                                                                                               \
    } while (0)

void mca_nested(unsigned bits, const pmpd_anyprec_matrix *m, const int8_t *xq, const pmpd_anyprec_units *u,
                uint32_t s, __m256 *acc)
{
    if (bits == 2)
        MCA_NESTED(2, "nested-2bit/1024/256");
    else if (bits == 3)
        MCA_NESTED(3, "nested-3bit/1024/384");
    else
        MCA_NESTED(4, "nested-4bit/1024/512");
}

#if PMPD_USE_AVX512
void mca_nested_avx512(unsigned bits, const pmpd_anyprec_matrix *m, const int8_t *xq, const pmpd_anyprec_units *u,
                       uint32_t s, __m512 *acc);

#define MCA_NESTED_AVX512(k, name)                                                                                   \
    do {                                                                                                             \
        __m512i table[2 * PMPD_ANYPREC_ROW_BLOCK];                                                                   \
        const unsigned char *plane[PMPD_ANYPREC_MAX_BITS], *field = pmpd_anyprec_super_slices(m, 0, s, k, plane);    \
        anyprec_avx512_block_tables(m, 0, table, k);                                                                 \
        MCA_BEGIN(name);                                                                                             \
        anyprec_avx512_block_super(field, plane, m, xq, u, s, table, acc, k);                                        \
        MCA_END(name);                                                                                               \
    } while (0)

void mca_nested_avx512(unsigned bits, const pmpd_anyprec_matrix *m, const int8_t *xq, const pmpd_anyprec_units *u,
                       uint32_t s, __m512 *acc)
{
    if (bits == 2)
        MCA_NESTED_AVX512(2, "nested-2bit-avx512/1024/256");
    else if (bits == 3)
        MCA_NESTED_AVX512(3, "nested-3bit-avx512/1024/384");
    else
        MCA_NESTED_AVX512(4, "nested-4bit-avx512/1024/512");
}
#endif

#if PMPD_USE_AVX512
void mca_nuq_avx512(const pmpd_nuq_matrix *m, const int8_t *q, const float *d, size_t n_blocks, size_t b,
                    size_t stride, pmpd_rotated_avx512_sums acc);

/* The accumulators stay in registers across steps, as in the real loop. */
#define MCA_NUQ_AVX512(k, name)                                                                                     \
    do {                                                                                                             \
        nuq_avx512_consts consts;                                                                                    \
        pmpd_rotated_avx512_sums sums;                                                                               \
        unsigned i;                                                                                                  \
        nuq_avx512_init(k, &consts);                                                                                 \
        for (i = 0; i < 4; i++)                                                                                      \
            sums[i][0] = acc[i][0];                                                                                  \
        MCA_BEGIN(name);                                                                                             \
        nuq_avx512_step(m, &consts, k, q, d, n_blocks, b, 2, 0, stride, 4, 0, 1, sums);                              \
        MCA_END(name);                                                                                               \
        for (i = 0; i < 4; i++)                                                                                      \
            acc[i][0] = sums[i][0];                                                                                  \
    } while (0)

#define MCA_NUQ_WIDE_AVX512(k, name)                                                                                \
    do {                                                                                                             \
        nuq_avx512_consts consts;                                                                                    \
        pmpd_rotated_avx512_sums sums;                                                                               \
        unsigned i;                                                                                                  \
        nuq_avx512_init(k, &consts);                                                                                 \
        for (i = 0; i < 4; i++)                                                                                      \
            sums[i][0] = acc[i][0];                                                                                  \
        MCA_BEGIN(name);                                                                                             \
        nuq_avx512_wide_step(m, &consts, k, q, d, n_blocks, b, 0, stride, 4, 0, 1, sums);                            \
        MCA_END(name);                                                                                               \
        for (i = 0; i < 4; i++)                                                                                      \
            acc[i][0] = sums[i][0];                                                                                  \
    } while (0)

/* The decode tile's steps: 4 rows (4 streams) x 64 columns (or a wide
 * step's 256 or 128), one token. */
void mca_nuq_avx512(const pmpd_nuq_matrix *m, const int8_t *q, const float *d, size_t n_blocks, size_t b,
                    size_t stride, pmpd_rotated_avx512_sums acc)
{
    if (m->bits == 2) {
        MCA_NUQ_AVX512(2, "nuq2-avx512/256/64");
        MCA_NUQ_WIDE_AVX512(2, "nuq2-wide-avx512/1024/256");
    } else if (m->bits == 3) {
        MCA_NUQ_AVX512(3, "nuq3-avx512/256/96");
        MCA_NUQ_WIDE_AVX512(3, "nuq3-wide-avx512/512/192");
    } else {
        MCA_NUQ_AVX512(4, "nuq4-avx512/256/128");
        MCA_NUQ_WIDE_AVX512(4, "nuq4-wide-avx512/512/256");
    }
}
#endif

#if PMPD_USE_AVX512
void mca_vq_avx512(const pmpd_vq_matrix *m, const int8_t *q, const float *d, size_t n_blocks, size_t b,
                   size_t stride, pmpd_rotated_avx512_sums acc);

#define MCA_VQ_AVX512(p, name)                                                                                      \
    do {                                                                                                             \
        vq_avx512_consts consts;                                                                                     \
        pmpd_rotated_avx512_sums sums;                                                                               \
        unsigned i;                                                                                                  \
        vq_avx512_init(p, &consts);                                                                                  \
        for (i = 0; i < 4; i++)                                                                                      \
            sums[i][0] = acc[i][0];                                                                                  \
        MCA_BEGIN(name);                                                                                             \
        vq_avx512_step(m, &consts, p, q, d, n_blocks, b, 2, 0, 0, stride, 4, 0, 1, sums);                            \
        MCA_END(name);                                                                                               \
        for (i = 0; i < 4; i++)                                                                                      \
            acc[i][0] = sums[i][0];                                                                                  \
    } while (0)

#define MCA_VQ_WIDE_AVX512(p, name)                                                                                 \
    do {                                                                                                             \
        vq_avx512_consts consts;                                                                                     \
        pmpd_rotated_avx512_sums sums;                                                                               \
        unsigned i;                                                                                                  \
        vq_avx512_init(p, &consts);                                                                                  \
        for (i = 0; i < 4; i++)                                                                                      \
            sums[i][0] = acc[i][0];                                                                                  \
        MCA_BEGIN(name);                                                                                             \
        vq_avx512_wide_step(m, &consts, p, q, d, n_blocks, b, 0, stride, 4, 0, 1, sums);                             \
        MCA_END(name);                                                                                               \
        for (i = 0; i < 4; i++)                                                                                      \
            acc[i][0] = sums[i][0];                                                                                  \
    } while (0)

/* VQ's decode tile steps, as NUQ's. */
void mca_vq_avx512(const pmpd_vq_matrix *m, const int8_t *q, const float *d, size_t n_blocks, size_t b,
                   size_t stride, pmpd_rotated_avx512_sums acc)
{
    switch (m->pair_bits) {
    case 4:
        MCA_VQ_AVX512(4, "vq4-avx512/256/64");
        MCA_VQ_WIDE_AVX512(4, "vq4-wide-avx512/1024/256");
        break;
    case 5:
        MCA_VQ_AVX512(5, "vq5-avx512/256/80");
        MCA_VQ_WIDE_AVX512(5, "vq5-wide-avx512/512/160");
        break;
    case 6:
        MCA_VQ_AVX512(6, "vq6-avx512/256/96");
        MCA_VQ_WIDE_AVX512(6, "vq6-wide-avx512/512/192");
        break;
    case 7:
        MCA_VQ_AVX512(7, "vq7-avx512/256/112");
        MCA_VQ_WIDE_AVX512(7, "vq7-wide-avx512/512/224");
        break;
    default:
        MCA_VQ_AVX512(8, "vq8-avx512/256/128");
        MCA_VQ_WIDE_AVX512(8, "vq8-wide-avx512/512/256");
        break;
    }
}
#endif

/* A 64-dim head and a group of four query heads, the bench's shape. */
void mca_attention(const float (*q)[256], const void *rows, const float *weights, float *scores,
                   float (*sums)[256], int half)
{
    if (half) {
        MCA_BEGIN("attn-f16-scores/32/64");
        kv_avx2_scores_chunk(q, 4, 0, 16, 0, 16, rows, 64, 2, scores, 1);
        MCA_END("attn-f16-scores/32/64");
        MCA_BEGIN("attn-f16-values/64/128");
        kv_avx2_accumulate_block(weights, 4, 0, 64, 0, rows, 64, 0, 4, sums, 0, 1);
        MCA_END("attn-f16-values/64/128");
    } else {
        MCA_BEGIN("attn-f32-scores/32/128");
        kv_avx2_scores_chunk(q, 4, 0, 16, 0, 16, rows, 64, 2, scores, 0);
        MCA_END("attn-f32-scores/32/128");
        MCA_BEGIN("attn-f32-values/64/256");
        kv_avx2_accumulate_block(weights, 4, 0, 64, 0, rows, 64, 0, 4, sums, 0, 0);
        MCA_END("attn-f32-values/64/256");
    }
}

/* 8-bit codes, tables of 256 entries of 4 lanes. */
void mca_pq_scores(const float *lut, const uint8_t *codes, float *scores)
{
    MCA_BEGIN("pq-scores/4/4");
    pq_avx2_score4(lut, 1024, 4, codes, scores);
    MCA_END("pq-scores/4/4");
}

#if PMPD_PQ_USE_LUT8
void mca_pq_lut8_scores(const uint8_t *tables, const uint8_t *codes, __m512i *sums);

/* The sums stay in registers across subspaces, as in the real loop. */
void mca_pq_lut8_scores(const uint8_t *tables, const uint8_t *codes, __m512i *sums)
{
    __m512i s[8];
    int k;
    for (k = 0; k < 8; k++)
        s[k] = sums[k];
    MCA_BEGIN("pq-lut8-scores/256/64");
    lut8_subspace(tables, codes, s);
    MCA_END("pq-lut8-scores/256/64");
    for (k = 0; k < 8; k++)
        sums[k] = s[k];
}
#endif

#if PMPD_QMATMUL_AVX512
void mca_avx512(uint32_t type, const unsigned char *const p[4], const int8_t *x, int32_t bias,
                const pmpd_avx512_consts *k, __m512i *out);

/* One group of a tile: the integer part (the float work after it is one
 * conversion, one multiply and one FMA for all 16 rows). */
void mca_avx512(uint32_t type, const unsigned char *const p[4], const int8_t *x, int32_t bias,
                const pmpd_avx512_consts *k, __m512i *out)
{
    const __m512i xlo_index = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2);
    const __m512i xhi_index = _mm512_setr_epi64(4, 4, 4, 4, 6, 6, 6, 6);
    if (type == PMPD_TENSOR_Q2CB) {
        MCA_BEGIN("q2cb-avx512/512/168");
        *out = pmpd_avx512_q2cb(p, x, bias, k);
        MCA_END("q2cb-avx512/512/168");
    } else {
        __m512i xv = _mm512_loadu_si512((const void *)x), d[4];
        __m512i xlo = _mm512_permutexvar_epi64(xlo_index, xv), xhi = _mm512_permutexvar_epi64(xhi_index, xv);
        MCA_BEGIN("q4-avx512/512/288");
        d[0] = pmpd_avx512_block(PMPD_TENSOR_Q4, p[0], xlo, xhi, k);
        d[1] = pmpd_avx512_block(PMPD_TENSOR_Q4, p[1], xlo, xhi, k);
        d[2] = pmpd_avx512_block(PMPD_TENSOR_Q4, p[2], xlo, xhi, k);
        d[3] = pmpd_avx512_block(PMPD_TENSOR_Q4, p[3], xlo, xhi, k);
        *out = pmpd_avx512_fold(d, k);
        MCA_END("q4-avx512/512/288");
    }
}
#endif

#if PMPD_TCQ_USE_AVX512
void mca_tcq_avx512(const tcq_avx512_consts *c, const __m512i *lo, const __m512i *hi, const int8_t *q, const float *d,
                    __m512 *acc);

/* The sequences stay in registers across their two units, as in the real
 * loop. */
void mca_tcq_avx512(const tcq_avx512_consts *c, const __m512i *lo, const __m512i *hi, const int8_t *q, const float *d,
                    __m512 *acc)
{
    __m512i w[4][2];
    tcq_avx512_input in;
    MCA_BEGIN("tcq-avx512/512/128");
    tcq_avx512_unit(lo[0], hi[0], c, &c->shift[0], 0, w[0]);
    tcq_avx512_unit(lo[1], hi[1], c, &c->shift[0], 0, w[1]);
    tcq_avx512_unit(lo[2], hi[2], c, &c->shift[0], 0, w[2]);
    tcq_avx512_unit(lo[3], hi[3], c, &c->shift[0], 0, w[3]);
    tcq_avx512_input_for(c, q, d, &in);
    acc[0] = tcq_avx512_dot(w[0], &in, acc[0]);
    acc[1] = tcq_avx512_dot(w[1], &in, acc[1]);
    acc[2] = tcq_avx512_dot(w[2], &in, acc[2]);
    acc[3] = tcq_avx512_dot(w[3], &in, acc[3]);
    MCA_END("tcq-avx512/512/128");
}
#endif
