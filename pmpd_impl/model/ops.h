/* The element-wise steps of the Llama block, in llama2.c's arithmetic
 * (same operations in the same order, so the float path reproduces run.c
 * to rounding). */
#ifndef PMPD_MODEL_OPS_H
#define PMPD_MODEL_OPS_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"

/* out = weight * x / sqrt(mean(x^2) + eps), over n elements. */
PMPD_INTERNAL void pmpd_ops_rmsnorm(float *out, const float *x, const float *weight, size_t n, float eps);

/* cos and sin of the rotary angles at position pos: one per pair i of a
 * head, angle pos / theta^(2i / head_dim), divided by divisors[i] when
 * divisors is not NULL (Llama 3.1's rope_freqs). */
PMPD_INTERNAL void pmpd_ops_rope_angles(float *cos_out, float *sin_out, size_t pos, size_t head_dim,
                                        float theta, const float *divisors);

/* Rotates pair i of every head of vec (n_heads * head_dim) by angle i. */
typedef void (*pmpd_ops_rope_fn)(float *vec, size_t n_heads, size_t head_dim, const float *cos_in,
                                 const float *sin_in);

/* Pair i is (2i, 2i+1): Meta's and llama2.c's layout. */
PMPD_INTERNAL void pmpd_ops_rope_apply(float *vec, size_t n_heads, size_t head_dim,
                                       const float *cos_in, const float *sin_in);

/* Pair i is (i, i + head_dim/2): GPT-NeoX's layout, Qwen2's. */
PMPD_INTERNAL void pmpd_ops_rope_apply_neox(float *vec, size_t n_heads, size_t head_dim,
                                            const float *cos_in, const float *sin_in);

/* The rotation of a pmpd_rope_style, picked once per forward pass so the
 * loops carry no test of the style. */
PMPD_INTERNAL pmpd_ops_rope_fn pmpd_ops_rope_for(uint32_t rope_style);

/* gate = silu(gate) * up, over n elements. */
PMPD_INTERNAL void pmpd_ops_swiglu(float *gate, const float *up, size_t n);

/* acc += x over n elements. */
PMPD_INTERNAL void pmpd_ops_add(float *acc, const float *x, size_t n);

#endif
