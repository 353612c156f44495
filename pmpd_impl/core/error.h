/* Filling pmpd_error records from inside the library. */
#ifndef PMPD_CORE_ERROR_H
#define PMPD_CORE_ERROR_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"

#if defined(__GNUC__)
#define PMPD_PRINTF_LIKE(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#define PMPD_PRINTF_LIKE(fmt_index, first_arg)
#endif

/* Records code, offset and a printf-formatted message in err (which may be
 * NULL) and returns code, so callers can write
 *     return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, off, "n_heads is %d", h); */
PMPD_INTERNAL pmpd_status pmpd_error_set(pmpd_error *err, pmpd_status code, uint64_t offset,
                                         const char *fmt, ...) PMPD_PRINTF_LIKE(4, 5);

#endif
