/*
 * What the AVX2 and AVX-512 GEMVs share besides the last step
 * (anyprec_store_x86.h): the software prefetch of a block's slices, a
 * padding row's table entries, and a shared superblock's activations.
 */
#ifndef PMPD_WEIGHTS_ANYPREC_X86_H
#define PMPD_WEIGHTS_ANYPREC_X86_H

#include <immintrin.h>
#include <stddef.h>

#include "pmpd_impl/weights/anyprec/anyprec.h"

/* A block's slices a fixed distance ahead of the superblock being read:
 * 4 lines of the 2-bit slice and 2 of each other plane (which advance half
 * as fast, so half as far), so the streams never wait.  Each kernel picks
 * its distance (bytes ahead in the 2-bit slice). */
static inline void pmpd_anyprec_prefetch_x86(const unsigned char *field, const unsigned char *const *plane,
                                             unsigned bits, size_t distance)
{
    unsigned i, p;
    for (i = 0; i < 4; i++)
        _mm_prefetch((const char *)field + distance + 64 * i, _MM_HINT_T0);
    for (p = 2; p < bits; p++) {
        _mm_prefetch((const char *)plane[p] + distance / 2, _MM_HINT_T0);
        _mm_prefetch((const char *)plane[p] + distance / 2 + 64, _MM_HINT_T0);
    }
}

/* Row r's 2^bits table entries as the low bytes of a 16-byte vector, zero
 * past them and for a block's padding rows past the last row (through a
 * stack copy: only for blocks that are not whole, the others load their
 * entries straight from the matrix). */
static inline __m128i pmpd_anyprec_entries_x86(const pmpd_anyprec_matrix *m, unsigned bits, uint32_t r)
{
    unsigned char entries[16];
    pmpd_anyprec_row_entries(m, bits, r, entries);
    return _mm_loadu_si128((const __m128i *)(const void *)entries);
}

/* The tail activations once in each member's slots of a shared partial
 * superblock (tail_shift 1 or 2, span = 32 >> tail_shift columns a group):
 * slot 32 g + j holds tail column span g + j % span, so one pass over the
 * shared codes meets every member's activations.  Shifts and masks, not
 * divisions: once per call, on the GEMV's path. */
static inline void pmpd_anyprec_dup_tail_x86(const pmpd_anyprec_matrix *m, const pmpd_anyprec_units *u, int8_t *xdup)
{
    const unsigned span_mask = (1u << (5 - m->tail_shift)) - 1;
    unsigned k;
    for (k = 0; k < PMPD_ANYPREC_SUPER; k++)
        xdup[k] = u->tail[(k & ~(PMPD_ANYPREC_GROUP - 1u)) | (k & span_mask)];
}

#endif
