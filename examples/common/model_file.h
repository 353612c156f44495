/* A .pmpd file opened by a command-line tool (pmpd-run, pmpd-eval): the
 * model's bookkeeping in a malloc'ed arena (the weights mapped, or read
 * whole into a heap block), and a readable message on stderr when the file
 * is not a usable model. */
#ifndef PMPD_EXAMPLES_MODEL_FILE_H
#define PMPD_EXAMPLES_MODEL_FILE_H

#include "pmpd.h"

typedef struct example_model_file {
    void *block;      /* malloc'ed, behind arena */
    void *file_block; /* malloc'ed copy of the file when read whole, else NULL */
    pmpd_arena arena; /* the model's bookkeeping; what is left is free scratch */
    pmpd_model *model;
} example_model_file;

/* Opens path (mapped by pmpd_model_open_file; with read_whole, read into a
 * heap block and opened from memory, as llama.cpp's --no-mmap does); on
 * failure prints "<tool>: <path>: ..." and returns 0 with nothing left to
 * close. */
int example_model_file_open(const char *tool, const char *path, int read_whole, example_model_file *f);
void example_model_file_close(example_model_file *f);

/* The first PMPD_ARENA_ALIGNMENT-aligned byte of a block malloc'ed with
 * PMPD_ARENA_ALIGNMENT bytes to spare, so planned arena figures are exact. */
void *example_aligned(void *block);

/* bytes + PMPD_ARENA_ALIGNMENT from the heap, every page written once, on
 * 2 MiB pages where Linux grants them.  Written once: a session writes its
 * KV rows a position at a time, so in memory nobody has touched the pages
 * fault in one by one inside the decode steps that first reach them.  In pmpd-run's trace (2-core Zen5 VM, 1.1B nested 2-bit, 2 threads)
 * the step between rope and attention, which writes the KV rows, took
 * 18-29 us per layer over 64 decoded tokens and 12-14 over 256 before,
 * 8-11 after; decode 119-121 -> 122-124 tokens/s alternated.  2 MiB
 * pages: each token's KV rows lie on pages the streamed weights have pushed
 * out of the TLB; on one thread that step took 7.1-8.4 us per layer on
 * 4 KiB pages and 1.7-2.3 on 2 MiB ones (two threads: 1.1-7.6 against
 * 1.2-1.4; same VM and model, weights read with --no-mmap, three
 * alternated rounds; decode rates within the VM's noise).  A runtime with a real-time budget would lock
 * the arena too.  NULL when out of memory; free() it. */
void *example_arena_block(size_t bytes);

#endif
