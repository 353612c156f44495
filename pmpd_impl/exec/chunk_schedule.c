#include "pmpd_impl/exec/chunk_schedule.h"

#include "pmpd_impl/exec/trace.h"
#include "platform/platform.h"

#define PMPD_CHUNK_FREE ((size_t)-1)

typedef struct pmpd_chunk_slot {
    size_t chunk;        /* the chunk in flight here, or PMPD_CHUNK_FREE */
    size_t step;         /* its current step */
    pmpd_chunk_step info; /* of the current step */
    size_t claimed, done; /* tiles of the current step */
} pmpd_chunk_slot;

struct pmpd_chunk_schedule {
    unsigned n_slots;
    pmpd_chunk_slot *slots;
    /* A ticket lock guards everything below and the slots: held for a few
     * dozen instructions per tile, while a tile is a product of dozens of
     * rows.  Threads with nothing ready spin on epoch (bumped whenever a
     * step finishes) without touching the lock. */
    unsigned long lock_next, lock_serving, epoch;
    /* The run in progress. */
    const pmpd_chunk_program *program;
    unsigned n_threads, float_threads;
    size_t next_chunk, chunks_done;
    pmpd_chunk_label_fn label;
    pmpd_trace *trace;
};

static size_t pmpd_chunk_round(size_t bytes)
{
    return (bytes + PMPD_ARENA_ALIGNMENT - 1) / PMPD_ARENA_ALIGNMENT * PMPD_ARENA_ALIGNMENT;
}

