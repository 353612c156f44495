#include <stdarg.h>
#include <stdio.h>

#include "pmpd_impl/core/error.h"

void pmpd_error_clear(pmpd_error *err)
{
    if (!err)
        return;
    err->code = PMPD_OK;
    err->offset = PMPD_NO_OFFSET;
    err->message[0] = '\0';
}

PMPD_INTERNAL pmpd_status pmpd_error_set(pmpd_error *err, pmpd_status code, uint64_t offset,
                                         const char *fmt, ...)
{
    va_list args;
    if (!err)
        return code;
    err->code = code;
    err->offset = offset;
    va_start(args, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, args);
    va_end(args);
    return code;
}
