/*
 * pmpd-tokbench: how long pmpd_tokenize takes on long texts.
 *
 *   pmpd-tokbench MODEL TEXTFILE [BYTES ...]
 *
 * Repeats TEXTFILE (NUL bytes become spaces) until it is BYTES long (default
 * 40000 and 400000), encodes it with the model's tokenizer five times and
 * prints the fastest run, so load from other processes inflates no figure,
 * with the token count and the scratch bytes the encoding needed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/common/read_file.h"
#include "pmpd.h"
#include "platform/platform.h"

#define TOKBENCH_RUNS 5
#define TOKBENCH_MODEL_ARENA_BYTES ((size_t)16 << 20)

static int tokbench_one(const pmpd_model *model, const char *source, size_t source_size, size_t bytes)
{
    char *text = (char *)malloc(bytes + 1);
    int32_t *ids = (int32_t *)malloc((bytes + 3) * sizeof *ids);
    size_t scratch_bytes = 24 * (bytes + 3) + PMPD_ARENA_ALIGNMENT, n = 0, i;
    void *scratch_block = malloc(scratch_bytes);
    uint64_t best = UINT64_MAX;
    pmpd_arena scratch;
    pmpd_status st = PMPD_OK;
    int run;
    if (!text || !ids || !scratch_block) {
        st = PMPD_ERR_OUT_OF_MEMORY;
    } else {
        for (i = 0; i < bytes; i++)
            text[i] = source[i % source_size] ? source[i % source_size] : ' ';
        text[bytes] = '\0';
    }
    for (run = 0; st == PMPD_OK && run < TOKBENCH_RUNS; run++) {
        uint64_t start, elapsed;
        pmpd_arena_init(&scratch, scratch_block, scratch_bytes);
        start = pmpd_platform_now_ns();
        st = pmpd_tokenize(model, text, 1, 0, ids, bytes + 3, &n, &scratch);
        elapsed = pmpd_platform_now_ns() - start;
        if (elapsed < best)
            best = elapsed;
    }
    if (st == PMPD_OK)
        printf("%zu bytes: %zu tokens in %.3f ms (best of %d), %zu scratch bytes\n", bytes, n, (double)best / 1e6,
               TOKBENCH_RUNS, scratch.high_water);
    else
        fprintf(stderr, "pmpd-tokbench: %zu bytes: %s\n", bytes, pmpd_strerror(st));
    free(text);
    free(ids);
    free(scratch_block);
    return st == PMPD_OK;
}

int main(int argc, char **argv)
{
    static const size_t default_sizes[] = {40000, 400000};
    void *model_block;
    pmpd_arena arena;
    pmpd_model *model;
    pmpd_error err;
    char *source;
    size_t source_size, k;
    int ok = 1;
    if (argc < 3) {
        fprintf(stderr, "usage: pmpd-tokbench MODEL TEXTFILE [BYTES ...]\n");
        return 2;
    }
    source = (char *)example_read_file(argv[2], &source_size);
    model_block = malloc(TOKBENCH_MODEL_ARENA_BYTES);
    if (!source || !model_block) {
        fprintf(stderr, "pmpd-tokbench: cannot read %s\n", argv[2]);
        return 1;
    }
    pmpd_arena_init(&arena, model_block, TOKBENCH_MODEL_ARENA_BYTES);
    if (pmpd_model_open_file(argv[1], &arena, &model, &err) != PMPD_OK) {
        fprintf(stderr, "pmpd-tokbench: %s: %s (offset %llu)\n", argv[1], err.message,
                (unsigned long long)err.offset);
        return 1;
    }
    if (argc > 3) {
        int i;
        for (i = 3; i < argc; i++)
            ok &= tokbench_one(model, source, source_size, strtoul(argv[i], NULL, 10));
    } else {
        for (k = 0; k < sizeof default_sizes / sizeof default_sizes[0]; k++)
            ok &= tokbench_one(model, source, source_size, default_sizes[k]);
    }
    pmpd_model_close(model);
    free(model_block);
    free(source);
    return ok ? 0 : 1;
}
