/* llvm-mca regions for `make mca`: the loop body of each NEON GEMV, cut
 * out between LLVM-MCA-BEGIN/END markers (compiled to assembly only, never
 * linked).  A region's name is kernel/weights/bytes: the weights it
 * multiplies and the weight bytes it reads per iteration, so cycles per 32
 * weights and bytes per cycle follow from llvm-mca's cycles per iteration.
 * Nested: one 256-column superblock of a 4-row block at 2, 3, 4 bits (128
 * bytes per bit).  q8 / q4 / q2cb: two 4-row groups of 32 (the GEMV's
 * even/odd pair), 136 / 72 / 42 bytes a group.  vq and nuq: one block of
 * 32 columns of a 4-row tile for one token, as one step of the GEMV's
 * block loop (PMPD_ROTATED_NEON_TILE_BLOCKS): 4 x 2 p bytes at p index
 * bits per pair, 4 x 4 b bytes at b bits; the tables are in registers
 * before the region, as the loop keeps them (made opaque by an empty asm,
 * so that the compiler cannot start the lookups before the marker).  tcq: 64 columns of one sequence for one token, as one
 * iteration of tcq_neon_sequence's loop: the 32 steps hashed in the
 * previous iteration looked up, the next 32 hashed, two blocks' products
 * (a step of shift s bits holds 2 weights: 2 s bytes per 32 weights); the
 * stack copy of the sequence, once per 256 weights, and the signed pair
 * table, once per call, are left out. */
#include "pmpd_impl/weights/grouped/arm_neon/qmatmul.c"
#include "pmpd_impl/weights/anyprec/anyprec_gemv_neon.c"
#include "pmpd_impl/weights/vq/vq_neon.c"
#include "pmpd_impl/weights/nuq/nuq_neon.c"
#include "pmpd_impl/weights/tcq/tcq_neon.c"

#define MCA_BEGIN(name) __asm__ volatile("# LLVM-MCA-BEGIN " name ::: "memory")
#define MCA_END(name) __asm__ volatile("# LLVM-MCA-END " name ::: "memory")

void mca_nested_2bit(const pmpd_anyprec_matrix *m, const int8_t *xq, const pmpd_anyprec_units *u, uint32_t s,
                     float32x4_t *acc);
void mca_nested_3bit(const pmpd_anyprec_matrix *m, const int8_t *xq, const pmpd_anyprec_units *u, uint32_t s,
                     float32x4_t *acc);
void mca_nested_4bit(const pmpd_anyprec_matrix *m, const int8_t *xq, const pmpd_anyprec_units *u, uint32_t s,
                     float32x4_t *acc);
void mca_quantized(uint32_t type, const pmpd_qmatrix *w, const pmpd_qact *act, const uint64_t *pairs, size_t g,
                   float32x4_t *acc);
void mca_vq(const pmpd_vq_matrix *m, const int8_t *q, const float *d, float32x4_t *acc);
void mca_nuq(const pmpd_nuq_matrix *m, const int8_t *q, const float *d, float32x4_t *acc);
void mca_tcq(unsigned shift, const tcq_neon_consts *consts, const uint8_t *bytes, const uint16_t *pairs, uint16x8_t *h,
             const int8_t *x, const float *d, float32x4_t *acc);

/* The tables stay in registers across superblocks, as in the real loop. */
#define MCA_NESTED(bits, name)                                                                                       \
    uint8x16_t table[2 * PMPD_ANYPREC_ROW_BLOCK];                                                                    \
    float32x4_t sums[PMPD_ANYPREC_ROW_BLOCK];                                                                         \
    memcpy(sums, acc, sizeof sums);                                                                                  \
    anyprec_neon_block_tables(m, 0, bits, table);                                                                     \
    MCA_BEGIN(name);                                                                                                 \
    anyprec_neon_block_super(m, xq, u, 0, s, table, sums, 2, bits);                                                  \
    MCA_END(name);                                                                                                   \
    memcpy(acc, sums, sizeof sums)

void mca_nested_2bit(const pmpd_anyprec_matrix *m, const int8_t *xq, const pmpd_anyprec_units *u, uint32_t s,
                     float32x4_t *acc)
{
    MCA_NESTED(2, "nested-2bit/1024/256");
}

void mca_nested_3bit(const pmpd_anyprec_matrix *m, const int8_t *xq, const pmpd_anyprec_units *u, uint32_t s,
                     float32x4_t *acc)
{
    MCA_NESTED(3, "nested-3bit/1024/384");
}

void mca_nested_4bit(const pmpd_anyprec_matrix *m, const int8_t *xq, const pmpd_anyprec_units *u, uint32_t s,
                     float32x4_t *acc)
{
    MCA_NESTED(4, "nested-4bit/1024/512");
}

