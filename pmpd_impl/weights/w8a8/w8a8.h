/*
 * W8A8: int8 weights with one scale per output row, multiplied with int8
 * activations that share ONE static scale per tensor, calibrated offline
 * (seed 004's integer lane).  With no per-group scale the whole dot
 * product of a row with a token is a single integer sum: the inner loop is
 * integer multiply-adds only, and floats appear once per output.
 *
 * Layout (version 1), every part starting on a 64-byte boundary:
 *   64-byte header: "W8A8", u32 version 1, u32 rows, u32 cols,
 *     u32 padded_cols (cols rounded up to 64), f32 activation scale
 *     (finite, > 0), u32 n_hot (0..cols), then zeros
 *   f32 row_scale[padded_rows]  (padded_rows = rows rounded up to 4;
 *     finite, >= 0; 0 for the padding rows)
 *   u32 hot[n_hot]: the shadow path's input channels, strictly increasing,
 *     each < cols
 *   f32 hot_weights[n_hot][rows]: the float weights of those columns
 *     (finite), one hot channel after another
 *   int8 weights[padded_rows][padded_cols], row-major, zero beyond cols
 *     and in the padding rows
 *
 * W[r][c] = row_scale[r] * weights[r][c].  An activation x becomes
 * q = clamp(round(x / activation_scale), -127, 127), so
 *     Y[t][r] = activation_scale * row_scale[r] * sum_c weights[r][c] q[t][c]
 *             + sum over hot channels h of (x[t][h] - activation_scale *
 *               q[t][h]) * hot_weights[h][r].
 * The second line is seed 004's shadow path: a channel whose inputs are
 * rare, huge outliers would force a scale that rounds every other channel
 * to nothing, so the scale is set for the ordinary channels, the outlier
 * channels saturate in the integer product, and what saturation clipped
 * is added back in float with the column's float weights (a few columns,
 * only for the tokens that clip).  Inputs of other channels beyond 127
 * steps saturate.  The integer sums are exact (no int32 overflow, below),
 * so no output needs recomputing.  The activation scale and the hot
 * channels come from the tensor's calibrated input range
 * (pmpd_impl/offline/w8a8/).
 *
 * Plain rows keep one layout for every ISA: each kernel reads 4 rows at a
 * time (4 sequential streams) and keeps one vector accumulator per (row,
 * token), reduced once per row and token after the last column.  Each ISA
 * stores the quantized activations the way its multiply wants them
 * (pmpd_w8a8_act_*): u8 = q + 128 for AVX-512 VNNI and AVX-VNNI
 * (vpdpbusd, with the row's weight sum taking the 128 back out), int8 for
 * AVX2 (vpmaddubsw of |w| with q carrying w's sign), NEON (SMMLA, SDOT)
 * and the scalar oracle, and for AMX int8 in the
 * order a tile multiply reads its second operand: tokens in groups of 16
 * (the last group padded), each group's bytes as [padded_cols / 4][16
 * tokens][4 consecutive columns], so a 64-column step of 16 tokens is one
 * contiguous KiB.  Weights of -128 are allowed: every path multiplies
 * exactly.
 */
#ifndef PMPD_WEIGHTS_W8A8_H
#define PMPD_WEIGHTS_W8A8_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/core/error.h"

#define PMPD_W8A8_HEADER_BYTES 64
#define PMPD_W8A8_VERSION 1
#define PMPD_W8A8_COL_ALIGN 64 /* padded_cols: one AVX-512 vector */
#define PMPD_W8A8_ROW_BLOCK 4
#define PMPD_W8A8_QMAX 127

/* Which activation representation the compiled kernel reads: one byte per
 * value, int8 q unless biased or in tile order. */
