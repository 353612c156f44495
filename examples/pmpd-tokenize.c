/*
 * pmpd-tokenize: token ids of many texts, for comparing tokenizers.
 *
 *   pmpd-tokenize MODEL TEXTS [--special] [--model-bos] [--check-decode]
 *
 * TEXTS holds the texts one after the other, each ended by a NUL byte.
 * Prints one line per text: its ids separated by commas (an empty line for
 * no ids).  --special parses special tokens written in the text
 * (PMPD_TOKENIZE_SPECIAL), --model-bos adds BOS/EOS as the model's metadata
 * says.  --check-decode also decodes the ids and fails (exit 1) when the
 * bytes differ from the text.  The scratch arena is sized by pmpd.h's rule,
 * 24 * (length + 3) bytes, so a wrong rule shows as an error here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/common/read_file.h"
#include "pmpd.h"

#define TOKENIZE_MODEL_ARENA_BYTES ((size_t)64 << 20)

static int tokenize_decodes_back(const pmpd_model *model, const int32_t *ids, size_t n, const char *text,
                                 size_t length, unsigned flags)
{
    size_t i, at = 0;
    pmpd_tokenizer_info info;
    pmpd_model_get_tokenizer_info(model, &info);
    for (i = 0; i < n; i++) {
        const char *piece;
        size_t piece_length;
        if ((i == 0 && (flags & PMPD_TOKENIZE_MODEL_BOS) && info.add_bos && (uint32_t)ids[0] == info.bos_id) ||
            (i + 1 == n && (flags & PMPD_TOKENIZE_MODEL_BOS) && info.add_eos && (uint32_t)ids[i] == info.eos_id))
            continue;
        if (pmpd_token_to_piece(model, i ? ids[i - 1] : -1, ids[i], &piece, &piece_length) != PMPD_OK ||
            at + piece_length > length || memcmp(text + at, piece, piece_length) != 0)
            return 0;
        at += piece_length;
    }
    return at == length;
}

int main(int argc, char **argv)
{
    unsigned flags = 0;
    int check_decode = 0, i, failed = 0;
    char *texts;
    size_t size, at = 0;
    void *model_block;
    pmpd_arena arena;
    pmpd_model *model;
    pmpd_error err;
    if (argc < 3) {
        fprintf(stderr, "usage: pmpd-tokenize MODEL TEXTS [--special] [--model-bos] [--check-decode]\n");
        return 2;
    }
    for (i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--special") == 0)
            flags |= PMPD_TOKENIZE_SPECIAL;
        else if (strcmp(argv[i], "--model-bos") == 0)
            flags |= PMPD_TOKENIZE_MODEL_BOS;
        else if (strcmp(argv[i], "--check-decode") == 0)
            check_decode = 1;
        else {
            fprintf(stderr, "pmpd-tokenize: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    texts = (char *)example_read_file(argv[2], &size);
    model_block = malloc(TOKENIZE_MODEL_ARENA_BYTES);
    if (!texts || !model_block) {
        fprintf(stderr, "pmpd-tokenize: cannot read %s\n", argv[2]);
        return 1;
    }
    pmpd_arena_init(&arena, model_block, TOKENIZE_MODEL_ARENA_BYTES);
    if (pmpd_model_open_file(argv[1], &arena, &model, &err) != PMPD_OK) {
        fprintf(stderr, "pmpd-tokenize: %s: %s (offset %llu)\n", argv[1], err.message, (unsigned long long)err.offset);
        return 1;
    }
    while (at < size) {
        const char *text = texts + at;
        size_t length = strlen(text), n = 0, k, scratch_bytes = 24 * (length + 3) + PMPD_ARENA_ALIGNMENT;
        int32_t *ids = (int32_t *)malloc((length + 3) * sizeof *ids);
        void *scratch_block = malloc(scratch_bytes);
        pmpd_arena scratch;
        pmpd_status st;
        if (!ids || !scratch_block)
            return 1;
        pmpd_arena_init(&scratch, scratch_block, scratch_bytes);
        st = pmpd_tokenize_text(model, text, length, flags, ids, length + 3, &n, &scratch);
        if (st != PMPD_OK) {
            fprintf(stderr, "pmpd-tokenize: text at byte %zu: %s\n", at, pmpd_strerror(st));
            return 1;
        }
        for (k = 0; k < n; k++)
            printf(k ? ",%d" : "%d", (int)ids[k]);
        putchar('\n');
        if (check_decode && !(flags & PMPD_TOKENIZE_SPECIAL) && !tokenize_decodes_back(model, ids, n, text, length, flags)) {
            fprintf(stderr, "pmpd-tokenize: text at byte %zu does not decode back to itself\n", at);
            failed = 1;
        }
        free(ids);
        free(scratch_block);
        at += length + 1;
    }
    pmpd_model_close(model);
    free(model_block);
    free(texts);
    return failed;
}
