#include "pmpd_impl/weights/grouped/qmatmul.h"

PMPD_INTERNAL void pmpd_qmatmul(const pmpd_qmatrix *w, const pmpd_qact *act, size_t row_begin,
                                size_t row_end, float *y, size_t ldy)
{
#if PMPD_QMATMUL_AVX512
    if (act->n_tokens == 1)
        pmpd_qgemv_avx512(w, act, row_begin, row_end, y);
    else
        pmpd_qmatmul_avx2(w, act, row_begin, row_end, y, ldy);
#elif PMPD_USE_AVX2
    pmpd_qmatmul_avx2(w, act, row_begin, row_end, y, ldy);
#elif PMPD_QMATMUL_SMMLA
    if (act->n_tokens >= 2)
        pmpd_qgemm_smmla(w, act, row_begin, row_end, y, ldy);
    else
        pmpd_qmatmul_neon(w, act, row_begin, row_end, y, ldy);
#elif PMPD_QMATMUL_NEON
    pmpd_qmatmul_neon(w, act, row_begin, row_end, y, ldy);
#else
    pmpd_qmatmul_scalar(w, act, row_begin, row_end, y, ldy);
#endif
}
