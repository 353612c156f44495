/* The element-wise steps of ops.h over a batch of tokens, split over the
 * worker pool by tokens.  Prefill runs them on every token of a batch: left
 * on the calling thread, they were the serial part that kept 16 threads
 * from scaling (SwiGLU alone is one expf per hidden unit per token).  Each
 * token still goes through the very same ops.h function, so results are
 * bit for bit those of the serial loop; one token runs inline. */
#ifndef PMPD_MODEL_OPS_BATCH_H
#define PMPD_MODEL_OPS_BATCH_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/exec/pool.h"
#include "pmpd_impl/model/ops.h"

/* out[t] = rmsnorm(x[t]) for n_tokens rows of dim floats. */
PMPD_INTERNAL void pmpd_ops_rmsnorm_batch(pmpd_pool *pool, float *out, const float *x, const float *weight,
                                          size_t n_tokens, size_t dim, float eps);

/* gate[t] = silu(gate[t]) * up[t] for n_tokens rows of width floats. */
PMPD_INTERNAL void pmpd_ops_swiglu_batch(pmpd_pool *pool, float *gate, const float *up, size_t n_tokens,
                                         size_t width);

/* acc[t] += x[t] for n_tokens rows of width floats. */
PMPD_INTERNAL void pmpd_ops_add_batch(pmpd_pool *pool, float *acc, const float *x, size_t n_tokens, size_t width);

#endif
