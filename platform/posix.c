/* POSIX port: mmap for model files (unless PMPD_USE_MMAP=0), CLOCK_MONOTONIC,
 * pthreads. */
#include "pmpd_impl/core/config.h"

#if PMPD_PLATFORM_POSIX

#if !defined(_POSIX_C_SOURCE) || _POSIX_C_SOURCE < 200809L
#undef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#if PMPD_USE_MMAP
#include <sys/mman.h>
#endif
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "platform/platform.h"

typedef char pmpd_posix_thread_fits[sizeof(pthread_t) <= sizeof(((pmpd_thread *)0)->opaque) ? 1 : -1];
typedef char pmpd_posix_mutex_fits[sizeof(pthread_mutex_t) <= sizeof(((pmpd_mutex *)0)->opaque) ? 1 : -1];
typedef char pmpd_posix_cond_fits[sizeof(pthread_cond_t) <= sizeof(((pmpd_cond *)0)->opaque) ? 1 : -1];

static pmpd_status pmpd_posix_open_status(void)
{
    return errno == ENOENT || errno == ENOTDIR ? PMPD_ERR_NOT_FOUND : PMPD_ERR_IO;
}

PMPD_INTERNAL pmpd_status pmpd_platform_file_size(const char *path, uint64_t *size)
{
    struct stat st;
    if (!path || !size)
        return PMPD_ERR_INVALID_ARGUMENT;
    if (stat(path, &st) != 0)
        return pmpd_posix_open_status();
    if (!S_ISREG(st.st_mode) || st.st_size < 0)
        return PMPD_ERR_IO;
    *size = (uint64_t)st.st_size;
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_platform_read_file(const char *path, void *buffer, size_t size)
{
    unsigned char *dst = (unsigned char *)buffer;
    size_t done = 0;
    int fd;
    if (!path || (!buffer && size))
        return PMPD_ERR_INVALID_ARGUMENT;
    fd = open(path, O_RDONLY);
    if (fd < 0)
        return pmpd_posix_open_status();
    while (done < size) {
        ssize_t got = read(fd, dst + done, size - done);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            close(fd);
            return PMPD_ERR_IO;
        }
        done += (size_t)got;
    }
    close(fd);
    return PMPD_OK;
}

#if PMPD_USE_MMAP
PMPD_INTERNAL pmpd_status pmpd_platform_map_file(const char *path, pmpd_mapped_file *out)
{
    struct stat st;
    void *mapping;
    int fd;
    if (!path || !out)
        return PMPD_ERR_INVALID_ARGUMENT;
    out->data = NULL;
    out->size = 0;
    out->is_mapped = 0;
    fd = open(path, O_RDONLY);
    if (fd < 0)
        return pmpd_posix_open_status();
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 0) {
        close(fd);
        return PMPD_ERR_IO;
    }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return PMPD_ERR_OVERFLOW;
    }
    if (st.st_size == 0) {
        /* mmap refuses empty files; an empty view is still a valid answer. */
        close(fd);
        out->data = (const unsigned char *)"";
        return PMPD_OK;
    }
    mapping = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (mapping == MAP_FAILED)
        return PMPD_ERR_UNSUPPORTED;
    out->data = (const unsigned char *)mapping;
    out->size = (size_t)st.st_size;
    out->is_mapped = 1;
    return PMPD_OK;
}

PMPD_INTERNAL void pmpd_platform_unmap_file(pmpd_mapped_file *file)
{
    if (!file)
        return;
    if (file->is_mapped)
        munmap((void *)(uintptr_t)file->data, file->size);
    file->data = NULL;
    file->size = 0;
    file->is_mapped = 0;
}
#else
/* Built without mapping: pmpd_model_open_file reads the file into the arena. */
PMPD_INTERNAL pmpd_status pmpd_platform_map_file(const char *path, pmpd_mapped_file *out)
{
    if (!path || !out)
        return PMPD_ERR_INVALID_ARGUMENT;
    out->data = NULL;
    out->size = 0;
    out->is_mapped = 0;
    return PMPD_ERR_UNSUPPORTED;
}

PMPD_INTERNAL void pmpd_platform_unmap_file(pmpd_mapped_file *file)
{
    (void)file;
}
#endif

PMPD_INTERNAL pmpd_status pmpd_platform_sync_file(const char *path)
{
    int fd, synced, sync_errno;
    if (!path)
        return PMPD_ERR_INVALID_ARGUMENT;
    fd = open(path, O_RDONLY);
    if (fd < 0)
        return pmpd_posix_open_status();
    synced = fsync(fd) == 0;
    sync_errno = errno;
    close(fd);
    errno = sync_errno; /* the caller's message names fsync's reason */
    return synced ? PMPD_OK : PMPD_ERR_IO;
}

