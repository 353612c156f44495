/* Byte sizes of tensor element types: the one place that knows how many
 * bytes a tensor of a given type and shape occupies.  The loader refuses a
 * tensor whose stored size differs, and any type this file does not know.
 * Quantized types (kernel and precision work) add their case here. */
#ifndef PMPD_FORMAT_TENSOR_TYPE_H
#define PMPD_FORMAT_TENSOR_TYPE_H

#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"

/* Short lower-case name of a type ("f32"), or NULL for an unknown type. */
PMPD_INTERNAL const char *pmpd_tensor_type_name(uint32_t type);

/* Bytes of one row of cols elements.  Errors: PMPD_ERR_FORMAT_VALUE
 * (unknown type), PMPD_ERR_FORMAT_SHAPE (cols not allowed for the type, or
 * the size overflows 64 bits). */
PMPD_INTERNAL pmpd_status pmpd_tensor_type_row_bytes(uint32_t type, uint64_t cols, uint64_t *bytes);

/* (PMPD_TENSOR_ANYPREC tensors carry their widths in their own header, so
 * their size comes from pmpd_anyprec_size / pmpd_anyprec_view instead.)
 *
 * Bytes of a whole tensor with n_dims dimensions, dims[0] outermost and
 * dims[n_dims-1] the row length (1 <= n_dims <= PMPD_TENSOR_MAX_DIMS, every
 * dimension >= 1).  Same errors as pmpd_tensor_type_row_bytes. */
PMPD_INTERNAL pmpd_status pmpd_tensor_type_bytes(uint32_t type, uint32_t n_dims, const uint64_t *dims,
                                                 uint64_t *bytes);

#endif
