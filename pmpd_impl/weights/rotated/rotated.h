/*
 * The rotated input shared by the formats that store Hadamard-rotated
 * rows (nuq/, vq/, tcq/): W_r = (W diag(s)) H^T, so y = W x = W_r x' with
 * x' = H (x o s), computed once per input and shared by every matrix with
 * the same input width and sign seed (q, k, v; gate, up).
 *
 * A format gives the four numbers below: its columns, the Hadamard size
 * (pmpd_hadamard_size(cols)), the rotated length it multiplies over
 * (padded >= rotation, a multiple of 32; x' is zero beyond the rotation)
 * and the seed of its signs.
 *
 * Signs: s[c] = -1 where bit c % 64 of the (c / 64 + 1)-th splitmix64
 * output from state seed is set (core/splitmix.h), for c < cols.
 *
 * The prepared input of n_tokens tokens (in the caller's scratch):
 *   int8  q[n_tokens][padded]       x' in blocks of 32: q = round(x' / d)
 *   float d[n_tokens][padded / 32]  d = the block's max |x'| / 127
 *   float sum[n_tokens]             the sum over blocks of d times the
 *                                   block's sum of q: x' summed as
 *                                   quantized, so that a kernel that biases
 *                                   its weights into unsigned bytes takes
 *                                   bias * sum off once per row
 * x' itself lives only in a per-thread buffer of padded floats while a
 * token is rotated.
 */
#ifndef PMPD_WEIGHTS_ROTATED_H
#define PMPD_WEIGHTS_ROTATED_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/core/error.h"
#include "pmpd_impl/model/model.h"

#define PMPD_ROTATED_BLOCK 32 /* rotated columns per int8 activation block */

typedef struct pmpd_rotated {
    size_t cols, rotation, padded;
    uint64_t seed;
} pmpd_rotated;

static inline pmpd_rotated pmpd_rotated_make(size_t cols, size_t rotation, size_t padded, uint64_t seed)
{
    pmpd_rotated r;
    r.cols = cols;
    r.rotation = rotation;
    r.padded = padded;
    r.seed = seed;
    return r;
}

/* Where the parts of a tensor of NUQ's and VQ's layout lie: a 64-byte
 * header, f32 scale[rows] padded with zeros to 64 bytes, then rows of
 * ceil(rotation / 32) index blocks of block_bytes each. */
typedef struct pmpd_rotated_layout {
    size_t rotation, padded, row_bytes, index_offset, total;
} pmpd_rotated_layout;

#define PMPD_ROTATED_HEADER_BYTES 64
#define PMPD_ROTATED_MAX_ROWS (UINT64_C(1) << 31)

/* The layout of rows x cols with block_bytes per 32 rotated columns, as
 * the encoders write it: rotation = pmpd_hadamard_size(cols) (shape
 * already checked: 0 < rows <= PMPD_ROTATED_MAX_ROWS, 0 < cols <=
 * PMPD_HADAMARD_MAX).  Errors: PMPD_ERR_OVERFLOW. */
PMPD_INTERNAL pmpd_status pmpd_rotated_compute_layout(uint64_t rows, uint64_t cols, size_t block_bytes,
                                                      pmpd_rotated_layout *out);

/* The same at a given rotation size: a stored tensor's, which an older
 * encoder may have chosen larger (pmpd_rotated_rotation_fits). */
PMPD_INTERNAL pmpd_status pmpd_rotated_layout_at(uint64_t rows, size_t rotation, size_t block_bytes,
                                                 pmpd_rotated_layout *out);

/* 1 when a stored tensor of cols columns may have rotation size rotation:
 * a size pmpd_hadamard transforms, at least cols and below 2 cols (the
 * next power of two always is).  Encoders choose pmpd_hadamard_size(cols);
 * files whose encoder knew fewer Hadamard orders (5632 columns rotated at
 * 6144 before order 44) still load and multiply as they were written. */
