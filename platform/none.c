/* The "none" port: no filesystem, no clock, no threads.  Firmware links the
 * model into flash and opens it with the from-memory loader; sessions run
 * single-threaded. */
#include "pmpd_impl/core/config.h"

#if PMPD_PLATFORM_NONE

#include "platform/platform.h"

PMPD_INTERNAL pmpd_status pmpd_platform_map_file(const char *path, pmpd_mapped_file *out)
{
    (void)path;
    if (out) {
        out->data = NULL;
        out->size = 0;
        out->is_mapped = 0;
    }
    return PMPD_ERR_UNSUPPORTED;
}

PMPD_INTERNAL void pmpd_platform_unmap_file(pmpd_mapped_file *file)
{
    (void)file;
}

PMPD_INTERNAL pmpd_status pmpd_platform_file_size(const char *path, uint64_t *size)
{
    (void)path;
    (void)size;
    return PMPD_ERR_UNSUPPORTED;
}

PMPD_INTERNAL pmpd_status pmpd_platform_read_file(const char *path, void *buffer, size_t size)
{
    (void)path;
    (void)buffer;
    (void)size;
    return PMPD_ERR_UNSUPPORTED;
}

PMPD_INTERNAL pmpd_status pmpd_platform_sync_file(const char *path)
{
    (void)path;
    return PMPD_OK;
}

PMPD_INTERNAL uint64_t pmpd_platform_now_ns(void)
{
    return 0;
}

PMPD_INTERNAL pmpd_status pmpd_platform_request_amx(void)
{
    return PMPD_OK;
}

PMPD_INTERNAL int pmpd_platform_cpu_count(void)
{
    return 1;
}

PMPD_INTERNAL pmpd_status pmpd_thread_start(pmpd_thread *thread, pmpd_thread_fn fn, void *arg, size_t stack_bytes)
{
    (void)thread;
    (void)fn;
    (void)arg;
    (void)stack_bytes;
    return PMPD_ERR_UNSUPPORTED;
}

PMPD_INTERNAL void pmpd_thread_join(pmpd_thread *thread)
{
    (void)thread;
}

/* Without threads there is nothing to exclude or wait for. */
PMPD_INTERNAL pmpd_status pmpd_mutex_init(pmpd_mutex *mutex)
{
    (void)mutex;
    return PMPD_OK;
}

PMPD_INTERNAL void pmpd_mutex_destroy(pmpd_mutex *mutex)
{
    (void)mutex;
}

PMPD_INTERNAL void pmpd_mutex_lock(pmpd_mutex *mutex)
{
    (void)mutex;
}

PMPD_INTERNAL void pmpd_mutex_unlock(pmpd_mutex *mutex)
{
    (void)mutex;
}

PMPD_INTERNAL pmpd_status pmpd_cond_init(pmpd_cond *cond)
{
    (void)cond;
    return PMPD_OK;
}

PMPD_INTERNAL void pmpd_cond_destroy(pmpd_cond *cond)
{
    (void)cond;
}

PMPD_INTERNAL void pmpd_cond_wait(pmpd_cond *cond, pmpd_mutex *mutex)
{
    (void)cond;
    (void)mutex;
}

PMPD_INTERNAL void pmpd_cond_broadcast(pmpd_cond *cond)
{
    (void)cond;
}

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int pmpd_platform_none_unused;
#endif
