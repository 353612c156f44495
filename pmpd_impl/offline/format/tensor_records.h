/* Per-tensor records collected while a model runs (offline, heap): the
 * calibration observers (column importance, W8A8 input ranges) keep one
 * record per linear layer, found by the model tensor it is for. */
#ifndef PMPD_OFFLINE_FORMAT_TENSOR_RECORDS_H
#define PMPD_OFFLINE_FORMAT_TENSOR_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/format/container.h"
#include "pmpd_impl/model/model.h"

#if PMPD_OFFLINE

/* What every record begins with. */
typedef struct pmpd_tensor_record {
    char name[PMPD_TENSOR_NAME_MAX + 1];
    const void *key;      /* the model tensor it is for */
    uint64_t cols;
} pmpd_tensor_record;

/* The record for w among the *n records of record_size bytes at *records
 * (each beginning with a pmpd_tensor_record), or a new zeroed one
 * appended for it, its name, key and cols set, *records and *capacity
 * grown as needed; *created says which.  NULL when out of memory. */
PMPD_INTERNAL void *pmpd_tensor_record_of(void **records, uint32_t *n, uint32_t *capacity, size_t record_size,
                                          const pmpd_tensor *w, int *created);

#endif
#endif
