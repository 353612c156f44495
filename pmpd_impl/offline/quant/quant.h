/* Offline quantizers behind pmpd_quantize_matrix: one function per type,
 * each filling a whole tensor laid out as in pmpd_impl/weights/grouped/qformat.h. */
#ifndef PMPD_OFFLINE_QUANT_QUANT_H
#define PMPD_OFFLINE_QUANT_QUANT_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/weights/grouped/qformat.h"

/* Declared only in offline builds: the amalgamation emits every header,
 * and a static function declared but never defined is an error there. */
#if PMPD_OFFLINE

/* Quantizes the row-major rows x cols float matrix w into out (out_size
 * bytes, at least pmpd_qformat_tensor_bytes) as type q8, q4 or q2cb, q2cb
 * on threads threads (0: one per core; the output is the same for any
 * count).  Errors: PMPD_ERR_INVALID_ARGUMENT (NULL pointers, not a
 * quantized type, a zero dimension, out too small), PMPD_ERR_OUT_OF_MEMORY. */
PMPD_INTERNAL pmpd_status pmpd_quant_matrix(uint32_t type, const float *w, size_t rows, size_t cols,
                                            unsigned threads, void *out, size_t out_size);

/* Round-to-nearest uniform groups: q8 (absmax / 127) and q4 (the value of
 * largest magnitude maps to -8, as in llama.cpp's Q4_0). */
PMPD_INTERNAL void pmpd_quant_uniform(uint32_t type, const float *w, size_t rows, size_t cols,
                                      unsigned char *out);

/* q2cb: learns the 16 shared codebooks of the tensor (two-phase
 * clustering, see q2cb.c) and packs every group with its best one, the
 * groups spread over threads as pmpd_quant_matrix's.
 * Errors: PMPD_ERR_OUT_OF_MEMORY. */
PMPD_INTERNAL pmpd_status pmpd_quant_q2cb(const float *w, size_t rows, size_t cols, unsigned threads,
                                          unsigned char *out);

/* Writes one block's f16 scale of row i. */
PMPD_INTERNAL void pmpd_quant_put_scale(unsigned char *block, size_t i, float scale);

#endif /* PMPD_OFFLINE */

#endif