/* Groups g and g+1 of row block 0, as pmpd_neon_gemv runs them. */
#define MCA_GROUPS(type, name)                                                                                       \
    do {                                                                                                             \
        const unsigned char *blocks = pmpd_qformat_block(w, 0, g);                                                  \
        float32x4_t even = acc[0], odd = acc[1];                                                                      \
        MCA_BEGIN(name);                                                                                             \
        even = pmpd_neon_gemv_group(type, blocks, act, pairs, 0, g, even);                                      \
        odd = pmpd_neon_gemv_group(type, blocks + pmpd_qformat_block_bytes(type), act, pairs, 0, g + 1, odd);  \
        MCA_END(name);                                                                                               \
        acc[0] = even;                                                                                               \
        acc[1] = odd;                                                                                                \
    } while (0)

/* q2cb: with dotprod (little-endian) the GEMV is an assembly loop over
 * pairs of groups; the region is one pass of its body (which also
 * finishes the previous pass's odd group), pointers set up before it as
 * the loop keeps them in registers.  Never run: the vector registers the
 * body expects (v10..v13) are not set up here. */
#if PMPD_NEON_Q2CB_ASM
#define MCA_Q2CB(name)                                                                                               \
    do {                                                                                                             \
        const unsigned char *block = pmpd_qformat_block(w, 0, g);                                                   \
        const int8_t *x = pmpd_qact_chunk(act, 0, 4 * g);                                                            \
        const float *xs = act->scale + g;                                                                            \
        size_t n = 1;                                                                                                \
        float32x4_t even = acc[0], odd = acc[1];                                                                      \
        pmpd_neon_q2cb_luts luts;                                                                                    \
        (void)pairs;                                                                                                 \
        pmpd_neon_q2cb_luts_build(w, &luts);                                                                         \
        MCA_BEGIN(name);                                                                                             \
        __asm__ volatile("1:\n\t" PMPD_NEON_Q2CB_STEP "b.ne 1b"                                                      \
                         : [blk] "+r"(block), [x] "+r"(x), [xs] "+r"(xs), [n] "+r"(n), [ev] "+w"(even),           \
                           [od] "+w"(odd)                                                                            \
                         : [lo] "r"(luts.lo), [hi] "r"(luts.hi)                                                      \
                         : PMPD_NEON_Q2CB_CLOBBERS);                                                                 \
        MCA_END(name);                                                                                               \
        acc[0] = even;                                                                                               \
        acc[1] = odd;                                                                                                \
    } while (0)
#else
#define MCA_Q2CB(name) MCA_GROUPS(PMPD_TENSOR_Q2CB, name)
#endif

void mca_quantized(uint32_t type, const pmpd_qmatrix *w, const pmpd_qact *act, const uint64_t *pairs, size_t g,
                   float32x4_t *acc)
{
    if (type == PMPD_TENSOR_Q8)
        MCA_GROUPS(PMPD_TENSOR_Q8, "q8/256/272");
    else if (type == PMPD_TENSOR_Q4)
        MCA_GROUPS(PMPD_TENSOR_Q4, "q4/256/144");
    else
        MCA_Q2CB("q2cb/256/84");
}

/* Block 0 of rows 0..3 for one token, as vq_neon_tile and nuq_neon_tile
 * run a step: WEIGHTS(rows, w) looks them up. */
#define MCA_ROTATED(name, WEIGHTS)                                                                                   \
    do {                                                                                                             \
        const uint8_t *rows[PMPD_ROTATED_NEON_ROWS];                                                                 \
        pmpd_rotated_neon_sums sums;                                                                                 \
        int8x16_t w[2][PMPD_ROTATED_NEON_ROWS];                                                                       \
        size_t i;                                                                                                    \
        for (i = 0; i < PMPD_ROTATED_NEON_ROWS; i++) {                                                               \
            rows[i] = m->index + i * m->row_bytes;                                                                   \
            sums[i][0] = acc[i];                                                                                     \
        }                                                                                                            \
        MCA_BEGIN(name);                                                                                             \
        WEIGHTS(rows, w);                                                                                            \
        pmpd_rotated_neon_block(w, PMPD_ROTATED_NEON_ROWS, q, m->padded, d, 1, 1, sums);                             \
        MCA_END(name);                                                                                               \
        for (i = 0; i < PMPD_ROTATED_NEON_ROWS; i++)                                                                 \
            acc[i] = sums[i][0];                                                                                     \
    } while (0)

/* The first chunk of each coordinate's table in registers (the loop's
 * hoisted tables; further chunks of 128 and 256 points are read from the
 * stack, as the loop does). */
#define MCA_VQ(p, name)                                                                                              \
    do {                                                                                                             \
        const unsigned pair_bits = (p);                                                                              \
        vq_neon_tables k;                                                                                            \
        vq_neon_load_tables(pair_bits, &k);                                                                          \
        __asm__ volatile("" : "+w"(k.first[0].val[0]), "+w"(k.first[0].val[1]), "+w"(k.first[0].val[2]),          \
                         "+w"(k.first[0].val[3]), "+w"(k.second[0].val[0]), "+w"(k.second[0].val[1]),             \
                         "+w"(k.second[0].val[2]), "+w"(k.second[0].val[3]));                                     \
        MCA_ROTATED(name, MCA_VQ_WEIGHTS);                                                                           \
    } while (0)
