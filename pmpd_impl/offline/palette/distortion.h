/* What a weight format costs a group of matrices, measured rather than
 * assumed: the normalized squared error ||W - Q(W)||^2 / ||W||^2 of the
 * real encoder (offline/weights/encoders.h) decoded back by the format
 * table's row() (weights/format.h), and the bytes the format really stores
 * (the table's tensor_bytes).  Over a group, errors add as energies: the
 * summed squared error over the summed squared weights, the quantity the
 * sensitivity (sensitivity.h) is fitted against. */
#ifndef PMPD_OFFLINE_PALETTE_DISTORTION_H
#define PMPD_OFFLINE_PALETTE_DISTORTION_H

#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/offline/format/builder.h"
#include "pmpd_impl/offline/ldlq/hessian.h"
#include "pmpd_impl/offline/palette/groups.h"

#if PMPD_OFFLINE

/* Bytes of group g's matrices stored as type (f32, f16, q8, q4, q2cb, or
 * nuq at options->nuq_bits, tcq at options->tcq_quarter_bits: the converter's own sizes,
 * pmpd_weight_stream_bytes).  Errors: PMPD_ERR_INVALID_ARGUMENT (another
 * type), PMPD_ERR_OVERFLOW. */
PMPD_INTERNAL pmpd_status pmpd_palette_group_bytes(const pmpd_build_model *b, const pmpd_palette_group *g,
                                                   uint32_t type, const pmpd_convert_options *options,
                                                   uint64_t *bytes);

/* Matrix t encoded as type (the types above; options as for the
 * encoders) into a malloc'ed block (*block: free it; NULL on failure),
 * described by *tensor, whose data is 64-byte aligned in the block as the
 * loader aligns tensor data.  Errors: PMPD_ERR_INVALID_ARGUMENT,
 * PMPD_ERR_OVERFLOW, PMPD_ERR_OUT_OF_MEMORY, the encoder's. */
PMPD_INTERNAL pmpd_status pmpd_palette_encode(const pmpd_build_tensor *t, uint32_t type,
                                              const pmpd_convert_options *options, const pmpd_ldlq *ldlq,
                                              void **block, pmpd_tensor *tensor);

/* *err = the group's normalized squared error under type (0 for f32).
 * options gives what encoders take (nuq_bits, tcq_quarter_bits; may be
 * NULL).  With hessians (may be NULL; offline/ldlq/hessian.h, factored
 * for the rotated types' blocks) the rotated formats are encoded with
 * LDLQ and every format's error is weighed by its input's moment: the
 * energy of the isotropic noise that disturbs the layer's output as much
 * (e H e^T summed over rows, times cols / tr(H)), which is what the
 * sensitivity's noise measured.  Errors: those of the encoder,
 * PMPD_ERR_INVALID_ARGUMENT, PMPD_ERR_OUT_OF_MEMORY. */
PMPD_INTERNAL pmpd_status pmpd_palette_group_error(const pmpd_build_model *b, const pmpd_palette_group *g,
                                                   uint32_t type, const pmpd_convert_options *options,
                                                   const pmpd_hessian_set *hessians, double *err);

/* 1 for the formats that store Hadamard-rotated rows (nuq, vq, tcq): a
 * rotated row is close to Gaussian whatever the layer, so their error on
 * Gaussian data estimates their error on the model's (seed 002's
 * data-free loss term). */
PMPD_INTERNAL int pmpd_palette_rotated(uint32_t type);

/* *err = type's normalized squared error on i.i.d. N(0, 1) rows of cols
 * columns (a fixed draw of at least PMPD_PALETTE_GAUSSIAN_WEIGHTS values,
 * the same for every call), encoded and decoded as a model's matrix is.
 * Errors: as pmpd_palette_group_error's. */
#define PMPD_PALETTE_GAUSSIAN_WEIGHTS 16384u
PMPD_INTERNAL pmpd_status pmpd_palette_gaussian_error(uint32_t type, const pmpd_convert_options *options,
                                                      uint64_t cols, double *err);

/* norm[i] = the summed squared weights of group g's matrix i (what its
 * estimated error energies are weighed by). */
PMPD_INTERNAL void pmpd_palette_group_norms(const pmpd_build_model *b, const pmpd_palette_group *g,
                                            double norm[PMPD_PALETTE_GROUP_MAX_TENSORS]);

#endif
#endif
