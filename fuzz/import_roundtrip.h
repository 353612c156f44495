/* Shared body of the importer harnesses: import the input; an accepted file
 * is serialized and reopened by the runtime loader (which must accept what
 * the importers produce); a refusal must come with a message. */
#ifndef PMPD_FUZZ_IMPORT_ROUNDTRIP_H
#define PMPD_FUZZ_IMPORT_ROUNDTRIP_H

#include <stdint.h>
#include <stdlib.h>

#include "pmpd_impl/format/loader.h"
#include "pmpd_impl/offline/import/import.h"

typedef pmpd_status (*fuzz_importer)(const unsigned char *data, size_t size, pmpd_build_model *b, pmpd_error *err);

static unsigned char fuzz_roundtrip_arena[1u << 20];

static int fuzz_import_roundtrip(fuzz_importer import, const uint8_t *data, size_t size)
{
    pmpd_build_model b;
    pmpd_error err;
    pmpd_build_init(&b);
    if (import(data, size, &b, &err) == PMPD_OK) {
        void *block;
        unsigned char *container;
        size_t container_size;
        if (pmpd_build_serialize(&b, &block, &container, &container_size) == PMPD_OK) {
            pmpd_arena arena;
            pmpd_model *model;
            pmpd_arena_init(&arena, fuzz_roundtrip_arena, sizeof fuzz_roundtrip_arena);
            pmpd_model_open_memory(container, container_size, &arena, &model, &err);
            free(block);
        }
    } else if (err.message[0] == '\0') {
        __builtin_trap();
    }
    pmpd_build_free(&b);
    return 0;
}

#endif
