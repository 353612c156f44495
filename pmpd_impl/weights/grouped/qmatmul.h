/*
 * Quantized matrix products: Y[t][r] = sum_c W[r][c] * X[t][c] for a q8,
 * q4 or q2cb weight matrix W (qformat.h) and int8-quantized activations X
 * (qact.h), over the output rows [row_begin, row_end) so callers can split
 * the rows over threads.  One token is the decode GEMV, several the
 * prefill GEMM.
 *
 * Row ranges: row_begin is a multiple of 4 (a row block); row_end is a
 * multiple of 4 or w->rows.  act->n_groups equals ceil(w->cols / 32).
 * Output: y[t * ldy + r] for t < act->n_tokens and r in the range; nothing
 * else is written (padding rows and the padding token are computed and
 * dropped).
 *
 * pmpd_qmatmul runs the best kernel compiled in, chosen at compile time:
 *   x86-64 AVX-512           x86_avx512/qmatmul.c for one token (GEMV),
 *                            x86_avx2/qmatmul.c for 2+ tokens
 *   x86-64 AVX2              x86_avx2/qmatmul.c (GEMV and GEMM)
 *   AArch64 NEON + i8mm      arm_neon/qgemm_smmla.c for 2+ tokens (SMMLA)
 *   AArch64 NEON + dotprod   arm_neon/qmatmul.c, SDOT step (GEMV, GEMM)
 *   AArch64 NEON (Armv8.0)   arm_neon/qmatmul.c, SMULL step (GEMV, GEMM)
 *   otherwise                scalar/qmatmul.c, always compiled: the oracle
 *                            (also on 32-bit Arm).
 * The SIMD kernels differ from the scalar one only in the order in which
 * the per-group float terms are added; every integer dot product is exact.
 */
#ifndef PMPD_KERNELS_QMATMUL_H
#define PMPD_KERNELS_QMATMUL_H

#include "pmpd_impl/weights/grouped/qact.h"
#include "pmpd_impl/weights/grouped/qformat.h"

/* The NEON kernels need AArch64 (TBL over 4 registers, pairwise adds). */
#if PMPD_USE_NEON && defined(__aarch64__)
#define PMPD_QMATMUL_NEON 1
#else
#define PMPD_QMATMUL_NEON 0
#endif
#define PMPD_QMATMUL_SMMLA (PMPD_QMATMUL_NEON && PMPD_USE_I8MM)
#define PMPD_QMATMUL_AVX512 (PMPD_USE_AVX2 && PMPD_USE_AVX512)

/* GEMM kernels take the tokens in blocks of this many, each block passing
 * over all the row blocks: 64 tokens of activations (256 KiB at K = 4096)
 * stay in L2 instead of streaming from the last-level cache for every row
 * block.  A multiple of every kernel's token tile. */
#define PMPD_QMATMUL_TOKEN_BLOCK 64

PMPD_INTERNAL void pmpd_qmatmul(const pmpd_qmatrix *w, const pmpd_qact *act, size_t row_begin,
                                size_t row_end, float *y, size_t ldy);

PMPD_INTERNAL void pmpd_qmatmul_scalar(const pmpd_qmatrix *w, const pmpd_qact *act, size_t row_begin,
                                       size_t row_end, float *y, size_t ldy);

#if PMPD_USE_AVX2
PMPD_INTERNAL void pmpd_qmatmul_avx2(const pmpd_qmatrix *w, const pmpd_qact *act, size_t row_begin,
                                     size_t row_end, float *y, size_t ldy);
#endif
#if PMPD_QMATMUL_AVX512
/* act->n_tokens must be 1; writes y[r] for r in the range. */
PMPD_INTERNAL void pmpd_qgemv_avx512(const pmpd_qmatrix *w, const pmpd_qact *act, size_t row_begin,
                                     size_t row_end, float *y);
#endif
#if PMPD_QMATMUL_NEON
PMPD_INTERNAL void pmpd_qmatmul_neon(const pmpd_qmatrix *w, const pmpd_qact *act, size_t row_begin,
                                     size_t row_end, float *y, size_t ldy);
#endif
#if PMPD_QMATMUL_SMMLA
PMPD_INTERNAL void pmpd_qgemm_smmla(const pmpd_qmatrix *w, const pmpd_qact *act, size_t row_begin,
                                    size_t row_end, float *y, size_t ldy);
#endif

/* Writes the valid rows of one row block's 4 results for token t. */
static inline void pmpd_qmatmul_store(float *y, size_t ldy, size_t t, size_t first_row, size_t row_end,
                                      const float result[4])
{
    size_t i;
    for (i = 0; i < 4 && first_row + i < row_end; i++)
        y[t * ldy + first_row + i] = result[i];
}

#endif
