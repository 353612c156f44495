/* Data-aware rounding of rotated rows (seed 002's data-aware setting,
 * after QuIP's LDLQ): the rotated formats' encoders (nuq/, vq/, tcq/)
 * minimize the error a layer's output sees, tr(E H E^T) with H the second
 * moment of the layer's rotated input, instead of the weights' own
 * squared error ||E||^2.
 *
 * Write H = (U + I) D (U + I)^T with U strictly block upper triangular
 * and D block diagonal, blocks being the columns an encoder rounds
 * together (NUQ one, VQ a pair, TCQ a 256-column trellis sequence).  A
 * row v is rounded block by block, in column order, each block's target
 * being v plus the earlier blocks' errors fed forward:
 *     target_B = v_B + sum over earlier k of (v_k - q_k) U[k][B],
 *     q_B = the encoder's rounding of target_B.
 * Then v - q = eta (U + I)^-1 with eta = target - q the rounding
 * residuals, so tr(E H E^T) = sum_B eta_B D_B eta_B^T: the residuals are
 * weighed by D instead of H, and with rounding errors of a fixed size the
 * loss falls by tr(D) / tr(H) (the weights' error grows; the output's
 * falls).  A block-diagonal H (the identity included) feeds nothing
 * forward: the encoders' data-free rounding exactly.
 */
#ifndef PMPD_OFFLINE_LDLQ_LDLQ_H
#define PMPD_OFFLINE_LDLQ_LDLQ_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"

#if PMPD_OFFLINE

/* Damping added to H's diagonal before factoring, as a fraction of its
 * mean diagonal: keeps the factor finite where the calibration text never
 * excited a direction (the rotation's padding columns among them). */
#define PMPD_LDLQ_DAMPING 0.01

/* One input's factor for one block size. */
typedef struct pmpd_ldlq {
    size_t n;        /* rotated columns: the format's rotation size */
    size_t block;    /* columns rounded together */
    float *hessian;  /* [n][n] the rotated second moment, damped */
    float *feedback; /* [n][n] U: zero within and below each diagonal block */
} pmpd_ldlq;

/* Factors hessian (n x n, symmetric, already in the rotated domain)
 * for blocks of block columns (the last may be shorter) into f, which
 * owns two malloc'ed n x n arrays (pmpd_ldlq_free; zeroed on failure).
 * The damping above is added first.  Errors: PMPD_ERR_INVALID_ARGUMENT (n
 * or block 0, a mean diagonal that is not positive and finite, a matrix
 * not positive definite even damped), PMPD_ERR_OVERFLOW,
 * PMPD_ERR_OUT_OF_MEMORY. */
PMPD_INTERNAL pmpd_status pmpd_ldlq_factor(const double *hessian, size_t n, size_t block, pmpd_ldlq *f);

PMPD_INTERNAL void pmpd_ldlq_free(pmpd_ldlq *f);

/* Rounds q[begin, end) from target[begin, end) (both in the row's units)
 * and writes their codes; begin is a multiple of the block size. */
typedef void (*pmpd_ldlq_round)(void *context, size_t begin, size_t end, const float *target, float *q);

/* Rounds row v (n floats) through round, blocks of block columns in
 * order, into q (n floats), target (n floats) holding the fed-forward
 * targets.  f NULL: target = v (data-free rounding); else f->n == n and
 * f->block == block. */
PMPD_INTERNAL void pmpd_ldlq_row(const pmpd_ldlq *f, size_t n, size_t block, const float *v, pmpd_ldlq_round round,
                                 void *context, float *target, float *q);

/* The factor c minimizing (v - c q) H (v - c q)^T: (v H q) / (q H q), or
 * 1 when that is not positive and finite (a stored scale must stay
 * positive).  A row's codes fixed, its scale refitted in the norm the
 * rounding minimized. */
PMPD_INTERNAL double pmpd_ldlq_rescale(const pmpd_ldlq *f, const float *v, const float *q);

#endif /* PMPD_OFFLINE */

#endif
