/* pmpd-run --info: what a .pmpd model is (architecture, shapes, tokenizer,
 * tensor types and bytes) and the arena a session of it needs. */
#ifndef PMPD_EXAMPLES_MODEL_INFO_H
#define PMPD_EXAMPLES_MODEL_INFO_H

#include <stdio.h>

#include "pmpd.h"

/* Writes the description to out.  context: positions to plan the session
 * arena for (0 = the model's seq_len); model_arena_bytes: the bytes the
 * model's own tables took when it was opened (printed as given).
 * Returns PMPD_OK or the status of a failing planning call. */
pmpd_status example_print_model_info(FILE *out, const pmpd_model *model, size_t context, size_t model_arena_bytes);

#endif
