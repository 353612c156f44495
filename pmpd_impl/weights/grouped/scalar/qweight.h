/* One weight of a q8 / q4 / q2cb block read the slow, obvious way: the
 * definition of the layouts in qformat.h as code.  The scalar reference
 * kernels and dequantization use it; SIMD kernels are tested against it. */
#ifndef PMPD_KERNELS_SCALAR_QWEIGHT_H
#define PMPD_KERNELS_SCALAR_QWEIGHT_H

#include <string.h>

#include "pmpd_impl/weights/grouped/qformat.h"
#include "pmpd_impl/model/f16.h"

/* Scale of row i (0..3) of a block. */
static inline float pmpd_qweight_scale(const unsigned char *block, size_t i)
{
    uint16_t h;
    memcpy(&h, block + 2 * i, sizeof h);
    return pmpd_f16_to_f32(h);
}

/* Integer value of weight k (0..31) of row i of a block: an int8 for q8, a
 * nibble in [-8, 7] for q4, a codebook level for q2cb. */
static inline int pmpd_qweight_int(const pmpd_qmatrix *w, const unsigned char *block, size_t i, size_t k)
{
    const unsigned char *body = block + 2 * PMPD_QROWS;
    switch (w->type) {
    case PMPD_TENSOR_Q8:
        return (int)(signed char)body[(k / 8) * 32 + i * 8 + k % 8];
    case PMPD_TENSOR_Q4: {
        size_t j = k % 16;
        unsigned byte = body[(j / 8) * 32 + i * 8 + j % 8];
        unsigned nibble = k < 16 ? byte & 0x0Fu : byte >> 4;
        return (int)(nibble ^ 8u) - 8;
    }
    default: {
        unsigned id = (body[i / 2] >> (4 * (i % 2))) & 0x0Fu;
        unsigned index = (body[2 + i * 8 + k % 8] >> (2 * (k / 8))) & 3u;
        return (int)(signed char)w->data[id * PMPD_Q2CB_LEVELS + index];
    }
    }
}

#endif
