/* Compile-time choice of the any-precision kernels.  SIMD kernels cover the
 * widths PMPD runs at (2..4 bits: tables of at most 16 entries, one register
 * lookup) of tensors with a paired 2-bit slice (seed >= 2), and rows short
 * enough for their stack-held superblock scales; everything else takes the
 * reference path. */
#include "pmpd_impl/weights/anyprec/anyprec.h"

#define ANYPREC_DISPATCH_SIMD_MAX_BITS 4

static int anyprec_dispatch_simd(const pmpd_anyprec_matrix *m, unsigned bits)
{
    return m->paired && bits >= 2 && bits <= ANYPREC_DISPATCH_SIMD_MAX_BITS &&
           m->cols <= PMPD_ANYPREC_SIMD_MAX_COLS;
}

PMPD_INTERNAL void pmpd_anyprec_gemv(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                     const float *xscale, float *y, uint32_t row_begin, uint32_t row_end)
{
#if PMPD_USE_AVX512
    if (anyprec_dispatch_simd(m, bits)) {
        pmpd_anyprec_gemv_avx512(m, bits, xq, xscale, y, row_begin, row_end);
        return;
    }
#elif PMPD_USE_AVX2
    if (anyprec_dispatch_simd(m, bits)) {
        pmpd_anyprec_gemv_avx2(m, bits, xq, xscale, y, row_begin, row_end);
        return;
    }
#elif PMPD_ANYPREC_USE_NEON
    if (anyprec_dispatch_simd(m, bits)) {
        pmpd_anyprec_gemv_neon(m, bits, xq, xscale, y, row_begin, row_end);
        return;
    }
#else
    (void)anyprec_dispatch_simd;
#endif
    pmpd_anyprec_gemv_scalar(m, bits, xq, xscale, y, row_begin, row_end);
}

/* The SIMD GEMMs run the tokens in chunks whose activations stay in L2
 * while every row block reads them (512 tokens of 5,632 columns, read once
 * per row block, ran at 0.33x q4 on 16 Xeon threads); a small Arm core's L2
 * holds half. */
#if PMPD_ANYPREC_USE_NEON
#define ANYPREC_DISPATCH_CHUNK_BYTES (128u << 10)
#else
#define ANYPREC_DISPATCH_CHUNK_BYTES (256u << 10)
#endif

static void anyprec_dispatch_gemm_chunk(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                        const float *xscale, const float *xsum, size_t n, float *y, size_t y_stride,
                                        uint32_t row_begin, uint32_t row_end)
{
    size_t stride = pmpd_anyprec_token_stride(m->cols), t;
#if PMPD_USE_AVX2
    if (anyprec_dispatch_simd(m, bits)) {
        pmpd_anyprec_gemm_avx2(m, bits, xq, xscale, xsum, n, y, y_stride, row_begin, row_end);
        return;
    }
#elif PMPD_ANYPREC_USE_NEON
    if (anyprec_dispatch_simd(m, bits)) {
        pmpd_anyprec_gemm_neon(m, bits, xq, xscale, xsum, n, y, y_stride, row_begin, row_end);
        return;
    }
#endif
    (void)xsum;
    for (t = 0; t < n; t++)
        pmpd_anyprec_gemv(m, bits, xq + t * stride, xscale + t * (stride / PMPD_ANYPREC_GROUP), y + t * y_stride,
                          row_begin, row_end);
}

PMPD_INTERNAL void pmpd_anyprec_gemm(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                     const float *xscale, const float *xsum, size_t n, float *y, size_t y_stride,
                                     uint32_t row_begin, uint32_t row_end)
{
    size_t stride = pmpd_anyprec_token_stride(m->cols), chunk = ANYPREC_DISPATCH_CHUNK_BYTES / stride, t0;
    chunk = chunk > 32 ? chunk / 32 * 32 : 32;
    for (t0 = 0; t0 < n; t0 += chunk)
        anyprec_dispatch_gemm_chunk(m, bits, xq + t0 * stride, xscale + t0 * (stride / PMPD_ANYPREC_GROUP), xsum + t0,
                                    n - t0 < chunk ? n - t0 : chunk, y + t0 * y_stride, y_stride, row_begin, row_end);
}

#undef ANYPREC_DISPATCH_SIMD_MAX_BITS
#undef ANYPREC_DISPATCH_CHUNK_BYTES
