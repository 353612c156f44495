/* The quantizer behind pmpd_anyprec_quantize, with the header write under
 * the caller's control (threads working on one tensor). */
#ifndef PMPD_OFFLINE_PRECISION_ANYPREC_QUANTIZE_H
#define PMPD_OFFLINE_PRECISION_ANYPREC_QUANTIZE_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"

#if PMPD_OFFLINE

/* pmpd_anyprec_quantize, writing the header only when write_header is
 * set.  Calls on disjoint row ranges that do not write the header may run
 * on different threads once a call that writes it (any row range, empty
 * included) has returned: rows are quantized independently into bytes of
 * their own.  Ranges that start at multiples of 64 rows also keep threads
 * off each other's cache lines, whatever rows a layout interleaves. */
PMPD_INTERNAL pmpd_status pmpd_anyprec_quantize_rows(const float *w, uint64_t rows, uint64_t cols,
                                                     const float *importance, unsigned seed_bits,
                                                     unsigned parent_bits, uint64_t row_begin, uint64_t row_end,
                                                     void *out, size_t out_size, int write_header);

#endif
#endif
