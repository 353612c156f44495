/* Container loader: any bytes, opened with and without the checksums (so
 * mutations reach the checks behind them); a model that opens is used --
 * tokenizer encode/decode and every tensor's bytes -- to catch anything the
 * loader accepted but should not have. */
#include <stdint.h>
#include <string.h>

#include "pmpd_impl/format/loader.h"
#include "pmpd_impl/model/model.h"

#define FUZZ_MAX_INPUT (1u << 20)

static unsigned char fuzz_file[FUZZ_MAX_INPUT + 64];
static unsigned char fuzz_arena[1u << 20];
static unsigned char fuzz_scratch[1u << 16];

static void fuzz_use_model(const pmpd_model *m)
{
    static const char *const texts[] = {"Once upon a time", "\xe2\x98\x83 \xff bytes", ""};
    static const char special_text[] = "<|begin_of_text|>x<|eot_id|> 12345\n\n";
    int32_t ids[64];
    size_t n, i, t, length;
    pmpd_arena scratch;
    const char *piece;
    volatile unsigned char sink = 0;
    uint32_t k;
    pmpd_arena_init(&scratch, fuzz_scratch, sizeof fuzz_scratch);
    for (t = 0; t < sizeof texts / sizeof texts[0]; t++)
        if (pmpd_tokenize(m, texts[t], 1, 1, ids, 64, &n, &scratch) == PMPD_OK)
            for (i = 1; i < n; i++)
                pmpd_token_to_piece(m, ids[i - 1], ids[i], &piece, &length);
    /* byte-level BPE: special tokens as the section lists them */
    pmpd_tokenize_text(m, special_text, sizeof special_text - 1, PMPD_TOKENIZE_SPECIAL | PMPD_TOKENIZE_MODEL_BOS, ids,
                       64, &n, &scratch);
    for (k = 0; k < m->tokenizer.n_tokens; k++)
        if (pmpd_token_to_piece(m, 1, (int32_t)k, &piece, &length) == PMPD_OK && length)
            sink ^= (unsigned char)piece[length - 1];
    for (k = 0; k < m->n_tensors; k++)
        if (m->tensors[k].size)
            sink ^= ((const unsigned char *)m->tensors[k].data)[m->tensors[k].size - 1];
    for (k = 0; k < m->info.n_layers; k++)
        sink ^= ((const unsigned char *)m->layers[k].w_down->data)[0];
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *aligned = fuzz_file + (64 - (uintptr_t)fuzz_file % 64) % 64;
    unsigned flags;
    if (size > FUZZ_MAX_INPUT)
        return 0;
    memcpy(aligned, data, size);
    for (flags = 0; flags <= PMPD_LOAD_SKIP_CHECKSUMS; flags += PMPD_LOAD_SKIP_CHECKSUMS) {
        pmpd_arena arena;
        pmpd_model *model;
        pmpd_error err;
        pmpd_arena_init(&arena, fuzz_arena, sizeof fuzz_arena);
        if (pmpd_container_open(aligned, size, &arena, flags, &model, &err) == PMPD_OK) {
            fuzz_use_model(model);
            pmpd_model_close(model);
        } else if (arena.used != 0 || err.message[0] == '\0') {
            __builtin_trap(); /* a refusal must restore the arena and say why */
        }
    }
    return 0;
}
