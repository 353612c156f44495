#include "pmpd_impl/exec/trace.h"

#include "pmpd_impl/core/checked.h"
#include "platform/platform.h"

/* Both blocks are rounded to PMPD_ARENA_ALIGNMENT so the session's planned
 * figure stays a sum of aligned parts. */
static size_t pmpd_trace_round(size_t bytes)
{
    return (bytes + PMPD_ARENA_ALIGNMENT - 1) / PMPD_ARENA_ALIGNMENT * PMPD_ARENA_ALIGNMENT;
}

PMPD_INTERNAL pmpd_status pmpd_trace_plan(size_t capacity, size_t *bytes)
{
    size_t events;
    *bytes = 0;
    if (capacity == 0)
        return PMPD_OK;
    if (!pmpd_checked_mul(capacity, sizeof(pmpd_trace_event), &events) ||
        events > SIZE_MAX - 2 * PMPD_ARENA_ALIGNMENT - sizeof(pmpd_trace))
        return PMPD_ERR_OVERFLOW;
    *bytes = pmpd_trace_round(sizeof(pmpd_trace)) + pmpd_trace_round(events);
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_trace_create(pmpd_arena *arena, size_t capacity, pmpd_trace **out)
{
    size_t bytes;
    void *head, *events;
    pmpd_status st = pmpd_trace_plan(capacity, &bytes);
    *out = NULL;
    if (st != PMPD_OK || capacity == 0)
        return st;
    st = pmpd_arena_alloc(arena, pmpd_trace_round(sizeof(pmpd_trace)), PMPD_ARENA_ALIGNMENT, &head);
    if (st == PMPD_OK)
        st = pmpd_arena_alloc(arena, pmpd_trace_round(capacity * sizeof(pmpd_trace_event)), PMPD_ARENA_ALIGNMENT,
                              &events);
    if (st != PMPD_OK)
        return st;
    *out = (pmpd_trace *)head;
    (*out)->events = (pmpd_trace_event *)events;
    (*out)->capacity = capacity;
    (*out)->claimed = 0;
    pmpd_trace_label(*out, "", 0, "");
    pmpd_trace_layer(*out, PMPD_TRACE_NO_LAYER);
    pmpd_trace_chunk(*out, PMPD_TRACE_NO_CHUNK);
    return PMPD_OK;
}

PMPD_INTERNAL void pmpd_trace_label(pmpd_trace *trace, const char *name, uint32_t name_length,
                                    const char *category)
{
    if (!trace)
        return;
    trace->name = name;
    trace->name_length = name_length;
    trace->category = category;
}

PMPD_INTERNAL void pmpd_trace_layer(pmpd_trace *trace, uint32_t layer)
{
    if (trace)
        trace->layer = layer;
}

PMPD_INTERNAL void pmpd_trace_chunk(pmpd_trace *trace, uint32_t chunk)
{
    if (trace)
        trace->chunk = chunk;
}

PMPD_INTERNAL void pmpd_trace_record_as(pmpd_trace *trace, unsigned thread, uint64_t begin_ns, uint64_t end_ns,
                                        const char *name, uint32_t name_length, uint32_t layer,
                                        const char *category, uint32_t chunk)
{
    unsigned long slot = pmpd_atomic_add(&trace->claimed, 1) - 1;
    pmpd_trace_event *e;
    if (slot >= trace->capacity)
        return;
    e = &trace->events[slot];
    e->name = name;
    e->name_length = name_length;
    e->layer = layer;
    e->category = category;
    e->chunk = chunk;
    e->thread = thread;
    e->begin_ns = begin_ns;
    e->end_ns = end_ns;
}

PMPD_INTERNAL void pmpd_trace_record(pmpd_trace *trace, unsigned thread, uint64_t begin_ns, uint64_t end_ns)
{
    pmpd_trace_record_as(trace, thread, begin_ns, end_ns, trace->name, trace->name_length, trace->layer,
                         trace->category, trace->chunk);
}

PMPD_INTERNAL size_t pmpd_trace_count(const pmpd_trace *trace)
{
    unsigned long claimed;
    if (!trace)
        return 0;
    claimed = pmpd_atomic_load(&trace->claimed);
    return claimed < trace->capacity ? (size_t)claimed : trace->capacity;
}

PMPD_INTERNAL size_t pmpd_trace_dropped(const pmpd_trace *trace)
{
    unsigned long claimed;
    if (!trace)
        return 0;
    claimed = pmpd_atomic_load(&trace->claimed);
    return claimed > trace->capacity ? (size_t)(claimed - trace->capacity) : 0;
}

PMPD_INTERNAL void pmpd_trace_clear(pmpd_trace *trace)
{
    if (trace)
        pmpd_atomic_store(&trace->claimed, 0);
}