PMPD_INTERNAL int pmpd_rotated_rotation_fits(uint64_t cols, uint64_t rotation);

static inline size_t pmpd_rotated_act_bytes(const pmpd_rotated *r, size_t n_tokens)
{
    return n_tokens * r->padded + n_tokens * (r->padded / PMPD_ROTATED_BLOCK + 1) * sizeof(float);
}
static inline const int8_t *pmpd_rotated_act_q(const void *act)
{
    return (const int8_t *)act;
}
static inline const float *pmpd_rotated_act_d(const pmpd_rotated *r, const void *act, size_t n_tokens)
{
    return (const float *)(const void *)((const int8_t *)act + n_tokens * r->padded);
}
static inline const float *pmpd_rotated_act_sum(const pmpd_rotated *r, const void *act, size_t n_tokens)
{
    return pmpd_rotated_act_d(r, act, n_tokens) + n_tokens * (r->padded / PMPD_ROTATED_BLOCK);
}

/* Fills signs[0..words) with the sign bits of columns 64 w .. 64 w + 63. */
PMPD_INTERNAL void pmpd_rotated_signs(uint64_t seed, uint64_t *signs, size_t words);

/* x[c] = s[c] x[c] for c < cols: applies the signs (their own inverse). */
PMPD_INTERNAL void pmpd_rotated_flip(uint64_t seed, float *x, size_t cols);

/* v (padded floats) = H (s o w) for w of cols floats, zero beyond cols
 * before the transform and beyond rotation after: a token's x' before its
 * int8 blocks, and (offline) a weight row before it is quantized, row r of
 * W_r = (W diag(s)) H^T being H (s o w[r]). */
PMPD_INTERNAL void pmpd_rotated_rotate(const pmpd_rotated *r, const float *w, float *v);

/* Rotates and quantizes tokens [begin, end) of x (n_tokens rows of cols
 * floats) into act (pmpd_rotated_act_bytes for n_tokens), rotating in work
 * (padded floats; it keeps the last token's x').  The butterflies inside
 * are the compiled kernel. */
PMPD_INTERNAL void pmpd_rotated_prepare_tokens(const pmpd_rotated *r, const float *x, size_t begin, size_t end,
                                               size_t n_tokens, void *act, float *work);

/* out[c] += sum_{k < count} H[k0 + k][c] v[k] for c < cols, H the
 * normalized Hadamard matrix of size rotation: a stored row rotated back
 * one chunk of rotated columns at a time, when the row has no room for its
 * rotation (cols < rotation) and there is no heap; cols x count steps. */
PMPD_INTERNAL void pmpd_rotated_unrotate_add(const pmpd_rotated *r, const float *v, size_t k0, size_t count,
                                             float *out, size_t cols);

/* Rotated columns a padded row's inverse decodes per pass. */
#define PMPD_ROTATED_ROW_CHUNK 256

/* Writes count rotated entries of one stored row, from rotated column k0
 * (a multiple of PMPD_ROTATED_ROW_CHUNK), into v. */
typedef void (*pmpd_rotated_decode)(const void *context, size_t k0, size_t count, float *v);

/* A stored row rotated back: out (cols floats) = s o (H^T v), v the
 * rotated row (rotation entries) that decode gives.  With cols ==
 * rotation v is decoded into out and transformed in place; else it is
 * decoded PMPD_ROTATED_ROW_CHUNK entries at a time and summed through
 * pmpd_rotated_unrotate_add (the embedding lookup and tests only).
 * Every format's row lookup (nuq, vq, tcq). */
PMPD_INTERNAL void pmpd_rotated_row(const pmpd_rotated *r, pmpd_rotated_decode decode, const void *context,
                                    float *out);

/* The format table's two-step product (rotated_format.c): working memory
 * for up to n_tokens tokens and n_threads threads over padded rotated
 * columns (the prepared input, then per thread one rotated token in
 * floats; errors: PMPD_ERR_OVERFLOW), and the prepare step that fills it
 * for tokens [begin, end) on pool thread worker. */
