/* Output files that appear whole or not at all (offline): written as
 * "<path>.tmp" and renamed over path only once complete, so a failure or
 * an interrupt never leaves a half-written file under the real name. */
#ifndef PMPD_OFFLINE_FORMAT_ATOMIC_FILE_H
#define PMPD_OFFLINE_FORMAT_ATOMIC_FILE_H

#include <stdio.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"

#if PMPD_OFFLINE

typedef struct pmpd_atomic_file {
    FILE *f;        /* write here */
    char *tmp;      /* "<path>.tmp", malloc'ed */
    const char *path;
} pmpd_atomic_file;

/* Creates "<path>.tmp" for writing.  Errors: PMPD_ERR_IO (err names the
 * file and the reason), PMPD_ERR_OUT_OF_MEMORY. */
PMPD_INTERNAL pmpd_status pmpd_atomic_open(pmpd_atomic_file *a, const char *path, pmpd_error *err);

/* Closes the file; if status is PMPD_OK writes it out to disk
 * (pmpd_platform_sync_file) and renames it to path, otherwise (or when
 * closing, syncing or renaming fails) removes it.  Returns the final
 * status; err is only written for a failure here. */
PMPD_INTERNAL pmpd_status pmpd_atomic_finish(pmpd_atomic_file *a, pmpd_status status, pmpd_error *err);

#endif /* PMPD_OFFLINE */
#endif
