/*
 * The x86 GEMVs' software prefetch: a block's slices a fixed distance
 * ahead of the superblock being read, 4 lines of the 2-bit slice and 2
 * of each other plane (which advance half as fast, so half as far), so
 * the streams never wait.  Each kernel picks its distance (bytes ahead in
 * the 2-bit slice).
 */
#ifndef PMPD_WEIGHTS_ANYPREC_PREFETCH_X86_H
#define PMPD_WEIGHTS_ANYPREC_PREFETCH_X86_H

#include <immintrin.h>
#include <stddef.h>

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

#endif
