/* A model made in memory by the offline builder, serialized into a heap
 * block and opened from it (pmpd-calibrate's models, pmpd-bench's
 * synthetic ones). */
#ifndef PMPD_EXAMPLES_BUILT_MODEL_H
#define PMPD_EXAMPLES_BUILT_MODEL_H

#include <stddef.h>

#include "pmpd.h"
#include "pmpd_impl/offline/format/builder.h"

typedef struct example_model {
    void *block;         /* malloc'ed by the serializer: holds the container */
    unsigned char *data; /* the container */
    size_t size;
    void *arena_block;   /* the model's arena */
    pmpd_model *model;
} example_model;

/* Serializes b and opens the container with an arena of arena_bytes.  m is
 * cleared first; whatever this returns, example_model_close(m) releases
 * what it made (arena_block stays NULL unless the container was made). */
pmpd_status example_model_open(const pmpd_build_model *b, size_t arena_bytes, example_model *m);
void example_model_close(example_model *m);

#endif
