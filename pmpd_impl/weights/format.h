/*
 * Weight formats: the one table that says, for each tensor type, how many
 * bytes a tensor occupies, what its stored bytes must satisfy, and which
 * kernels multiply with it.  Everything else (the loader, the linear
 * layers of the forward pass, the weight-bytes figure, tool names) asks
 * this table instead of switching on the type, so a new format is a
 * folder under pmpd_impl/weights/ (its layout, scalar oracle and ISA
 * kernels) plus one row in format.c; its offline encoder is one row in
 * pmpd_impl/offline/weights/encoders.c.
 *
 * Folders: float/ (f32, f16), grouped/ (q8, q4, q2cb: 32-weight groups in
 * 4-row blocks, one kernel family), anyprec/ (nested any-precision),
 * w8a8/ (int8 rows with a static per-tensor activation scale), nuq/
 * (Lloyd-Max indices of Hadamard-rotated rows, 2-4 bits), vq/ (2-D codebook
 * indices of pairs of rotated columns, 2-4 bits in half-bit steps), tcq/
 * (trellis-coded Hadamard-rotated rows, 1.5-4 bits); rotated/ holds what
 * the three rotated formats share (the input rotation, its int8 blocks,
 * the row inverse, scale checks, the SIMD dot step).
 */
#ifndef PMPD_WEIGHTS_FORMAT_H
#define PMPD_WEIGHTS_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/core/error.h"
#include "pmpd_impl/exec/pool.h"
#include "pmpd_impl/model/model.h"

typedef struct pmpd_weight_format {
    pmpd_tensor_type type;
    const char *name; /* short and lower-case, as tools spell it ("q4") */

    /* Bytes of a tensor of this shape (n_dims >= 1, every dimension >= 1),
     * for formats whose size follows from the shape.  Errors:
     * PMPD_ERR_FORMAT_SHAPE (a shape the format cannot hold, e.g. not a
     * matrix, or a size that overflows 64 bits).  NULL for self-describing
     * formats, whose size is whatever the tensor entry says and which
     * check() then verifies. */
    pmpd_status (*tensor_bytes)(uint32_t n_dims, const uint64_t *dims, uint64_t *bytes);

    /* Checks what the size cannot: the stored bytes data[0..size), which
     * lie at file offset `offset` (error offsets are file offsets).  The
     * message names the tensor (name, name_length).  NULL: nothing to
     * check. */
    pmpd_status (*check)(const unsigned char *data, uint64_t size, uint32_t n_dims, const uint64_t *dims,
                         uint64_t offset, const char *name, uint32_t name_length, pmpd_error *err);

    /* Working memory of linear() for w at up to n_tokens tokens with up to
     * n_threads threads (see model/linear.h), from w's shape and, for the
     * rotated formats, its header (w->data, accepted by check: the stored
     * rotation size).  NULL: none. */
    pmpd_status (*scratch_bytes)(const pmpd_tensor *w, size_t n_tokens, unsigned n_threads, size_t *bytes);

    /* Y = X W^T over n_tokens tokens, split over the pool (see
     * model/linear.h); bits is the width nested weights are read at.
     * NULL for formats that give prepare and rows (below) instead. */
    void (*linear)(const pmpd_tensor *w, const float *x, size_t n_tokens, float *y, void *scratch,
                   pmpd_pool *pool, unsigned bits);

    /* Row r of W as floats (the embedding lookup; nested weights at their
     * widest). */
    void (*row)(const pmpd_tensor *w, size_t r, float *out);

    /* Bytes one product with w reads at width bits.  NULL: the whole
     * tensor (w->size). */
    uint64_t (*bytes_read)(const pmpd_tensor *w, unsigned bits);

    /* The product in two steps, so that matrices reading one input (q, k
     * and v; gate and up) convert it once and share one pool job
     * (model/linear.c): prepare converts tokens [begin, end) of x (n_tokens
     * rows of cols floats; begin even: some formats pack token pairs) into
     * scratch, on the calling thread, using the working memory of pool
     * thread `worker` (scratch was planned for n_threads threads); the
     * caller splits the tokens over threads.  rows computes y[t * rows + r] for
     * r in [begin, end) (begin a multiple of 4) from what prepare made, on
     * one thread, reading nested weights at width bits (as linear).  shares
     * says whether b can use what prepare made for a.  NULL for formats
     * that give linear. */
    void (*prepare)(const pmpd_tensor *w, const float *x, size_t n_tokens, void *scratch, size_t begin, size_t end,
                    unsigned worker);
    void (*rows)(const pmpd_tensor *w, const void *scratch, const float *x, size_t n_tokens, float *y, size_t begin,
                 size_t end, unsigned bits);
    int (*shares)(const pmpd_tensor *a, const pmpd_tensor *b);
} pmpd_weight_format;

/* The row of a type, or NULL for a type this build does not know. */
PMPD_INTERNAL const pmpd_weight_format *pmpd_weight_format_of(uint32_t type);

/* The row whose name is name, or NULL. */
PMPD_INTERNAL const pmpd_weight_format *pmpd_weight_format_named(const char *name);

/* Bytes of a tensor whose size follows from type and shape.  Errors:
 * PMPD_ERR_FORMAT_VALUE (unknown or self-describing type),
 * PMPD_ERR_FORMAT_SHAPE (a shape the type cannot hold or that overflows). */
PMPD_INTERNAL pmpd_status pmpd_weight_tensor_bytes(uint32_t type, uint32_t n_dims, const uint64_t *dims,
                                                   uint64_t *bytes);

/* The rows, each defined in its folder and listed in format.c's table
 * (functions rather than exported objects: in the amalgamation every
 * internal symbol becomes static). */
PMPD_INTERNAL const pmpd_weight_format *pmpd_weights_f32(void);
PMPD_INTERNAL const pmpd_weight_format *pmpd_weights_f16(void);
PMPD_INTERNAL const pmpd_weight_format *pmpd_weights_q8(void);
PMPD_INTERNAL const pmpd_weight_format *pmpd_weights_q4(void);
PMPD_INTERNAL const pmpd_weight_format *pmpd_weights_q2cb(void);
PMPD_INTERNAL const pmpd_weight_format *pmpd_weights_anyprec(void);
PMPD_INTERNAL const pmpd_weight_format *pmpd_weights_w8a8(void);
PMPD_INTERNAL const pmpd_weight_format *pmpd_weights_nuq(void);
PMPD_INTERNAL const pmpd_weight_format *pmpd_weights_vq2(void);
PMPD_INTERNAL const pmpd_weight_format *pmpd_weights_tcq(void);

#endif
