#include "pmpd_impl/offline/format/atomic_file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/core/error.h"
#include "platform/platform.h"

PMPD_INTERNAL pmpd_status pmpd_atomic_open(pmpd_atomic_file *a, const char *path, pmpd_error *err)
{
    size_t length = strlen(path);
    a->path = path;
    a->f = NULL;
    a->tmp = (char *)malloc(length + 5);
    if (!a->tmp)
        return pmpd_error_set(err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory");
    memcpy(a->tmp, path, length);
    memcpy(a->tmp + length, ".tmp", 5);
    a->f = fopen(a->tmp, "wb");
    if (!a->f) {
        pmpd_status status =
            pmpd_error_set(err, PMPD_ERR_IO, PMPD_NO_OFFSET, "cannot create %s: %s", a->tmp, strerror(errno));
        free(a->tmp);
        a->tmp = NULL;
        return status;
    }
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_atomic_finish(pmpd_atomic_file *a, pmpd_status status, pmpd_error *err)
{
    if (fclose(a->f) != 0 && status == PMPD_OK)
        status = pmpd_error_set(err, PMPD_ERR_IO, PMPD_NO_OFFSET, "cannot write %s: %s", a->tmp, strerror(errno));
    /* On disk before it takes the real name, so a power cut leaves the old
     * file or the new one, never an empty one. */
    if (status == PMPD_OK && pmpd_platform_sync_file(a->tmp) != PMPD_OK)
        status = pmpd_error_set(err, PMPD_ERR_IO, PMPD_NO_OFFSET, "cannot write %s to disk: %s", a->tmp,
                                strerror(errno));
    if (status == PMPD_OK && rename(a->tmp, a->path) != 0)
        status = pmpd_error_set(err, PMPD_ERR_IO, PMPD_NO_OFFSET, "cannot rename %s to %s: %s", a->tmp, a->path,
                                strerror(errno));
    if (status != PMPD_OK)
        remove(a->tmp);
    free(a->tmp);
    a->tmp = NULL;
    a->f = NULL;
    return status;
}
