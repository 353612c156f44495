/* A .pmpd file opened by a command-line tool (pmpd-run, pmpd-eval): the
 * model's bookkeeping in a malloc'ed arena (the weights stay mapped), and a
 * readable message on stderr when the file is not a usable model. */
#ifndef PMPD_EXAMPLES_MODEL_FILE_H
#define PMPD_EXAMPLES_MODEL_FILE_H

#include "pmpd.h"

typedef struct example_model_file {
    void *block;      /* malloc'ed, behind arena */
    pmpd_arena arena; /* the model's bookkeeping; what is left is free scratch */
    pmpd_model *model;
} example_model_file;

/* Opens path; on failure prints "<tool>: <path>: ..." and returns 0 with
 * nothing left to close. */
int example_model_file_open(const char *tool, const char *path, example_model_file *f);
void example_model_file_close(example_model_file *f);

/* The first PMPD_ARENA_ALIGNMENT-aligned byte of a block malloc'ed with
 * PMPD_ARENA_ALIGNMENT bytes to spare, so planned arena figures are exact. */
void *example_aligned(void *block);

/* bytes + PMPD_ARENA_ALIGNMENT from the heap, every page written once, on
 * 2 MiB pages where Linux grants them (madvise(MADV_HUGEPAGE) on a 2 MiB-
 * aligned block of at least two).  A session writes its KV rows a position
 * at a time: in memory nobody has touched, the pages fault in one by one
 * inside the decode steps that first reach them (pmpd-run's trace, 2-core
 * Zen5 VM, 1.1B nested 2-bit, 2 threads: the KV-write step between rope and
 * attention 18-29 us per layer over 64 tokens before the pages were
 * written here, 8-11 after).  And each token's KV row lies on a page that
 * the weights streamed since have pushed out of the TLB: 9-10 us per layer
 * on 4 KiB pages, 1.4-1.7 on 2 MiB ones (same VM, -n 128).  A runtime with
 * a real-time budget would lock the arena too.  NULL when out of memory;
 * free() it. */
void *example_arena_block(size_t bytes);

#endif
