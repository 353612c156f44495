/* The element-wise steps of the Llama block, in llama2.c's arithmetic
 * (same operations in the same order, so the float path reproduces run.c
 * to rounding). */
#ifndef PMPD_MODEL_OPS_H
#define PMPD_MODEL_OPS_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"

/* out = weight * x / sqrt(mean(x^2) + eps), over n elements. */
PMPD_INTERNAL void pmpd_ops_rmsnorm(float *out, const float *x, const float *weight, size_t n, float eps);

/* cos and sin of the rotary angles at position pos: one per adjacent pair
 * (2i, 2i+1) of a head, angle pos / theta^(2i / head_dim). */
PMPD_INTERNAL void pmpd_ops_rope_angles(float *cos_out, float *sin_out, size_t pos, size_t head_dim,
                                        float theta);

/* Rotates each adjacent pair of every head of vec (n_heads * head_dim). */
PMPD_INTERNAL void pmpd_ops_rope_apply(float *vec, size_t n_heads, size_t head_dim,
                                       const float *cos_in, const float *sin_in);

/* gate = silu(gate) * up, over n elements. */
PMPD_INTERNAL void pmpd_ops_swiglu(float *gate, const float *up, size_t n);

/* acc += x over n elements. */
PMPD_INTERNAL void pmpd_ops_add(float *acc, const float *x, size_t n);

#endif
