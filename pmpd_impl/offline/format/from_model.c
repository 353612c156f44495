#include "pmpd_impl/offline/format/from_model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/core/error.h"
#include "pmpd_impl/model/model.h"
#include "pmpd_impl/offline/format/atomic_file.h"
#include "pmpd_impl/offline/precision/anyprec_build.h"

PMPD_INTERNAL pmpd_status pmpd_build_from_model(const pmpd_model *model, uint32_t drop_mask, pmpd_build_model *b,
                                                pmpd_error *err)
{
    uint32_t i;
    pmpd_status st = PMPD_OK;
    pmpd_build_init(b);
    b->info = model->info;
    for (i = 0; st == PMPD_OK && i < model->n_tensors; i++) {
        const pmpd_tensor *t = &model->tensors[i];
        char name[PMPD_TENSOR_NAME_MAX + 1];
        memcpy(name, t->name, t->name_length);
        name[t->name_length] = '\0';
        /* The builder sizes tensors by type and shape; nested ones size
         * themselves from their own header. */
        if (t->type == PMPD_TENSOR_ANYPREC)
            st = pmpd_anyprec_build_add(b, name, t->dims[0], t->dims[1], t->data, t->size);
        else
            st = pmpd_build_add_tensor(b, name, t->type, t->n_dims, t->dims, t->data, t->size);
        if (st != PMPD_OK)
            pmpd_error_set(err, st, PMPD_NO_OFFSET, "cannot copy tensor %s", name);
    }
    for (i = 0; st == PMPD_OK && i < model->n_sections; i++) {
        const pmpd_section *s = &model->sections[i];
        if (s->kind < 32 && (drop_mask & PMPD_BUILD_DROP(s->kind)))
            continue;
        st = pmpd_build_add_section(b, s->kind, s->version, s->flags, s->data, s->size);
        if (st != PMPD_OK)
            pmpd_error_set(err, st, PMPD_NO_OFFSET, "cannot copy section %u (kind %u)", (unsigned)i,
                           (unsigned)s->kind);
    }
    if (st != PMPD_OK)
        pmpd_build_free(b);
    return st;
}

PMPD_INTERNAL pmpd_status pmpd_build_open(const pmpd_build_model *b, pmpd_build_opened *o, pmpd_error *err)
{
    /* The loader's tables: a few hundred bytes per tensor and layer plus the
     * tokenizer's index (what pmpd_convert_file's check allows, doubled). */
    size_t arena_bytes = 2 * (65536 + (size_t)b->n_tensors * 512 + (size_t)b->info.n_layers * 256);
    pmpd_arena arena;
    pmpd_status st;
    memset(o, 0, sizeof *o);
    st = pmpd_build_serialize(b, &o->block, &o->data, &o->size);
    if (st != PMPD_OK)
        return pmpd_error_set(err, st, PMPD_NO_OFFSET, "cannot build the container");
    o->arena_block = malloc(arena_bytes);
    if (!o->arena_block)
        return pmpd_error_set(err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory");
    pmpd_arena_init(&arena, o->arena_block, arena_bytes);
    return pmpd_model_open_memory(o->data, o->size, &arena, &o->model, err);
}

PMPD_INTERNAL void pmpd_build_close(pmpd_build_opened *o)
{
    pmpd_model_close(o->model);
    free(o->block);
    free(o->arena_block);
    memset(o, 0, sizeof *o);
}

PMPD_INTERNAL pmpd_status pmpd_build_opened_write(const pmpd_build_opened *o, const char *path, pmpd_error *err)
{
    pmpd_atomic_file out;
    pmpd_status st = pmpd_atomic_open(&out, path, err);
    if (st != PMPD_OK)
        return st;
    if (fwrite(o->data, 1, o->size, out.f) != o->size)
        st = pmpd_error_set(err, PMPD_ERR_IO, PMPD_NO_OFFSET, "cannot write %s: %s", out.tmp, strerror(errno));
    return pmpd_atomic_finish(&out, st, err);
}
