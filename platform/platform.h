/*
 * The porting layer: the only part of pmpd that talks to an operating
 * system.  Nothing outside platform/ includes an OS header.
 *
 * Two ports ship with pmpd, chosen at compile time (pmpd_impl/core/config.h):
 *   posix.c  files through mmap (read() into the arena where mmap fails or is
 *            compiled out with PMPD_USE_MMAP=0), CLOCK_MONOTONIC, pthreads;
 *   none.c   no filesystem and no threads, for firmware that links the model
 *            into flash and opens it from memory.
 * A new port implements the functions below in a file of its own.
 *
 * Thread objects are opaque, fixed-size and caller-owned, so no port needs
 * the heap.
 */
#ifndef PMPD_PLATFORM_H
#define PMPD_PLATFORM_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"

/* ---- files ---- */

/* A read-only view of a whole file. */
typedef struct pmpd_mapped_file {
    const unsigned char *data;
    size_t size;
    int is_mapped; /* 1: data is an OS mapping that unmap releases */
} pmpd_mapped_file;

/* Maps path read-only.  Errors: PMPD_ERR_NOT_FOUND, PMPD_ERR_IO,
 * PMPD_ERR_OVERFLOW (file larger than the address space),
 * PMPD_ERR_UNSUPPORTED (no filesystem, or mapping not available: use
 * pmpd_platform_file_size and pmpd_platform_read_file instead). */
PMPD_INTERNAL pmpd_status pmpd_platform_map_file(const char *path, pmpd_mapped_file *out);
PMPD_INTERNAL void pmpd_platform_unmap_file(pmpd_mapped_file *file);

/* Size of the file at path, and a read of its first size bytes into a
 * caller buffer (for ports without mmap: the loader reads into the arena). */
PMPD_INTERNAL pmpd_status pmpd_platform_file_size(const char *path, uint64_t *size);
PMPD_INTERNAL pmpd_status pmpd_platform_read_file(const char *path, void *buffer, size_t size);

/* Writes a finished file's data out to the disk (fsync): the offline
 * writers call it on "<path>.tmp" before renaming it over path, so a power
 * cut leaves the old file or the whole new one, never an empty one.
 * Errors: PMPD_ERR_NOT_FOUND, PMPD_ERR_IO (errno says why); the none port,
 * which has no files of its own, returns PMPD_OK. */
PMPD_INTERNAL pmpd_status pmpd_platform_sync_file(const char *path);

/* ---- time ---- */

/* Monotonic nanoseconds since an arbitrary origin (0 where no clock exists). */
PMPD_INTERNAL uint64_t pmpd_platform_now_ns(void);

/* ---- processor state ---- */

/* Asks the OS for the AMX tile state this process's W8A8 kernel uses
 * (Linux hands it out only on request, then to every thread).  Cheap
 * after the first call; safe from several threads.  Errors:
 * PMPD_ERR_UNSUPPORTED (the OS refuses or predates AMX).  The none port
 * returns PMPD_OK: firmware that runs AMX code has enabled it itself. */
PMPD_INTERNAL pmpd_status pmpd_platform_request_amx(void);

/* ---- threads ---- */

/* Number of processors available to this process (1 if unknown). */
PMPD_INTERNAL int pmpd_platform_cpu_count(void);

typedef void (*pmpd_thread_fn)(void *arg);

/* fn and arg are kept here so ports whose native entry signature differs
 * can trampoline without allocating; the pmpd_thread must outlive the thread. */
typedef struct pmpd_thread {
    pmpd_thread_fn fn;
    void *arg;
    union {
        void *align_pointer;
        uint64_t align_u64;
        unsigned char bytes[16];
    } opaque;
} pmpd_thread;

typedef struct pmpd_mutex {
    union {
        void *align_pointer;
        uint64_t align_u64;
        unsigned char bytes[64];
    } opaque;
} pmpd_mutex;

typedef struct pmpd_cond {
    union {
        void *align_pointer;
        uint64_t align_u64;
        unsigned char bytes[64];
    } opaque;
} pmpd_cond;

/* Starts fn(arg) on a new thread with a stack of stack_bytes (0: the
 * system's default size).  PMPD_ERR_THREAD on failure (a stack size the
 * system refuses included), PMPD_ERR_UNSUPPORTED on ports without
 * threads. */
PMPD_INTERNAL pmpd_status pmpd_thread_start(pmpd_thread *thread, pmpd_thread_fn fn, void *arg, size_t stack_bytes);
PMPD_INTERNAL void pmpd_thread_join(pmpd_thread *thread);

PMPD_INTERNAL pmpd_status pmpd_mutex_init(pmpd_mutex *mutex);
PMPD_INTERNAL void pmpd_mutex_destroy(pmpd_mutex *mutex);
PMPD_INTERNAL void pmpd_mutex_lock(pmpd_mutex *mutex);
PMPD_INTERNAL void pmpd_mutex_unlock(pmpd_mutex *mutex);

PMPD_INTERNAL pmpd_status pmpd_cond_init(pmpd_cond *cond);
PMPD_INTERNAL void pmpd_cond_destroy(pmpd_cond *cond);
PMPD_INTERNAL void pmpd_cond_wait(pmpd_cond *cond, pmpd_mutex *mutex);
PMPD_INTERNAL void pmpd_cond_broadcast(pmpd_cond *cond);

/* Words the worker pool's threads share without the mutex (a posted job's
 * generation, the count of shares pending, a trace's event count):
 * sequentially consistent loads, stores, addition and subtraction, so a
 * thread that waits can spin on them without taking a lock every poll.
 * GCC and clang builtins; a port without threads needs none. */
#if defined(__GNUC__) || defined(__clang__)
static inline unsigned long pmpd_atomic_load(const unsigned long *p)
{
    return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}
static inline void pmpd_atomic_store(unsigned long *p, unsigned long v)
{
    __atomic_store_n(p, v, __ATOMIC_SEQ_CST);
}
/* *p -= v; returns the new value. */
static inline unsigned long pmpd_atomic_sub(unsigned long *p, unsigned long v)
{
    return __atomic_sub_fetch(p, v, __ATOMIC_SEQ_CST);
}
/* *p += v; returns the new value. */
static inline unsigned long pmpd_atomic_add(unsigned long *p, unsigned long v)
{
    return __atomic_add_fetch(p, v, __ATOMIC_SEQ_CST);
}
#elif PMPD_PLATFORM_NONE
static inline unsigned long pmpd_atomic_load(const unsigned long *p)
{
    return *p;
}
static inline void pmpd_atomic_store(unsigned long *p, unsigned long v)
{
    *p = v;
}
static inline unsigned long pmpd_atomic_sub(unsigned long *p, unsigned long v)
{
    return *p -= v;
}
static inline unsigned long pmpd_atomic_add(unsigned long *p, unsigned long v)
{
    return *p += v;
}
#else
#error "the worker pool needs atomic operations: build with GCC or clang, or with PMPD_PLATFORM_NONE"
#endif

/* A spinning thread's hint to the core (x86 pause, Arm yield). */
static inline void pmpd_cpu_relax(void)
{
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
    __builtin_ia32_pause();
#elif (defined(__GNUC__) || defined(__clang__)) && (defined(__aarch64__) || defined(__arm__))
    __asm__ __volatile__("yield");
#endif
}

#endif
