/*
 * The x86 kernels' last step for a block of 4 rows and one token:
 * y = sum * scale + activation sum * offset (pmpd_anyprec_store_block's
 * arithmetic, rounded alike), the 4 sums arriving in a vector.  A block
 * inside the range stays in registers: a 16-byte stack copy read back a
 * float at a time stalled each of those loads on the vector store (store
 * forwarding), a tenth of the AVX-512 GEMV's time on 384-column rows
 * (perf, Zen5).  Only the blocks at a thread's range edges take the scalar
 * path.
 */
#ifndef PMPD_WEIGHTS_ANYPREC_STORE_X86_H
#define PMPD_WEIGHTS_ANYPREC_STORE_X86_H

#include <immintrin.h>

#include "pmpd_impl/weights/anyprec/anyprec.h"

static inline void pmpd_anyprec_store_block_x86(const pmpd_anyprec_matrix *m, unsigned bits, float xsum,
                                                __m128 sums, float *y, uint32_t r0, uint32_t row_begin,
                                                uint32_t row_end)
{
    if (r0 >= row_begin && r0 + PMPD_ANYPREC_ROW_BLOCK <= row_end) {
        const __m128 scaled = _mm_mul_ps(sums, _mm_loadu_ps(m->scales[bits] + r0));
        const __m128 offset = _mm_mul_ps(_mm_set1_ps(xsum), _mm_loadu_ps(m->offsets[bits] + r0));
        _mm_storeu_ps(y + r0, _mm_add_ps(scaled, offset));
    } else {
        float lanes[PMPD_ANYPREC_ROW_BLOCK];
        _mm_storeu_ps(lanes, sums);
        pmpd_anyprec_store_block(m, bits, xsum, lanes, y, r0, row_begin, row_end);
    }
}

#endif
