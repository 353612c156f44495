/*
 * The byte layouts of the group-quantized weight types q8, q4 and q2cb.
 *
 * All three cut each row into groups of 32 weights (the last one padded
 * with zeros) and interleave 4 consecutive output rows ("a row block"), so
 * one vector of weights holds 8 consecutive weights of each of 2 or 4 rows:
 * SDOT and AVX2 then keep one accumulator lane per row (no horizontal sum
 * inside the loop) and SMMLA reads a 2-row by 8-column operand in a single
 * load.  Rows are padded up to a multiple of 4 with zero blocks.
 *
 * A tensor is [header][block (row block 0, group 0)][block (0, 1)]...: the
 * blocks of a row block follow each other along K, then the next row block.
 * Every block starts with the 4 rows' f16 scales ("scales first").
 *
 *   q8    block = 136 bytes: f16 scale[4]; then for chunk c = 0..3 and row
 *         i = 0..3, the int8 weights 8c..8c+7 of row i.
 *         w = scale * int8, int8 in [-127, 127].
 *   q4    block = 72 bytes: f16 scale[4]; then for chunk c = 0..1 and row
 *         i = 0..3, packed bytes 8c..8c+7 of row i, where packed byte j
 *         holds weight j in its low nibble and weight j+16 in its high one,
 *         each a two's-complement nibble q in [-8, 7] (llama.cpp's biased
 *         q+8 nibbles XOR 0x88), so (int8)(byte << 4) and (int8)(byte & 0xF0)
 *         are 16q: unpacking is one shift or one mask, the 16 goes in the
 *         float scale.  w = scale * q.
 *   q2cb  header = 64 bytes: 16 codebooks of 4 int8 levels in [-64, 64].
 *         block = 42 bytes: f16 scale[4]; 2 bytes of codebook ids (row i's
 *         id in nibble i, low nibble first); then for row i = 0..3 the 8
 *         index bytes of row i, where bits 2s..2s+1 of byte j are the 2-bit
 *         index of weight 8s+j: shifting by 2s yields 8 consecutive weights.
 *         w = scale * codebook[id][index].  Levels stay within +-64 so that
 *         AVX2's unsigned-by-signed byte multiply (levels biased by +64)
 *         cannot saturate.
 *
 * Scales are little-endian binary16; a block of padding rows has scale 0.
 */
#ifndef PMPD_KERNELS_QFORMAT_H
#define PMPD_KERNELS_QFORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"

#define PMPD_QGROUP 32       /* weights per group */
#define PMPD_QROWS 4         /* rows interleaved in one block */
#define PMPD_Q8_BLOCK_BYTES 136
#define PMPD_Q4_BLOCK_BYTES 72
#define PMPD_Q2CB_BLOCK_BYTES 42
#define PMPD_Q2CB_CODEBOOKS 16
#define PMPD_Q2CB_LEVELS 4
#define PMPD_Q2CB_LEVEL_LIMIT 64
#define PMPD_Q2CB_HEADER_BYTES (PMPD_Q2CB_CODEBOOKS * PMPD_Q2CB_LEVELS)

/* A quantized weight matrix as the kernels see it. */
typedef struct pmpd_qmatrix {
    uint32_t type;             /* PMPD_TENSOR_Q8, _Q4 or _Q2CB */
    const unsigned char *data; /* the whole tensor, header included */
    size_t rows, cols;
} pmpd_qmatrix;

/* 1 for the types described here. */
PMPD_INTERNAL int pmpd_qformat_is_quantized(uint32_t type);

/* Bytes of one block, of the tensor header (0 unless q2cb).  type must be
 * one of the quantized types.  Inline: the kernels call them per block. */
static inline size_t pmpd_qformat_block_bytes(uint32_t type)
{
    return type == PMPD_TENSOR_Q8 ? PMPD_Q8_BLOCK_BYTES
           : type == PMPD_TENSOR_Q4 ? PMPD_Q4_BLOCK_BYTES
                                   : PMPD_Q2CB_BLOCK_BYTES;
}

static inline size_t pmpd_qformat_header_bytes(uint32_t type)
{
    return type == PMPD_TENSOR_Q2CB ? PMPD_Q2CB_HEADER_BYTES : 0;
}

/* Bytes of a rows x cols tensor.  Errors: PMPD_ERR_FORMAT_VALUE (not a
 * quantized type), PMPD_ERR_FORMAT_SHAPE (a zero dimension or a size that
 * overflows 64 bits). */
PMPD_INTERNAL pmpd_status pmpd_qformat_tensor_bytes(uint32_t type, uint64_t rows, uint64_t cols,
                                                    uint64_t *bytes);

/* Checks what the tensor size cannot: every q2cb codebook level lies in
 * [-64, 64] (other types have nothing to check).  data holds the whole
 * tensor, already known to have pmpd_qformat_tensor_bytes bytes.  Returns
 * PMPD_OK or PMPD_ERR_FORMAT_VALUE with *bad_byte set to the offending
 * byte's offset in the tensor. */
PMPD_INTERNAL pmpd_status pmpd_qformat_validate(uint32_t type, const unsigned char *data, uint64_t *bad_byte);

/* Groups per row: ceil(cols / 32). */
static inline size_t pmpd_qformat_groups(size_t cols)
{
    return (cols + PMPD_QGROUP - 1) / PMPD_QGROUP;
}

/* The block holding rows 4*row_block..+3, group g. */
static inline const unsigned char *pmpd_qformat_block(const pmpd_qmatrix *w, size_t row_block, size_t g)
{
    size_t n_groups = pmpd_qformat_groups(w->cols);
    return w->data + pmpd_qformat_header_bytes(w->type) +
           (row_block * n_groups + g) * pmpd_qformat_block_bytes(w->type);
}

/* Row r of the matrix dequantized into out[0..cols). */
PMPD_INTERNAL void pmpd_qformat_dequantize_row(const pmpd_qmatrix *w, size_t r, float *out);

/* The q2cb codebook levels (plus bias, for kernels that want them
 * unsigned) of every pair of codebook ids as a block's id byte holds them
 * (even row's id in the low nibble): entry i is the 4 levels of codebook
 * i & 15, then the 4 of codebook i >> 4.  A kernel builds this table once
 * per call and fetches a block's 16-byte table of its 4 rows' codebooks
 * with two 8-byte loads. */
PMPD_INTERNAL void pmpd_q2cb_codebook_pairs(const pmpd_qmatrix *w, int bias, uint64_t pairs[256]);

#endif
