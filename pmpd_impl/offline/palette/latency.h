/* What a weight format costs a group of matrices in time, for the
 * allocation under a latency budget (seed 002's --budget-latency): one
 * token's product with each matrix of the group, encoded in the format and
 * run through the format table's kernels on one thread -- the very code a
 * decode step runs on this machine.  Before each timed product a buffer
 * as large as the model's layers (at most 64 MiB) is written, so the
 * weights come from memory as they do when a decode step streams the whole
 * model; the median of five products is kept.  Shapes repeat from layer to
 * layer, so timings are kept per (rows, cols, format) in a table the
 * caller owns. */
#ifndef PMPD_OFFLINE_PALETTE_LATENCY_H
#define PMPD_OFFLINE_PALETTE_LATENCY_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/offline/format/builder.h"
#include "pmpd_impl/offline/palette/groups.h"

#if PMPD_OFFLINE

#define PMPD_PALETTE_MAX_TIMINGS 128u

typedef struct pmpd_palette_timing {
    uint64_t rows, cols, ns;
    uint32_t type;
    unsigned bits; /* nuq's width in bits, vq's and tcq's in quarter bits, 0 for the others */
} pmpd_palette_timing;

typedef struct pmpd_palette_timings {
    uint32_t n;
    size_t evict_bytes; /* written before each timed product */
    pmpd_palette_timing entries[PMPD_PALETTE_MAX_TIMINGS];
} pmpd_palette_timings;

/* An empty table whose eviction buffer matches b's layer matrices (their
 * f32 bytes / 4, about their size at 8 bits, capped at 64 MiB). */
PMPD_INTERNAL void pmpd_palette_timings_init(pmpd_palette_timings *timings, const pmpd_build_model *b);

/* *ns = nanoseconds of one token's products with group g's matrices as
 * type (options as for the encoders: nuq_bits, vq_quarter_bits, tcq_quarter_bits).  Errors: those of the
 * encoder, PMPD_ERR_INVALID_ARGUMENT (a type the palette cannot hold),
 * PMPD_ERR_OUT_OF_MEMORY, PMPD_ERR_THREAD. */
PMPD_INTERNAL pmpd_status pmpd_palette_group_latency(const pmpd_build_model *b, const pmpd_palette_group *g,
                                                     uint32_t type, const pmpd_convert_options *options,
                                                     pmpd_palette_timings *timings, uint64_t *ns);

#endif
#endif
