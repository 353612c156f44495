/* Tokenizer encode on arbitrary text.  The vocabulary is llama2.c's tok512
 * read from ../shared/models (or $PMPD_SHARED/models) when available, else a
 * small synthetic one (byte tokens, a space, a few merges).  Checks that
 * every id is in range and that decoding gives the text back byte for byte
 * (texts with '<' excepted: "<0xNN>" typed out can merge into a byte token). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/offline/import/import.h"
#include "pmpd_impl/tokenizer/tokenizer.h"

#define FUZZ_MAX_TEXT 2048u

static unsigned char fuzz_section_memory[(1u << 18) + 64];
static unsigned char fuzz_scratch[1u << 16];
static pmpd_tokenizer fuzz_tok;
static int fuzz_ready;

static int fuzz_load_shared(pmpd_vocab *v)
{
    const char *shared = getenv("PMPD_SHARED");
    char path[1024];
    unsigned char data[1u << 16];
    size_t size;
    FILE *f;
    snprintf(path, sizeof path, "%s/models/tok512.bin", shared && shared[0] ? shared : "../shared");
    f = fopen(path, "rb");
    if (!f)
        return 0;
    size = fread(data, 1, sizeof data, f);
    fclose(f);
    return pmpd_import_llama2c_tokenizer(data, size, 0, v, NULL) == PMPD_OK;
}

static void fuzz_synthetic(pmpd_vocab *v)
{
    static const char *const words[] = {"<unk>", "<s>", "</s>", " ", " t", "he", " the", " a", "in", " in",
                                        "\xe2\x98\x83", " Once", " up", "on", " upon", " time"};
    static const char hex[] = "0123456789ABCDEF";
    uint32_t n = 3 + 256 + 13, i, at = 0;
    v->n_tokens = n;
    v->max_token_length = 8;
    v->flags = PMPD_TOK_FLAG_SPACE_PREFIX;
    v->scores = (float *)malloc(n * sizeof *v->scores);
    v->offsets = (uint32_t *)malloc((n + 1) * sizeof *v->offsets);
    v->blob = (unsigned char *)malloc(n * 8);
    for (i = 0; i < n; i++) {
        v->offsets[i] = at;
        v->scores[i] = i < 259 ? 0.0f : -(float)i;
        if (i >= 3 && i < 259) {
            memcpy(v->blob + at, "<0x", 3);
            v->blob[at + 3] = (unsigned char)hex[(i - 3) >> 4];
            v->blob[at + 4] = (unsigned char)hex[(i - 3) & 15];
            v->blob[at + 5] = '>';
            at += 6;
        } else {
            const char *w = words[i < 3 ? i : i - 256];
            memcpy(v->blob + at, w, strlen(w));
            at += (uint32_t)strlen(w);
        }
    }
    v->offsets[n] = at;
}

static void fuzz_setup(void)
{
    pmpd_vocab v;
    pmpd_build_model b;
    unsigned char *section = fuzz_section_memory + (64 - (uintptr_t)fuzz_section_memory % 64) % 64;
    memset(&v, 0, sizeof v);
    if (!fuzz_load_shared(&v))
        fuzz_synthetic(&v);
    pmpd_build_init(&b);
    if (pmpd_build_add_vocab(&b, &v) != PMPD_OK || b.sections[0].size > (1u << 18))
        abort();
    memcpy(section, b.sections[0].data, (size_t)b.sections[0].size);
    if (pmpd_tokenizer_parse(&fuzz_tok, section, b.sections[0].size, 0, v.n_tokens, 1, 2, NULL) != PMPD_OK)
        abort();
    pmpd_build_free(&b);
    pmpd_vocab_free(&v);
    fuzz_ready = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char text[FUZZ_MAX_TEXT + 1];
    static int32_t ids[FUZZ_MAX_TEXT + 3];
    static char back[8 * (FUZZ_MAX_TEXT + 3)];
    size_t n, i, length = 0, text_length;
    pmpd_arena scratch;
    int bos, eos;
    if (!fuzz_ready)
        fuzz_setup();
    if (size == 0 || size > FUZZ_MAX_TEXT + 1)
        return 0;
    bos = data[0] & 1;
    eos = (data[0] >> 1) & 1;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    text_length = strlen(text);
    pmpd_arena_init(&scratch, fuzz_scratch, sizeof fuzz_scratch);
    if (pmpd_tokenizer_encode(&fuzz_tok, text, text_length, (bos ? PMPD_TOKENIZE_BOS : 0u) | (eos ? PMPD_TOKENIZE_EOS : 0u), ids, FUZZ_MAX_TEXT + 3, &n, &scratch) != PMPD_OK ||
        scratch.used != 0)
        __builtin_trap();
    for (i = 0; i < n; i++) {
        const char *piece;
        size_t piece_length;
        if (ids[i] < 0 || (uint32_t)ids[i] >= fuzz_tok.n_tokens)
            __builtin_trap();
        if (pmpd_tokenizer_decode(&fuzz_tok, i ? ids[i - 1] : -1, ids[i], &piece, &piece_length) != PMPD_OK)
            __builtin_trap();
        if ((bos && i == 0) || (eos && i == n - 1))
            continue;
        memcpy(back + length, piece, piece_length);
        length += piece_length;
    }
    /* Without BOS the leading space stays: run.c's rule drops it only after BOS. */
    if (!memchr(text, '<', text_length)) {
        size_t skip = (!bos && text_length > 0 && length > text_length) ? 1 : 0;
        if (length - skip != text_length || memcmp(back + skip, text, text_length) != 0)
            __builtin_trap();
    }
    return 0;
}