static pmpd_status pmpd_chunk_schedule_allocate(pmpd_arena *arena, unsigned n_slots, pmpd_chunk_schedule **out)
{
    void *head, *slots;
    pmpd_status st;
    if (n_slots == 0 || n_slots > 64)
        return PMPD_ERR_INVALID_ARGUMENT;
    st = pmpd_arena_alloc(arena, pmpd_chunk_round(sizeof(pmpd_chunk_schedule)), PMPD_ARENA_ALIGNMENT, &head);
    if (st == PMPD_OK)
        st = pmpd_arena_alloc(arena, pmpd_chunk_round(n_slots * sizeof(pmpd_chunk_slot)), PMPD_ARENA_ALIGNMENT,
                              &slots);
    if (st != PMPD_OK)
        return st;
    *out = (pmpd_chunk_schedule *)head;
    if (head) /* NULL in a measuring arena */
        (*out)->slots = (pmpd_chunk_slot *)slots;
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_chunk_schedule_create(pmpd_arena *arena, unsigned n_slots, pmpd_chunk_schedule **out)
{
    pmpd_chunk_schedule *s;
    pmpd_status st = pmpd_chunk_schedule_allocate(arena, n_slots, &s);
    *out = NULL;
    if (st != PMPD_OK || !s) /* s is NULL in a measuring arena */
        return st;
    s->n_slots = n_slots;
    s->lock_next = s->lock_serving = s->epoch = 0;
    *out = s;
    return PMPD_OK;
}

static void pmpd_chunk_lock(pmpd_chunk_schedule *s)
{
    unsigned long ticket = pmpd_atomic_add(&s->lock_next, 1) - 1;
    while (pmpd_atomic_load(&s->lock_serving) != ticket)
        pmpd_cpu_relax();
}

static void pmpd_chunk_unlock(pmpd_chunk_schedule *s)
{
    pmpd_atomic_store(&s->lock_serving, pmpd_atomic_load(&s->lock_serving) + 1);
}

static void pmpd_chunk_enter_step(pmpd_chunk_schedule *s, pmpd_chunk_slot *slot, size_t step)
{
    slot->step = step;
    slot->claimed = slot->done = 0;
    s->program->describe(s->program->ctx, slot->chunk, step, &slot->info);
}

/* Chunks enter their slots in order, so when a step asks whether the
 * previous chunk is far enough, that chunk has entered: either it is still
 * in its slot, or it is done. */
static void pmpd_chunk_admit(pmpd_chunk_schedule *s)
{
    while (s->next_chunk < s->program->n_chunks) {
        pmpd_chunk_slot *slot = &s->slots[s->next_chunk % s->n_slots];
        if (slot->chunk != PMPD_CHUNK_FREE)
            return;
        slot->chunk = s->next_chunk++;
        pmpd_chunk_enter_step(s, slot, 0);
    }
}

static int pmpd_chunk_ready(const pmpd_chunk_schedule *s, const pmpd_chunk_slot *slot)
{
    const pmpd_chunk_slot *previous;
    if (slot->info.after_previous == PMPD_CHUNK_NO_WAIT || slot->chunk == 0)
        return 1;
    previous = &s->slots[(slot->chunk - 1) % s->n_slots];
    return previous->chunk != slot->chunk - 1 || previous->step > slot->info.after_previous;
}

/* The slot whose current step thread should take a tile of next, or -1. */
static int pmpd_chunk_pick(const pmpd_chunk_schedule *s, unsigned thread)
{
    int serves_int8 = s->float_threads == 0 || thread < s->n_threads - s->float_threads;
    int serves_float = s->float_threads == 0 || !serves_int8;
    int best = -1;
    unsigned i;
    for (i = 0; i < s->n_slots; i++) {
        const pmpd_chunk_slot *slot = &s->slots[i], *b;
        if (slot->chunk == PMPD_CHUNK_FREE || slot->claimed == slot->info.tiles || !pmpd_chunk_ready(s, slot))
            continue;
        if (slot->info.lane == PMPD_LANE_FLOAT ? !serves_float : !serves_int8)
            continue;
        if (best < 0) {
            best = (int)i;
            continue;
        }
        b = &s->slots[best];
        if (slot->info.lane != b->info.lane) {
            if (slot->info.lane == PMPD_LANE_FLOAT)
                best = (int)i;
        } else if (slot->info.lane == PMPD_LANE_FLOAT && slot->info.unlocks != b->info.unlocks) {
            if (slot->info.unlocks > b->info.unlocks)
                best = (int)i;
        } else if (slot->chunk < b->chunk) {
            best = (int)i;
        }
    }
    return best;
}

static void pmpd_chunk_finish_tile(pmpd_chunk_schedule *s, pmpd_chunk_slot *slot)
{
    if (++slot->done < slot->info.tiles)
        return;
    if (slot->step + 1 < s->program->n_steps) {
        pmpd_chunk_enter_step(s, slot, slot->step + 1);
    } else {
        slot->chunk = PMPD_CHUNK_FREE;
        s->chunks_done++;
        pmpd_chunk_admit(s);
    }
    pmpd_atomic_add(&s->epoch, 1);
}

static void pmpd_chunk_run_tile(pmpd_chunk_schedule *s, size_t chunk, size_t step, size_t tile, unsigned thread)
{
    const pmpd_chunk_program *p = s->program;
    const char *name = "", *category = "";
    uint32_t name_length = 0, layer = PMPD_TRACE_NO_LAYER;
    uint64_t begin;
    if (!s->trace) {
        p->run(p->ctx, chunk, step, tile, thread);
        return;
    }
    begin = pmpd_platform_now_ns();
    p->run(p->ctx, chunk, step, tile, thread);
    if (s->label)
        s->label(p->ctx, chunk, step, &name, &name_length, &layer, &category);
    pmpd_trace_record_as(s->trace, thread, begin, pmpd_platform_now_ns(), name, name_length, layer, category,
                         (uint32_t)chunk);
}

static void pmpd_chunk_thread(void *ctx, size_t begin, size_t end, unsigned thread)
{
    pmpd_chunk_schedule *s = (pmpd_chunk_schedule *)ctx;
    (void)begin;
    (void)end;
    pmpd_chunk_lock(s);
    while (s->chunks_done < s->program->n_chunks) {
        int i = pmpd_chunk_pick(s, thread);
        pmpd_chunk_slot *slot;
        size_t chunk, step, tile;
        if (i < 0) {
            unsigned long seen = pmpd_atomic_load(&s->epoch);
            pmpd_chunk_unlock(s);
            while (pmpd_atomic_load(&s->epoch) == seen)
                pmpd_cpu_relax();
            pmpd_chunk_lock(s);
            continue;
        }
        slot = &s->slots[i];
        chunk = slot->chunk;
        step = slot->step;
        tile = slot->claimed++;
        pmpd_chunk_unlock(s);
        pmpd_chunk_run_tile(s, chunk, step, tile, thread);
        pmpd_chunk_lock(s);
        pmpd_chunk_finish_tile(s, slot);
    }
    pmpd_chunk_unlock(s);
}

PMPD_INTERNAL void pmpd_chunk_schedule_run(pmpd_chunk_schedule *schedule, const pmpd_chunk_program *program,
                                           pmpd_pool *pool, unsigned float_threads, pmpd_chunk_label_fn label)
{
    unsigned i, n_threads = pmpd_pool_threads(pool);
    if (program->n_chunks == 0 || program->n_steps == 0)
        return;
    schedule->program = program;
    schedule->n_threads = n_threads;
    schedule->float_threads = float_threads < n_threads ? float_threads : 0;
    schedule->next_chunk = schedule->chunks_done = 0;
    schedule->label = label;
    schedule->trace = pmpd_pool_get_trace(pool);
    for (i = 0; i < schedule->n_slots; i++)
        schedule->slots[i].chunk = PMPD_CHUNK_FREE;
    pmpd_chunk_admit(schedule);
    /* One item per thread: each thread runs the scheduling loop once.  The
     * pool's own trace would record that loop as one event, so the tiles
     * are recorded here instead. */
    pmpd_pool_set_trace(pool, NULL);
    pmpd_pool_run(pool, pmpd_chunk_thread, schedule, n_threads, 1);
    pmpd_pool_set_trace(pool, schedule->trace);
}
