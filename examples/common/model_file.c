/* posix_memalign and, on Linux, madvise(MADV_HUGEPAGE) */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE 1
#endif
#include "examples/common/model_file.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

/* Room for the model's bookkeeping (tensor table, tokenizer index) and a
 * prompt's tokenizer scratch; the weights are mapped, or read into a block
 * of their own. */
#define EXAMPLE_MODEL_ARENA_BYTES ((size_t)64 << 20)

/* Prints why opening path failed (st, err) and frees what f holds. */
static int model_file_failed(const char *tool, const char *path, example_model_file *f, pmpd_status st,
                             const pmpd_error *err)
{
    if (st == PMPD_ERR_NOT_FOUND)
        fprintf(stderr, "%s: %s: no such file (make one with pmpd-convert)\n", tool, path);
    else if (err->offset != PMPD_NO_OFFSET)
        fprintf(stderr, "%s: %s: not a usable .pmpd model: %s (%s, byte %llu)\n", tool, path, err->message,
                pmpd_strerror(st), (unsigned long long)err->offset);
    else
        fprintf(stderr, "%s: %s: not a usable .pmpd model: %s (%s)\n", tool, path,
                err->message[0] ? err->message : "cannot open", pmpd_strerror(st));
    free(f->block);
    free(f->file_block);
    f->block = f->file_block = NULL;
    return 0;
}

/* bytes from the heap, on 2 MiB pages where Linux grants them (blocks of
 * at least two such pages). */
static void *model_file_big_block(size_t bytes)
{
    void *block = NULL;
#ifdef MADV_HUGEPAGE
    const size_t huge = (size_t)2 << 20;
    if (bytes >= 2 * huge && posix_memalign(&block, huge, bytes) == 0)
        madvise(block, bytes, MADV_HUGEPAGE); /* a request: 4 KiB pages where refused */
    else
        block = NULL;
#endif
    return block ? block : malloc(bytes);
}

/* The whole file in f->file_block (*data: its first 64-byte-aligned byte). */
static pmpd_status model_file_read(const char *path, example_model_file *f, const void **data, size_t *size,
                                   pmpd_error *err)
{
    FILE *in = fopen(path, "rb");
    long length;
    err->offset = PMPD_NO_OFFSET;
    err->message[0] = '\0';
    if (!in)
        return PMPD_ERR_NOT_FOUND;
    /* A directory opens but does not read (and seeks to a huge "size"). */
    if ((getc(in) == EOF && ferror(in)) || fseek(in, 0, SEEK_END) != 0 || (length = ftell(in)) < 0 ||
        fseek(in, 0, SEEK_SET) != 0) {
        fclose(in);
        snprintf(err->message, sizeof err->message, "cannot read the file");
        return PMPD_ERR_IO;
    }
    *size = (size_t)length;
    /* On 2 MiB pages: faulting the block in 4 KiB pages dominated the read
     * (pmpd-run -n 1 on a 685 MB model: 2.9-3.0 s on the Zen5 VM, 0.42 s on
     * 2 MiB pages, 0.29-0.38 s mapped). */
    f->file_block = model_file_big_block(*size + PMPD_ARENA_ALIGNMENT);
    if (!f->file_block) {
        fclose(in);
        snprintf(err->message, sizeof err->message, "no memory for the %ld-byte file", length);
        return PMPD_ERR_OUT_OF_MEMORY;
    }
    *data = example_aligned(f->file_block);
    if (fread((void *)(uintptr_t)*data, 1, *size, in) != *size) {
        fclose(in);
        snprintf(err->message, sizeof err->message, "cannot read the file");
        return PMPD_ERR_IO;
    }
    fclose(in);
    return PMPD_OK;
}

int example_model_file_open(const char *tool, const char *path, int read_whole, example_model_file *f)
{
    pmpd_error err;
    pmpd_status st;
    f->model = NULL;
    f->file_block = NULL;
    f->block = malloc(EXAMPLE_MODEL_ARENA_BYTES);
    if (!f->block) {
        fprintf(stderr, "%s: model arena: %s\n", tool, pmpd_strerror(PMPD_ERR_OUT_OF_MEMORY));
        return 0;
    }
    pmpd_arena_init(&f->arena, f->block, EXAMPLE_MODEL_ARENA_BYTES);
    if (read_whole) {
        const void *data = NULL;
        size_t size = 0;
        st = model_file_read(path, f, &data, &size, &err);
        if (st == PMPD_OK)
            st = pmpd_model_open_memory(data, size, &f->arena, &f->model, &err);
    } else {
        st = pmpd_model_open_file(path, &f->arena, &f->model, &err);
    }
    return st == PMPD_OK ? 1 : model_file_failed(tool, path, f, st, &err);
}

void example_model_file_close(example_model_file *f)
{
    pmpd_model_close(f->model);
    free(f->block);
    free(f->file_block);
    f->model = NULL;
    f->block = f->file_block = NULL;
}

void *example_aligned(void *block)
{
    uintptr_t a = (uintptr_t)block;
    return (unsigned char *)block + (PMPD_ARENA_ALIGNMENT - a % PMPD_ARENA_ALIGNMENT) % PMPD_ARENA_ALIGNMENT;
}

void *example_arena_block(size_t bytes)
{
    void *block = model_file_big_block(bytes + PMPD_ARENA_ALIGNMENT);
    if (block)
        memset(block, 0, bytes + PMPD_ARENA_ALIGNMENT);
    return block;
}
