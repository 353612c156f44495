#include "examples/common/built_model.h"

#include <stdlib.h>
#include <string.h>

pmpd_status example_model_open(const pmpd_build_model *b, size_t arena_bytes, example_model *m)
{
    pmpd_arena arena;
    pmpd_status st;
    memset(m, 0, sizeof *m);
    st = pmpd_build_serialize(b, &m->block, &m->data, &m->size);
    if (st != PMPD_OK)
        return st;
    m->arena_block = malloc(arena_bytes);
    if (!m->arena_block)
        return PMPD_ERR_OUT_OF_MEMORY;
    pmpd_arena_init(&arena, m->arena_block, arena_bytes);
    return pmpd_model_open_memory(m->data, m->size, &arena, &m->model, NULL);
}

void example_model_close(example_model *m)
{
    pmpd_model_close(m->model);
    free(m->block);
    free(m->arena_block);
}
