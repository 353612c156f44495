/*
 * The schedule trace of a session (pmpd_session_trace): the worker pool
 * timestamps every share of every job it runs and appends one event per
 * share to a fixed array in the arena; the code that posts a job names it
 * first (pmpd_trace_label).  Without a trace the pool records nothing and
 * reads no clock.
 */
#ifndef PMPD_EXEC_TRACE_H
#define PMPD_EXEC_TRACE_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"

typedef struct pmpd_trace {
    pmpd_trace_event *events;
    size_t capacity;
    unsigned long claimed; /* events appended or dropped (atomic; may exceed capacity) */
    /* The label of the jobs posted next: set by the posting thread before
     * the job is published, read by the threads that run it. */
    const char *name;
    uint32_t name_length;
    uint32_t layer;
    uint32_t chunk;
    const char *category;
} pmpd_trace;

/* Arena bytes of a trace of capacity events (0 for none). */
PMPD_INTERNAL pmpd_status pmpd_trace_plan(size_t capacity, size_t *bytes);

/* A trace of capacity events in the arena; *out is NULL when capacity is
 * 0.  Errors: PMPD_ERR_OUT_OF_MEMORY, PMPD_ERR_OVERFLOW. */
PMPD_INTERNAL pmpd_status pmpd_trace_create(pmpd_arena *arena, size_t capacity, pmpd_trace **out);

/* Names the jobs posted from now on (trace may be NULL: no effect).
 * category is a NUL-terminated constant. */
PMPD_INTERNAL void pmpd_trace_label(pmpd_trace *trace, const char *name, uint32_t name_length,
                                    const char *category);
PMPD_INTERNAL void pmpd_trace_layer(pmpd_trace *trace, uint32_t layer);
/* The prompt chunk of the jobs posted from now on (PMPD_TRACE_NO_CHUNK
 * outside a prefill). */
PMPD_INTERNAL void pmpd_trace_chunk(pmpd_trace *trace, uint32_t chunk);

/* Appends one event under the current label; thread-safe. */
PMPD_INTERNAL void pmpd_trace_record(pmpd_trace *trace, unsigned thread, uint64_t begin_ns, uint64_t end_ns);

/* Appends one event under the label given (the out-of-order prefill's
 * steps run side by side, so no single current label fits); thread-safe. */
PMPD_INTERNAL void pmpd_trace_record_as(pmpd_trace *trace, unsigned thread, uint64_t begin_ns, uint64_t end_ns,
                                        const char *name, uint32_t name_length, uint32_t layer,
                                        const char *category, uint32_t chunk);

PMPD_INTERNAL size_t pmpd_trace_count(const pmpd_trace *trace);
PMPD_INTERNAL size_t pmpd_trace_dropped(const pmpd_trace *trace);
PMPD_INTERNAL void pmpd_trace_clear(pmpd_trace *trace);

#endif
