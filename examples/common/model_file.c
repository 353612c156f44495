/* posix_memalign and, on Linux, madvise(MADV_HUGEPAGE) */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE 1
#endif
#include "examples/common/model_file.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#endif

/* Room for the model's bookkeeping (tensor table, tokenizer index) and a
 * prompt's tokenizer scratch; the weights themselves are mapped, not copied. */
#define EXAMPLE_MODEL_ARENA_BYTES ((size_t)64 << 20)

int example_model_file_open(const char *tool, const char *path, example_model_file *f)
{
    pmpd_error err;
    pmpd_status st;
    f->model = NULL;
    f->block = malloc(EXAMPLE_MODEL_ARENA_BYTES);
    if (!f->block) {
        fprintf(stderr, "%s: model arena: %s\n", tool, pmpd_strerror(PMPD_ERR_OUT_OF_MEMORY));
        return 0;
    }
    pmpd_arena_init(&f->arena, f->block, EXAMPLE_MODEL_ARENA_BYTES);
    st = pmpd_model_open_file(path, &f->arena, &f->model, &err);
    if (st == PMPD_OK)
        return 1;
    if (st == PMPD_ERR_NOT_FOUND)
        fprintf(stderr, "%s: %s: no such file (make one with pmpd-convert)\n", tool, path);
    else if (err.offset != PMPD_NO_OFFSET)
        fprintf(stderr, "%s: %s: not a usable .pmpd model: %s (%s, byte %llu)\n", tool, path, err.message,
                pmpd_strerror(st), (unsigned long long)err.offset);
    else
        fprintf(stderr, "%s: %s: not a usable .pmpd model: %s (%s)\n", tool, path,
                err.message[0] ? err.message : "cannot open", pmpd_strerror(st));
    free(f->block);
    f->block = NULL;
    return 0;
}

void example_model_file_close(example_model_file *f)
{
    pmpd_model_close(f->model);
    free(f->block);
    f->model = NULL;
    f->block = NULL;
}

void *example_aligned(void *block)
{
    uintptr_t a = (uintptr_t)block;
    return (unsigned char *)block + (PMPD_ARENA_ALIGNMENT - a % PMPD_ARENA_ALIGNMENT) % PMPD_ARENA_ALIGNMENT;
}

void *example_arena_block(size_t bytes)
{
    void *block = NULL;
#ifdef MADV_HUGEPAGE
    const size_t huge = (size_t)2 << 20;
    if (bytes >= 2 * huge && posix_memalign(&block, huge, bytes + PMPD_ARENA_ALIGNMENT) == 0)
        madvise(block, bytes + PMPD_ARENA_ALIGNMENT, MADV_HUGEPAGE); /* a hint: 4 KiB pages otherwise */
    else
        block = NULL;
#endif
    if (!block)
        block = malloc(bytes + PMPD_ARENA_ALIGNMENT);
    if (block)
        memset(block, 0, bytes + PMPD_ARENA_ALIGNMENT);
    return block;
}