PMPD_INTERNAL uint64_t pmpd_platform_now_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#if PMPD_USE_AMX && defined(__linux__) && defined(__x86_64__)
/* arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), issued directly:
 * the libc wrapper syscall() is outside POSIX, which this file asks for. */
static long pmpd_posix_request_tile_data(void)
{
    long result;
    __asm__ volatile("syscall" : "=a"(result) : "a"(158L), "D"(0x1023L), "S"(18L) : "rcx", "r11", "memory");
    return result;
}

PMPD_INTERNAL pmpd_status pmpd_platform_request_amx(void)
{
    /* 0: not asked yet, 1: granted, 2: refused.  Two threads asking at
     * once both ask; the request is idempotent. */
    static unsigned long state;
    unsigned long known = pmpd_atomic_load(&state);
    if (!known) {
        known = pmpd_posix_request_tile_data() == 0 ? 1 : 2;
        pmpd_atomic_store(&state, known);
    }
    return known == 1 ? PMPD_OK : PMPD_ERR_UNSUPPORTED;
}
#else
PMPD_INTERNAL pmpd_status pmpd_platform_request_amx(void)
{
    return PMPD_USE_AMX ? PMPD_ERR_UNSUPPORTED : PMPD_OK;
}
#endif

PMPD_INTERNAL int pmpd_platform_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (n > 4096 ? 4096 : (int)n);
}

static void *pmpd_posix_trampoline(void *raw)
{
    pmpd_thread *thread = (pmpd_thread *)raw;
    thread->fn(thread->arg);
    return NULL;
}

PMPD_INTERNAL pmpd_status pmpd_thread_start(pmpd_thread *thread, pmpd_thread_fn fn, void *arg, size_t stack_bytes)
{
    pthread_attr_t attr;
    int failed;
    if (!thread || !fn)
        return PMPD_ERR_INVALID_ARGUMENT;
    thread->fn = fn;
    thread->arg = arg;
    if (pthread_attr_init(&attr) != 0)
        return PMPD_ERR_THREAD;
    /* Below PTHREAD_STACK_MIN (or not a size the system takes) this fails:
     * no thread rather than a stack other than the one asked for. */
    failed = stack_bytes != 0 && pthread_attr_setstacksize(&attr, stack_bytes) != 0;
    if (!failed)
        failed = pthread_create((pthread_t *)(void *)thread->opaque.bytes, &attr, pmpd_posix_trampoline, thread) != 0;
    pthread_attr_destroy(&attr);
    return failed ? PMPD_ERR_THREAD : PMPD_OK;
}

PMPD_INTERNAL void pmpd_thread_join(pmpd_thread *thread)
{
    if (thread)
        pthread_join(*(pthread_t *)(void *)thread->opaque.bytes, NULL);
}

PMPD_INTERNAL pmpd_status pmpd_mutex_init(pmpd_mutex *mutex)
{
    return pthread_mutex_init((pthread_mutex_t *)(void *)mutex->opaque.bytes, NULL) == 0 ? PMPD_OK
                                                                                      : PMPD_ERR_THREAD;
}

PMPD_INTERNAL void pmpd_mutex_destroy(pmpd_mutex *mutex)
{
    pthread_mutex_destroy((pthread_mutex_t *)(void *)mutex->opaque.bytes);
}

PMPD_INTERNAL void pmpd_mutex_lock(pmpd_mutex *mutex)
{
    pthread_mutex_lock((pthread_mutex_t *)(void *)mutex->opaque.bytes);
}

PMPD_INTERNAL void pmpd_mutex_unlock(pmpd_mutex *mutex)
{
    pthread_mutex_unlock((pthread_mutex_t *)(void *)mutex->opaque.bytes);
}

PMPD_INTERNAL pmpd_status pmpd_cond_init(pmpd_cond *cond)
{
    return pthread_cond_init((pthread_cond_t *)(void *)cond->opaque.bytes, NULL) == 0 ? PMPD_OK
                                                                                   : PMPD_ERR_THREAD;
}

PMPD_INTERNAL void pmpd_cond_destroy(pmpd_cond *cond)
{
    pthread_cond_destroy((pthread_cond_t *)(void *)cond->opaque.bytes);
}

PMPD_INTERNAL void pmpd_cond_wait(pmpd_cond *cond, pmpd_mutex *mutex)
{
    pthread_cond_wait((pthread_cond_t *)(void *)cond->opaque.bytes,
                      (pthread_mutex_t *)(void *)mutex->opaque.bytes);
}

PMPD_INTERNAL void pmpd_cond_broadcast(pmpd_cond *cond)
{
    pthread_cond_broadcast((pthread_cond_t *)(void *)cond->opaque.bytes);
}

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int pmpd_platform_posix_unused;
#endif
