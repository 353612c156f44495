/* The scalar reference of every quantized product, written straight from
 * the layout definitions (scalar/qweight.h) for clarity, not speed: the
 * oracle the SIMD kernels are tested against, and the fallback on targets
 * without them. */
#include "pmpd_impl/weights/grouped/qmatmul.h"

#include "pmpd_impl/weights/grouped/scalar/qweight.h"

PMPD_INTERNAL void pmpd_qmatmul_scalar(const pmpd_qmatrix *w, const pmpd_qact *act, size_t row_begin,
                                       size_t row_end, float *y, size_t ldy)
{
    size_t t, r, g, k;
    for (t = 0; t < act->n_tokens; t++) {
        for (r = row_begin; r < row_end; r++) {
            float acc = 0.0f;
            for (g = 0; g < act->n_groups; g++) {
                const unsigned char *block = pmpd_qformat_block(w, r / PMPD_QROWS, g);
                int32_t dot = 0;
                for (k = 0; k < PMPD_QGROUP; k++)
                    dot += pmpd_qweight_int(w, block, r % PMPD_QROWS, k) *
                           pmpd_qact_chunk(act, t, g * 4 + k / 8)[k % 8];
                acc += (float)dot * (pmpd_qweight_scale(block, r % PMPD_QROWS) *
                                     act->scale[t * act->n_groups + g]);
            }
            y[t * ldy + r] = acc;
        }
    }
}
