/* One row's columns in the order the tree quantizer needs them. */
#ifndef PMPD_OFFLINE_PRECISION_ANYPREC_SORT_H
#define PMPD_OFFLINE_PRECISION_ANYPREC_SORT_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd_impl/core/config.h"

#if PMPD_OFFLINE

/* Fills cols[n] with 0..n-1 ordered by row value ascending, equal values
 * (-0 and +0 are equal) by column ascending: the order a comparison sort on
 * (value, column) gives, so the quantizer's output does not depend on how
 * it sorts.  row must be finite.  scratch holds 2n uint64_t. */
PMPD_INTERNAL void pmpd_anyprec_sort_row(const float *row, size_t n, uint32_t *cols, uint64_t *scratch);

#endif
#endif
