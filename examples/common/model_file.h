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

#endif