#define MCA_VQ_WEIGHTS(rows, w) vq_neon_weights(rows, PMPD_ROTATED_NEON_ROWS, 0, pair_bits, &k, w)

void mca_vq(const pmpd_vq_matrix *m, const int8_t *q, const float *d, float32x4_t *acc)
{
    switch (m->pair_bits) {
    case 4: MCA_VQ(4, "vq2/128/32"); break;
    case 5: MCA_VQ(5, "vq2.5/128/40"); break;
    case 6: MCA_VQ(6, "vq3/128/48"); break;
    case 7: MCA_VQ(7, "vq3.5/128/56"); break;
    default: MCA_VQ(8, "vq4/128/64"); break;
    }
}

#define MCA_NUQ(b, name)                                                                                             \
    do {                                                                                                             \
        const unsigned bits = (b);                                                                                   \
        nuq_neon_consts k;                                                                                           \
        nuq_neon_make_consts(bits, &k);                                                                              \
        __asm__ volatile("" : "+w"(k.levels), "+w"(k.shift[0]), "+w"(k.shift[1]), "+w"(k.spread), "+w"(k.sign[0]), \
                         "+w"(k.sign[1]));                                                                           \
        MCA_ROTATED(name, MCA_NUQ_WEIGHTS);                                                                          \
    } while (0)
#define MCA_NUQ_WEIGHTS(rows, w) nuq_neon_weights(rows, PMPD_ROTATED_NEON_ROWS, 0, bits, &k, w)

void mca_nuq(const pmpd_nuq_matrix *m, const int8_t *q, const float *d, float32x4_t *acc)
{
    switch (m->bits) {
    case 2: MCA_NUQ(2, "nuq2/128/32"); break;
    case 3: MCA_NUQ(3, "nuq3/128/48"); break;
    default: MCA_NUQ(4, "nuq4/128/64"); break;
    }
}

/* Columns 0..63 of a sequence whose bytes (with its first 16 after them)
 * are at bytes, h the hashes of its first 32 steps, as one iteration of
 * tcq_neon_sequence's loop runs them (consts: tcq_neon_consts_for(shift),
 * in registers but unknown to the compiler, as in the kernel; pairs:
 * tcq_neon_pairs' table; x, d: the token's activations and block
 * steps). */
/* The hashes and constants "made" at the region's start (an empty asm
 * that may change them), so that the compiler cannot start the lookups
 * (UMOV, UBFX) before the marker, which it otherwise does. */
#define MCA_TCQ_OPAQUE(h, k)                                                                                         \
    __asm__ volatile("" : "+w"(h[0]), "+w"(h[1]), "+w"(h[2]), "+w"(h[3]), "+w"(k.shuffle[0]), "+w"(k.shuffle[1]),  \
                     "+w"(k.shift[0]), "+w"(k.shift[1]))

#define MCA_TCQ(shift, name)                                                                                         \
    do {                                                                                                             \
        tcq_neon_consts k;                                                                                           \
        uint16x8_t current[4], next[4];                                                                              \
        int8x16_t v[4];                                                                                              \
        k = *consts;                                                                                                 \
        current[0] = h[0];                                                                                           \
        current[1] = h[1];                                                                                           \
        current[2] = h[2];                                                                                           \
        current[3] = h[3];                                                                                           \
        MCA_BEGIN(name);                                                                                             \
        MCA_TCQ_OPAQUE(current, k);                                                                                  \
        tcq_neon_hash32(bytes + 4 * (shift), shift, &k, next);                                                       \
        tcq_neon_lookup(current, pairs, v);                                                                          \
        tcq_neon_lookup(current + 2, pairs, v + 2);                                                                  \
        *acc = tcq_neon_two_blocks(v, x, d, *acc);                                                                   \
        MCA_END(name);                                                                                               \
        h[0] = next[0];                                                                                              \
        h[1] = next[1];                                                                                              \
        h[2] = next[2];                                                                                              \
        h[3] = next[3];                                                                                              \
    } while (0)

void mca_tcq(unsigned shift, const tcq_neon_consts *consts, const uint8_t *bytes, const uint16_t *pairs, uint16x8_t *h,
             const int8_t *x, const float *d, float32x4_t *acc)
{
    switch (shift) {
    case 3: MCA_TCQ(3, "tcq1.5/64/12"); break;
    case 4: MCA_TCQ(4, "tcq2/64/16"); break;
    case 6: MCA_TCQ(6, "tcq3/64/24"); break;
    default: MCA_TCQ(8, "tcq4/64/32"); break;
    }
}
