/* GGUF importer; an accepted file is serialized and reopened by the loader. */
#include <stdint.h>
#include <stdlib.h>

#include "pmpd_impl/format/loader.h"
#include "pmpd_impl/offline/import/import.h"

static unsigned char fuzz_arena[1u << 20];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pmpd_build_model b;
    pmpd_error err;
    pmpd_build_init(&b);
    if (pmpd_import_gguf(data, size, &b, &err) == PMPD_OK) {
        void *block;
        unsigned char *container;
        size_t container_size;
        if (pmpd_build_serialize(&b, &block, &container, &container_size) == PMPD_OK) {
            pmpd_arena arena;
            pmpd_model *model;
            pmpd_arena_init(&arena, fuzz_arena, sizeof fuzz_arena);
            pmpd_model_open_memory(container, container_size, &arena, &model, &err);
            free(block);
        }
    } else if (err.message[0] == '\0') {
        __builtin_trap();
    }
    pmpd_build_free(&b);
    return 0;
}
