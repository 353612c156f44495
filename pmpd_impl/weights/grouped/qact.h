/*
 * Activations quantized on the fly to int8 per group of 32 (scale =
 * absmax / 127, round to nearest even), the other operand of every
 * quantized kernel.
 *
 * Layout, fused with the reordering SMMLA needs: tokens go in pairs and
 * the pair's rows are interleaved in 8-byte chunks, so bytes 16c..16c+15
 * of a pair are columns 8c..8c+7 of its first token, then of its second:
 * one 16-byte load is SMMLA's 2 x 8 left operand, and an 8-byte load gives
 * one token's chunk to SDOT and AVX2.  An odd token count is padded with a
 * zero token.  Each group also keeps the sum of its int8 values, with
 * which AVX2 undoes the bias of its unsigned weight bytes.
 */
#ifndef PMPD_KERNELS_QACT_H
#define PMPD_KERNELS_QACT_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"

typedef struct pmpd_qact {
    int8_t *qs;        /* (n_tokens rounded up to even) * n_groups * 32 bytes */
    float *scale;      /* [token][group], padding token included */
    int32_t *sum;      /* [token][group] */
    size_t n_tokens;   /* tokens quantized (without the padding one) */
    size_t n_groups;   /* ceil(cols / 32) */
} pmpd_qact;

/* Arena bytes pmpd_qact_alloc takes for up to n_tokens tokens of cols
 * columns (alignment padding included).  Errors: PMPD_ERR_OVERFLOW. */
PMPD_INTERNAL pmpd_status pmpd_qact_bytes(size_t n_tokens, size_t cols, size_t *bytes);

/* Carves the buffers for up to n_tokens tokens of cols columns out of the
 * arena.  Errors: those of pmpd_arena_alloc. */
PMPD_INTERNAL pmpd_status pmpd_qact_alloc(pmpd_arena *arena, size_t n_tokens, size_t cols, pmpd_qact *out);

/* Quantizes x[t * ldx + c] for t < n_tokens, c < cols into act, whose
 * buffers were sized for at least n_tokens tokens of cols columns. */
PMPD_INTERNAL void pmpd_qact_quantize(pmpd_qact *act, const float *x, size_t ldx, size_t n_tokens,
                                      size_t cols);

/* The part of pmpd_qact_quantize that threads can share: tokens
 * [begin, end) of an act whose n_tokens and n_groups are already set (end
 * may include the padding token, n_tokens rounded up to even). */
PMPD_INTERNAL void pmpd_qact_quantize_tokens(pmpd_qact *act, const float *x, size_t ldx, size_t cols,
                                             size_t begin, size_t end);

/* The 8 int8 values of token t, columns 8c..8c+7. */
static inline const int8_t *pmpd_qact_chunk(const pmpd_qact *act, size_t t, size_t c)
{
    return act->qs + (t / 2) * act->n_groups * 64 + c * 16 + (t % 2) * 8;
}

#endif
