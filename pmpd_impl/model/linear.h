/*
 * Linear layers: every projection of the forward pass (q, k, v, o, gate,
 * up, down, classifier) and the embedding lookup go through here, and here
 * a weight tensor's type picks its kernels from the table of weight
 * formats (weights/format.h), so a new format changes nothing in the
 * model.
 *
 * Shapes: W is [rows][cols] (model.h); X is n_tokens rows of cols floats,
 * contiguous; Y is n_tokens rows of `rows` floats, contiguous:
 *     Y[t][r] = sum_c W[r][c] * X[t][c].
 * n_tokens == 1 is the decode GEMV, n_tokens > 1 the prefill GEMM.
 *
 * Scratch contract: a format that needs working memory (e.g. activations
 * quantized to int8 once, before the rows are split over threads) reports
 * the bytes it needs for a given tensor and token count through
 * pmpd_linear_scratch_bytes; the session plans the maximum over its
 * tensors at its largest batch and passes that buffer (64-byte aligned) to
 * every call.  Formats that need none report 0.  Per-thread working memory
 * must be counted in the same figure (the pool has at most n_threads
 * workers; pass the thread count to the planning call).
 */
#ifndef PMPD_MODEL_LINEAR_H
#define PMPD_MODEL_LINEAR_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/exec/pool.h"
#include "pmpd_impl/model/model.h"

/* Scratch bytes pmpd_linear needs for w (its data included: a rotated
 * format reads its header) at up to n_tokens tokens with up to n_threads
 * threads.  Errors: PMPD_ERR_UNSUPPORTED (a tensor type this
 * build has no kernel for), PMPD_ERR_OVERFLOW. */
PMPD_INTERNAL pmpd_status pmpd_linear_scratch_bytes(const pmpd_tensor *w, size_t n_tokens,
                                                    unsigned n_threads, size_t *bytes);

/* Y = X Wᵀ over n_tokens tokens, split over the pool's threads by output
 * rows.  scratch holds at least pmpd_linear_scratch_bytes(w, n_tokens, ...)
 * bytes (NULL when that is 0).  bits is the width nested any-precision
 * weights are read at (0 = their widest; clamped to what the tensor holds);
 * other types ignore it.  The type was accepted by the planning call, so
 * this cannot fail. */
PMPD_INTERNAL void pmpd_linear(const pmpd_tensor *w, const float *x, size_t n_tokens, float *y,
                               void *scratch, pmpd_pool *pool, unsigned bits);

/* Y_i = X W_i^T for count matrices that read the same X (q, k and v;
 * gate and up): where their format prepares its input apart from the
 * product (weights/format.h) and the matrices can share it, X is prepared
 * once and the rows of all of them are split over the pool in one job;
 * otherwise one pmpd_linear each.  scratch holds what the largest of
 * them needs. */
PMPD_INTERNAL void pmpd_linear_group(const pmpd_tensor *const *w, size_t count, const float *x, size_t n_tokens,
                                     float *const *y, void *scratch, pmpd_pool *pool, unsigned bits);

/* pmpd_linear_group in parts, for a caller that schedules the rows itself
 * (the out-of-order prefill, model/prefill_graph.c).  shared: whether the
 * matrices can share one prepared input (then the parts below apply);
 * items: the row job's size (rows of all matrices end to end, each rounded
 * up to 4); prepare: converts x into scratch (split over pool); rows:
 * items [begin, end) (begin a multiple of 4) on the calling thread, nested
 * weights at width bits. */
PMPD_INTERNAL int pmpd_linear_group_shared(const pmpd_tensor *const *w, size_t count);
PMPD_INTERNAL size_t pmpd_linear_group_items(const pmpd_tensor *const *w, size_t count);
PMPD_INTERNAL void pmpd_linear_group_prepare(const pmpd_tensor *w, const float *x, size_t n_tokens, void *scratch,
                                             pmpd_pool *pool);
/* prepare's part for tokens [begin, end) (begin even), on pool thread
 * worker. */
PMPD_INTERNAL void pmpd_linear_group_prepare_tokens(const pmpd_tensor *w, const float *x, size_t n_tokens,
                                                    void *scratch, size_t begin, size_t end, unsigned worker);
PMPD_INTERNAL void pmpd_linear_group_rows(const pmpd_tensor *const *w, size_t count, const void *scratch,
                                          const float *x, size_t n_tokens, float *const *y, size_t begin, size_t end,
                                          unsigned bits);

/* Row r of W as cols floats (the embedding lookup). */
PMPD_INTERNAL void pmpd_linear_row(const pmpd_tensor *w, size_t r, float *out);

/* Bytes one product with w reads at width bits (nested weights read only
 * their first bits planes; other types the whole tensor). */
PMPD_INTERNAL uint64_t pmpd_linear_bytes_read(const pmpd_tensor *w, unsigned bits);

#endif