#if PMPD_USE_AMX
#define PMPD_W8A8_KERNEL "amx-int8"
#define PMPD_W8A8_TOKEN_GROUP 16
#elif PMPD_USE_AVX512
#define PMPD_W8A8_KERNEL "avx512-vnni"
#define PMPD_W8A8_ACT_BIASED 1
#elif PMPD_USE_AVXVNNI
#define PMPD_W8A8_KERNEL "avx-vnni"
#define PMPD_W8A8_ACT_BIASED 1
#elif PMPD_USE_AVX2
#define PMPD_W8A8_KERNEL "avx2"
#elif PMPD_USE_NEON && defined(__aarch64__)
#if PMPD_USE_I8MM
#define PMPD_W8A8_KERNEL "neon-smmla"
#elif PMPD_USE_DOTPROD
#define PMPD_W8A8_KERNEL "neon-sdot"
#else
#define PMPD_W8A8_KERNEL "neon"
#endif
#else
#define PMPD_W8A8_KERNEL "scalar"
#endif
#ifndef PMPD_W8A8_ACT_BIASED
#define PMPD_W8A8_ACT_BIASED 0 /* 1: stored as u8 = q + 128 (the VNNI multiply is u8 x s8) */
#endif
#ifndef PMPD_W8A8_TOKEN_GROUP
#define PMPD_W8A8_TOKEN_GROUP 1 /* tokens the representation pads to */
#endif

typedef struct pmpd_w8a8_matrix {
    uint32_t rows, cols, padded_cols, n_hot;
    float activation_scale;
    const float *row_scale;       /* [padded_rows] */
    const uint32_t *hot;          /* [n_hot] */
    const float *hot_weights;     /* [n_hot][rows] */
    const int8_t *weights;        /* [padded_rows][padded_cols] */
} pmpd_w8a8_matrix;

/* Where the parts of a rows x cols tensor with n_hot shadow channels lie.
 * Errors: PMPD_ERR_OVERFLOW, PMPD_ERR_INVALID_ARGUMENT (a zero dimension,
 * more than 2^31 rows, 2^17 columns or cols hot channels). */
typedef struct pmpd_w8a8_layout {
    size_t padded_rows, padded_cols, scale_offset, hot_offset, hot_weight_offset, weight_offset, total;
} pmpd_w8a8_layout;
PMPD_INTERNAL pmpd_status pmpd_w8a8_compute_layout(uint64_t rows, uint64_t cols, uint64_t n_hot,
                                                   pmpd_w8a8_layout *out);

/* Checks a stored tensor (header, shape, size, scales, hot channels) whose
 * bytes lie at file offset base_offset (for error offsets) and fills m. */
PMPD_INTERNAL pmpd_status pmpd_w8a8_view(const void *data, uint64_t size, uint64_t rows, uint64_t cols,
                                         uint64_t base_offset, pmpd_w8a8_matrix *m, pmpd_error *err);

/* The same for a tensor the loader has accepted: no checks. */
PMPD_INTERNAL void pmpd_w8a8_bind(const void *data, uint64_t rows, uint64_t cols, pmpd_w8a8_matrix *m);

/* The shared rounding of one activation: clamp(round(x / scale)). */
static inline int pmpd_w8a8_quantize_one(float x, float inverse_scale)
{
    float v = x * inverse_scale;
    /* Compare before converting: a huge or NaN input must not reach an
     * out-of-range float-to-int conversion. */
    if (!(v > -(float)PMPD_W8A8_QMAX))
        return v != v ? 0 : -PMPD_W8A8_QMAX;
    if (v > (float)PMPD_W8A8_QMAX)
        return PMPD_W8A8_QMAX;
    return (int)(v + (v >= 0.0f ? 0.5f : -0.5f));
}

/* Where token t's column c lives in the representation, in its elements. */
static inline size_t pmpd_w8a8_act_index(const pmpd_w8a8_matrix *m, size_t t, size_t c)
{
    size_t group = t / PMPD_W8A8_TOKEN_GROUP, member = t % PMPD_W8A8_TOKEN_GROUP;
    if (PMPD_W8A8_TOKEN_GROUP == 1)
        return t * m->padded_cols + c;
    return group * PMPD_W8A8_TOKEN_GROUP * m->padded_cols + c / 4 * 4 * PMPD_W8A8_TOKEN_GROUP + member * 4 + c % 4;
}

/* The q value of token t, column c, read back from the representation
 * (for a delegate that wants plain int8 rows, and for tests). */
