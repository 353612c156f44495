/* The trellis search behind TCQ's encoder (tcq_build.h), generic in the
 * window L, the shift s and the steps n so that tests can compare it with
 * exhaustive search on small trellises.
 *
 * A path is a state sequence S_0 .. S_(n-1) of L-bit windows over a
 * bitstream, S_(i+1) = (S_i << s | s new bits) mod 2^L (weights/tcq/tcq.h);
 * step i's values are (first[S_i], second[S_i]), its distortion
 * weight[2i] (first - target[2i])^2 + weight[2i+1] (second - target[2i+1])^2.
 * Per step the search keeps one cost per state and, for each (L - s)-bit
 * overlap o, the best of the 2^s states S = d << (L - s) | o that lead to
 * the states o << s | new: O(2^L) per step. */
#ifndef PMPD_OFFLINE_TCQ_VITERBI_H
#define PMPD_OFFLINE_TCQ_VITERBI_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"

#if PMPD_OFFLINE

typedef struct pmpd_tcq_trellis {
    unsigned state_bits;              /* L, 2..16 */
    unsigned shift;                   /* s, 1..8 and < L */
    unsigned steps;                   /* n, with n s >= L */
    const float *first, *second;      /* [2^L]: each state's two values */
} pmpd_tcq_trellis;

typedef enum pmpd_tcq_ends {
    PMPD_TCQ_OPEN,              /* a bitstream of L + (n - 1) s bits: free ends */
    PMPD_TCQ_TAIL_BITING,       /* circular n s bits, QTIP's two passes: the best
                                   free path over the sequence rotated by half
                                   fixes the overlap at the wrap, then the best path
                                   with that overlap (not always the optimum) */
    PMPD_TCQ_TAIL_BITING_EXACT  /* circular, the best over every overlap: 2^(L-s)
                                   searches, for tests on small trellises */
} pmpd_tcq_ends;

/* Working memory of one search (one per thread). */
typedef struct pmpd_tcq_search {
    float *cost, *best, *target, *weight; /* weight: 4n (and rotated) */
    uint8_t *back;  /* [n][2^(L-s)]: the dropped bits of each overlap's best */
    uint32_t *path; /* [n] */
    int32_t *from;  /* [2^(L-s)]: the step's back pointers while they are found */
} pmpd_tcq_search;

/* Errors: PMPD_ERR_INVALID_ARGUMENT (sizes outside the ranges above),
 * PMPD_ERR_OUT_OF_MEMORY. */
PMPD_INTERNAL pmpd_status pmpd_tcq_search_init(pmpd_tcq_search *search, const pmpd_tcq_trellis *trellis);
PMPD_INTERNAL void pmpd_tcq_search_free(pmpd_tcq_search *search);

/* The path of least distortion for target (2n values; weight 2n values
 * >= 0, or NULL for ones) into states (n), returning its distortion. */
PMPD_INTERNAL double pmpd_tcq_viterbi(const pmpd_tcq_trellis *trellis, pmpd_tcq_search *search,
                                      const float *target, const float *weight, pmpd_tcq_ends ends,
                                      uint32_t *states);

/* The bitstream of a path of count states (MSB first, as tcq.h): bits
 * [0, L) from states[0], then s per state, up to n_bits (the rest of out,
 * (n_bits + 7) / 8 bytes, zero). */
PMPD_INTERNAL void pmpd_tcq_path_bits(unsigned state_bits, unsigned shift, const uint32_t *states, size_t count,
                                      size_t n_bits, uint8_t *out);

#endif /* PMPD_OFFLINE */

#endif
