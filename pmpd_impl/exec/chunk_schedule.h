/*
 * Out-of-order execution of a chunked prefill (seed 004): the prompt is cut
 * into chunks, each chunk runs the same chain of steps (per layer: norm,
 * quantize, products, attention, ...), and up to n_slots chunks are in
 * flight at once, each in its own slot of buffers.  Inside a chunk the
 * steps run in order; across chunks the only edges are the ones the
 * program names (a chunk's attention needs the previous chunk's keys and
 * values at that layer) and slot reuse (chunk c + n_slots starts when
 * chunk c is done).  So the graph of (chunk, step) nodes is a set of
 * chains with cross edges, and its ready set is at most one node per slot.
 *
 * A step is split into tiles (row ranges of a product, token ranges of an
 * element-wise step) and every thread of the pool takes tiles of whichever
 * ready step its lane allows.  Lanes: a step is int8 (a matrix product on
 * the integer units, or an NPU delegate) or float (everything else).  With
 * float_threads == 0 every thread serves both lanes; otherwise the last
 * float_threads threads serve only the float lane and the others only the
 * int8 lane.  The pick rule keeps the int8 lane fed: a thread that may run
 * float work takes a ready float step first, the one whose completion
 * unlocks the most int8 work (then the oldest chunk); otherwise int8 tiles
 * of the oldest chunk.
 *
 * Results do not depend on the schedule as long as each tile computes the
 * same numbers whichever thread runs it and whenever (the program's job).
 * All state lives in the arena; the threads are the pool's.
 */
#ifndef PMPD_EXEC_CHUNK_SCHEDULE_H
#define PMPD_EXEC_CHUNK_SCHEDULE_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/exec/pool.h"

#define PMPD_LANE_INT8 0u
#define PMPD_LANE_FLOAT 1u
#define PMPD_CHUNK_NO_WAIT ((size_t)-1)

/* What the scheduler needs to know about step `step` of a chunk. */
typedef struct pmpd_chunk_step {
    unsigned lane;        /* PMPD_LANE_INT8 or PMPD_LANE_FLOAT */
    size_t tiles;         /* >= 1 */
    uint64_t unlocks;     /* int8 work (multiply-adds) this step's completion
                             brings within reach: the float lane's priority */
    size_t after_previous; /* the step the previous chunk must have finished
                              before this one starts, or PMPD_CHUNK_NO_WAIT */
} pmpd_chunk_step;

typedef struct pmpd_chunk_program {
    void *ctx;
    size_t n_chunks;
    size_t n_steps; /* per chunk */
    void (*describe)(void *ctx, size_t chunk, size_t step, pmpd_chunk_step *out);
    /* Runs one tile of a step of chunk (in slot chunk % n_slots) on pool
     * thread `thread`. */
    void (*run)(void *ctx, size_t chunk, size_t step, size_t tile, unsigned thread);
} pmpd_chunk_program;

typedef struct pmpd_chunk_schedule pmpd_chunk_schedule;

/* A schedule in the arena (*out stays NULL in a measuring arena, which
 * only counts the bytes, so planning and creation share one call; both
 * blocks are whole multiples of PMPD_ARENA_ALIGNMENT).  Errors: PMPD_ERR_INVALID_ARGUMENT (n_slots 0 or
 * above 64), PMPD_ERR_OUT_OF_MEMORY. */
PMPD_INTERNAL pmpd_status pmpd_chunk_schedule_create(pmpd_arena *arena, unsigned n_slots, pmpd_chunk_schedule **out);

/* Runs every step of every chunk of program over all of pool's threads and
 * returns when all are done.  float_threads < the pool's threads (0: every
 * thread serves both lanes).  With a trace, every tile is recorded under
 * the name, layer and category label() gives (label may be NULL). */
typedef void (*pmpd_chunk_label_fn)(void *ctx, size_t chunk, size_t step, const char **name, uint32_t *name_length,
                                    uint32_t *layer, const char **category);
PMPD_INTERNAL void pmpd_chunk_schedule_run(pmpd_chunk_schedule *schedule, const pmpd_chunk_program *program,
                                           pmpd_pool *pool, unsigned float_threads, pmpd_chunk_label_fn label);

#endif
