/*
 * Linear layers over q8 / q4 / q2cb tensors: the activations are quantized
 * to int8 once, into the caller's scratch, then the output rows are split
 * over the pool in whole row blocks (4 rows), so threads never share a
 * block (model/linear.c runs the two steps).
 */
#ifndef PMPD_KERNELS_QLINEAR_H
#define PMPD_KERNELS_QLINEAR_H

#include "pmpd_impl/exec/pool.h"
#include "pmpd_impl/weights/grouped/qmatmul.h"
#include "pmpd_impl/model/model.h"

/* Scratch bytes for n_tokens tokens of cols columns (64-byte aligned
 * buffer).  Errors: PMPD_ERR_OVERFLOW. */
PMPD_INTERNAL pmpd_status pmpd_qlinear_scratch_bytes(size_t cols, size_t n_tokens, size_t *bytes);

/* The product in two steps (weights/format.h): prepare quantizes tokens
 * [begin, end) of X (n_tokens rows of cols floats; begin even) into
 * scratch (the last range also zeroes the padding token of an odd count);
 * rows computes Y[t][r] = sum_c W[r][c] X[t][c] for r in [begin, end)
 * (begin a multiple of 4) from it, on the calling thread.  The activations
 * do not depend on W: every matrix with cols columns can use them. */
PMPD_INTERNAL void pmpd_qlinear_prepare(const pmpd_tensor *w, const float *x, size_t n_tokens, void *scratch,
                                        size_t begin, size_t end, unsigned worker);
PMPD_INTERNAL void pmpd_qlinear_rows(const pmpd_tensor *w, const void *scratch, size_t n_tokens, float *y,
                                     size_t begin, size_t end);

/* Row r of W dequantized (the embedding lookup). */
PMPD_INTERNAL void pmpd_qlinear_row(const pmpd_tensor *w, size_t r, float *out);

#endif