PMPD_INTERNAL pmpd_status pmpd_rotated_scratch_bytes(size_t padded, size_t n_tokens, unsigned n_threads,
                                                     size_t *bytes);
PMPD_INTERNAL void pmpd_rotated_prepare_scratch(const pmpd_rotated *r, const float *x, size_t n_tokens,
                                                void *scratch, size_t begin, size_t end, unsigned worker);

/* The rotated input of a tensor's products, bound from its header (each
 * format's pmpd_X_rotated of its bound matrix). */
typedef pmpd_rotated (*pmpd_rotated_of)(const pmpd_tensor *w);

/* The table rows' share step (rotated_format.c): two tensors share a
 * prepared input when their input widths, rotation sizes and sign seeds
 * agree. */
PMPD_INTERNAL int pmpd_rotated_shares(const pmpd_tensor *a, const pmpd_tensor *b, pmpd_rotated_of rotated_of);

/* The table rows' check of a tensor entry's shape before its bytes:
 * n_dims must be 2 (PMPD_ERR_FORMAT_SHAPE, naming format and the
 * tensor). */
PMPD_INTERNAL pmpd_status pmpd_rotated_check_matrix(uint32_t n_dims, uint64_t offset, const char *format,
                                                    const char *name, uint32_t name_length, pmpd_error *err);

/* The checks of a stored tensor of NUQ's and VQ's layout whose bytes lie
 * at file offset base_offset, around the format's own check of its width
 * field (offset 16), messages naming format ("nuq"): first the header's
 * size, magic, version and shape against the tensor entry's; then, given
 * the status of the format's layout for that width and the layout (the
 * encoders', moved to the stored rotation size when that differs), the
 * shape's limits, the rotation field, the header's zero bytes, the
 * tensor's size, the scales and their padding. */
PMPD_INTERNAL pmpd_status pmpd_rotated_check_header(const unsigned char *p, uint64_t size, uint64_t rows,
                                                    uint64_t cols, const char *magic, uint32_t version,
                                                    uint64_t base_offset, const char *format, pmpd_error *err);
PMPD_INTERNAL pmpd_status pmpd_rotated_check_layout(const unsigned char *p, uint64_t size, uint64_t rows,
                                                    uint64_t cols, pmpd_status layout_status,
                                                    pmpd_rotated_layout *layout, uint64_t base_offset,
                                                    const char *format, pmpd_error *err);

/* The last check of a stored tensor of NUQ's and VQ's layout: every code
 * beyond the rotation (in the padding of a row's last block) is zero.
 * stray(row, layout, width) gives a row's first nonzero one as a byte
 * offset in the row, or -1.  Errors: PMPD_ERR_FORMAT_VALUE at that byte,
 * naming format and the row. */
typedef long (*pmpd_rotated_stray)(const uint8_t *row, const pmpd_rotated_layout *layout, unsigned width);
PMPD_INTERNAL pmpd_status pmpd_rotated_check_padding(const unsigned char *p, uint64_t rows,
                                                     const pmpd_rotated_layout *layout, pmpd_rotated_stray stray,
                                                     unsigned width, uint64_t base_offset, const char *format,
                                                     pmpd_error *err);

/* Checks rows f32 scales at p + at (finite: PMPD_ERR_FORMAT_NONFINITE;
 * >= 0: PMPD_ERR_FORMAT_VALUE) and zero bytes from their end up to end
 * (PMPD_ERR_FORMAT_VALUE), error offsets from base_offset, messages
 * naming format ("nuq", "vq", "tcq"). */
PMPD_INTERNAL pmpd_status pmpd_rotated_check_scales(const unsigned char *p, size_t rows, size_t at, size_t end,
                                                    uint64_t base_offset, const char *format, pmpd_error *err);

#endif
