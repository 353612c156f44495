/*
 * Vector kernels for float matrix products (f32 weights, or f16 converted
 * on the fly), chosen at compile time by float_format.c; its scalar loop
 * (pmpd_linear_float_reference) is the oracle they are tested against.
 *
 * Each output Y[t][r] is computed the same way whatever the token count,
 * the row range or its neighbours (one vector accumulator per output, over
 * the columns in order, then a fixed reduction), so batched prefill equals
 * token-by-token decoding exactly and thread splits change nothing.
 */
#ifndef PMPD_WEIGHTS_FLOAT_LINEAR_FLOAT_H
#define PMPD_WEIGHTS_FLOAT_LINEAR_FLOAT_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/model/model.h"

#if PMPD_USE_AVX2
#define PMPD_LINEAR_FLOAT_SIMD 1
#elif PMPD_USE_NEON && defined(__aarch64__)
#define PMPD_LINEAR_FLOAT_SIMD 1
#else
#define PMPD_LINEAR_FLOAT_SIMD 0
#endif

/* The scalar float product (f32 or f16 weights), single-threaded: the
 * reference the vector kernels are tested against.  Shapes as in
 * model/linear.h. */
PMPD_INTERNAL void pmpd_linear_float_reference(const pmpd_tensor *w, const float *x, size_t n_tokens, float *y);

#if PMPD_LINEAR_FLOAT_SIMD
/* Y[t][r] = sum_c W[r][c] X[t][c] for rows [begin, end) and every token;
 * w is PMPD_TENSOR_F32 or PMPD_TENSOR_F16, X is n_tokens rows of cols
 * floats, Y n_tokens rows of w->dims[0] floats. */
PMPD_INTERNAL void pmpd_linear_float_simd(const pmpd_tensor *w, const float *x, size_t n_tokens, float *y,
                                          size_t begin, size_t end);
#endif

#endif