static inline int pmpd_w8a8_act_value(const pmpd_w8a8_matrix *m, const void *act, size_t t, size_t c)
{
    size_t at = pmpd_w8a8_act_index(m, t, c);
    if (PMPD_W8A8_ACT_BIASED)
        return (int)((const uint8_t *)act)[at] - 128;
    return ((const int8_t *)act)[at];
}

/* Bytes of activations the compiled kernel needs for n_tokens tokens of
 * padded_cols columns.  Errors: PMPD_ERR_OVERFLOW. */
PMPD_INTERNAL pmpd_status pmpd_w8a8_act_size(size_t n_tokens, size_t padded_cols, size_t *bytes);

/* Quantizes tokens [begin, end) of x (cols floats each) into act in the
 * compiled kernel's representation, zero beyond cols. */
PMPD_INTERNAL void pmpd_w8a8_act_quantize(const pmpd_w8a8_matrix *m, const float *x, size_t begin, size_t end,
                                          void *act);

/* y[t * ldy + r] for every token t < n_tokens and r in [row_begin,
 * row_end) (row_begin a multiple of 4), from act made by
 * pmpd_w8a8_act_quantize: the compiled kernel.  The integer product
 * only: pmpd_w8a8_shadow adds the hot channels' clipped remainders. */
PMPD_INTERNAL void pmpd_w8a8_matmul(const pmpd_w8a8_matrix *m, const void *act, size_t n_tokens,
                                    size_t row_begin, size_t row_end, float *y, size_t ldy);

/* The delegate: the one function every W8A8 integer product goes through,
 * chosen at compile time (no dlopen, no function pointer to patch): the
 * CPU kernel above unless the build names another with
 * -DPMPD_W8A8_DELEGATE=name.  A board whose NPU multiplies int8 matrices
 * supplies `name` with pmpd_w8a8_matmul's signature and contract: the
 * weights are m->weights (int8, rows of m->padded_cols, row-major), the
 * activations act are n_tokens tokens of m->padded_cols in the compiled
 * CPU kernel's representation (int8 rows on Arm and without SIMD;
 * pmpd_w8a8_act_value reads any of them back), the result y[t * ldy + r] = activation_scale *
 * row_scale[r] * sum_c w[r][c] q[t][c] for r in [row_begin, row_end).  It
 * is called from pool workers, concurrently for disjoint row ranges (a
 * driver that wants whole matrices can serialise on its own lock or run
 * the pool with one thread).  The shadow path stays on the CPU. */
#ifndef PMPD_W8A8_DELEGATE
#define PMPD_W8A8_DELEGATE pmpd_w8a8_matmul
#else
void PMPD_W8A8_DELEGATE(const pmpd_w8a8_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                        size_t row_end, float *y, size_t ldy);
#endif

/* The scalar oracle: the same from the int8 q values (n_tokens rows of
 * padded_cols), always compiled. */
PMPD_INTERNAL void pmpd_w8a8_act_quantize_scalar(const pmpd_w8a8_matrix *m, const float *x, size_t begin,
                                                 size_t end, int8_t *q);
PMPD_INTERNAL void pmpd_w8a8_matmul_scalar(const pmpd_w8a8_matrix *m, const int8_t *q, size_t n_tokens,
                                           size_t row_begin, size_t row_end, float *y, size_t ldy);

/* Adds to y[t * ldy + r] (r in [row_begin, row_end), every token) what
 * saturation clipped from the hot channels of x (n_tokens rows of cols
 * floats), times their float weights.  Shared by every ISA: it touches
 * n_hot x rows floats per token, and only for tokens that clipped. */
PMPD_INTERNAL void pmpd_w8a8_shadow(const pmpd_w8a8_matrix *m, const float *x, size_t n_tokens, size_t row_begin,
                                    size_t row_end, float *y, size_t ldy);

/* Writes the result of one (row, token) integer sum. */
static inline float pmpd_w8a8_output(const pmpd_w8a8_matrix *m, size_t r, int32_t sum)
{
    return (float)sum * (m->activation_scale * m->row_scale[r]);
}

#endif
