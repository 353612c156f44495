/*
 * The decode GEMVs' walk over row blocks (one token; x86_avx2/qmatmul.c,
 * x86_avx512/qmatmul.c): the range's row blocks are cut into
 * PMPD_QWALK_STREAMS quarters and tile i computes row block i of every
 * quarter side by side, so the weights stream from RAM as four long
 * sequential streams (what the hardware prefetchers keep busy enough to
 * reach the bandwidth; one stream of a kernel this slow does not) and the
 * four row blocks give independent chains.  A stream past the last row
 * block has nothing to compute in that tile: the kernels repeat a block
 * there and store nothing.
 */
#ifndef PMPD_KERNELS_QWALK_H
#define PMPD_KERNELS_QWALK_H

#include <stddef.h>

#include "pmpd_impl/weights/grouped/qformat.h"

#define PMPD_QWALK_STREAMS 4

typedef struct pmpd_qwalk {
    size_t rb0, rb_end, tiles;
} pmpd_qwalk;

/* The walk over the row blocks of rows [row_begin, row_end). */
static inline pmpd_qwalk pmpd_qwalk_of(size_t row_begin, size_t row_end)
{
    pmpd_qwalk q;
    q.rb0 = row_begin / PMPD_QROWS;
    q.rb_end = (row_end + PMPD_QROWS - 1) / PMPD_QROWS;
    q.tiles = (q.rb_end - q.rb0 + PMPD_QWALK_STREAMS - 1) / PMPD_QWALK_STREAMS;
    return q;
}

/* The row block stream j computes in tile i: none (and nothing stored)
 * when it is rb_end or more. */
static inline size_t pmpd_qwalk_block(const pmpd_qwalk *q, size_t i, size_t j)
{
    return q->rb0 + i + j * q->tiles;
}

#endif
