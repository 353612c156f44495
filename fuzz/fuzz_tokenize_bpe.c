/* Byte-level BPE encode on arbitrary bytes.  The first input byte picks the
 * pre-tokenizer (llama-bpe, qwen2, smollm, gpt-2) and the flags (special
 * tokens, BOS, EOS); the rest is the text, NUL bytes and invalid UTF-8
 * included.  The vocabulary is synthetic: the 256 bytes, merged tokens over
 * a small alphabet (so merges chain), control and user-defined tokens that
 * overlap.  Checks: every id in range, the scratch restored, and decoding
 * gives the text back byte for byte (special tokens decode to their text). */
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/offline/format/builder.h"
#include "pmpd_impl/tokenizer/bpe.h"
#include "pmpd_impl/tokenizer/pretok.h"

#define FUZZ_MAX_TEXT 2048u
#define FUZZ_KINDS 4

static unsigned char fuzz_sections[FUZZ_KINDS][1u << 14];
static unsigned char fuzz_scratch[24u * (FUZZ_MAX_TEXT + 3) + 64];
static pmpd_tokenizer fuzz_toks[FUZZ_KINDS];
static int fuzz_ready;

static uint32_t fuzz_add(pmpd_bpe_vocab *v, const char *piece, unsigned type)
{
    size_t length = strlen(piece);
    uint32_t id = v->n_tokens, at = v->offsets[id];
    memcpy(v->blob + at, piece, length);
    v->types[id] = (unsigned char)type;
    v->offsets[id + 1] = at + (uint32_t)length;
    if (length > v->max_token_length)
        v->max_token_length = (uint32_t)length;
    v->n_tokens++;
    return id;
}

static void fuzz_merge(pmpd_bpe_vocab *v, uint32_t left, uint32_t right)
{
    v->merges[2 * v->n_merges] = left;
    v->merges[2 * v->n_merges + 1] = right;
    v->n_merges++;
}

static void fuzz_setup(void)
{
    uint32_t k, b, ab, abc, sp_a, aa, sp_aa, d12;
    for (k = 0; k < FUZZ_KINDS; k++) {
        pmpd_bpe_vocab v;
        pmpd_build_model bm;
        memset(&v, 0, sizeof v);
        v.offsets = (uint32_t *)calloc(300, sizeof *v.offsets);
        v.blob = (unsigned char *)malloc(4096);
        v.types = (unsigned char *)malloc(300);
        v.merges = (uint32_t *)malloc(64 * sizeof *v.merges);
        v.pre = k + 1;
        v.eot_id = PMPD_TOK2_NO_TOKEN;
        for (b = 0; b < 256; b++) {
            char c[2] = {(char)b, 0};
            if (b == 0) { /* strlen cannot see a NUL piece */
                v.blob[0] = 0;
                v.types[0] = PMPD_TOKEN_TYPE_NORMAL;
                v.offsets[1] = 1;
                v.n_tokens = 1;
                v.max_token_length = 1;
                continue;
            }
            fuzz_add(&v, c, PMPD_TOKEN_TYPE_NORMAL);
        }
        ab = fuzz_add(&v, "ab", PMPD_TOKEN_TYPE_NORMAL);
        abc = fuzz_add(&v, "abc", PMPD_TOKEN_TYPE_NORMAL);
        sp_a = fuzz_add(&v, " a", PMPD_TOKEN_TYPE_NORMAL);
        aa = fuzz_add(&v, "aa", PMPD_TOKEN_TYPE_NORMAL);
        sp_aa = fuzz_add(&v, " aa", PMPD_TOKEN_TYPE_NORMAL);
        d12 = fuzz_add(&v, "12", PMPD_TOKEN_TYPE_NORMAL);
        fuzz_add(&v, "<|x|>", PMPD_TOKEN_TYPE_CONTROL);
        fuzz_add(&v, "|x|", PMPD_TOKEN_TYPE_CONTROL);
        fuzz_add(&v, "<|", PMPD_TOKEN_TYPE_USER_DEFINED);
        fuzz_merge(&v, 'a', 'b');
        fuzz_merge(&v, ab, 'c');
        fuzz_merge(&v, ' ', 'a');
        fuzz_merge(&v, 'a', 'a');
        fuzz_merge(&v, sp_a, 'a');
        fuzz_merge(&v, '1', '2');
        (void)abc;
        (void)aa;
        (void)sp_aa;
        (void)d12;
        v.flags = PMPD_TOK_FLAG_ADD_BOS;
        pmpd_build_init(&bm);
        if (pmpd_build_add_bpe_vocab(&bm, &v, NULL) != PMPD_OK || bm.sections[0].size > sizeof fuzz_sections[k])
            abort();
        memcpy(fuzz_sections[k], bm.sections[0].data, (size_t)bm.sections[0].size);
        if (pmpd_tokenizer_parse_bpe(&fuzz_toks[k], fuzz_sections[k], bm.sections[0].size, 0, v.n_tokens, 256 + 6,
                                     256 + 7, NULL) != PMPD_OK)
            abort();
        pmpd_build_free(&bm);
        pmpd_bpe_vocab_free(&v);
    }
    fuzz_ready = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int32_t ids[FUZZ_MAX_TEXT + 3];
    static unsigned char back[FUZZ_MAX_TEXT];
    const pmpd_tokenizer *tok;
    unsigned flags;
    size_t n = 0, i, at = 0, length;
    pmpd_arena scratch;
    unsigned char *base = fuzz_scratch + (64 - (uintptr_t)fuzz_scratch % 64) % 64;
    if (!fuzz_ready)
        fuzz_setup();
    if (size == 0 || size > FUZZ_MAX_TEXT + 1)
        return 0;
    tok = &fuzz_toks[data[0] % FUZZ_KINDS];
    flags = ((data[0] >> 2) & 1 ? PMPD_TOKENIZE_SPECIAL : 0u) | ((data[0] >> 3) & 1 ? PMPD_TOKENIZE_BOS : 0u) |
            ((data[0] >> 4) & 1 ? PMPD_TOKENIZE_EOS : 0u);
    length = size - 1;
    pmpd_arena_init(&scratch, base, 24u * (length + 3));
    if (pmpd_tokenizer_encode(tok, (const char *)data + 1, length, flags, ids, FUZZ_MAX_TEXT + 3, &n, &scratch) !=
            PMPD_OK ||
        scratch.used != 0)
        __builtin_trap();
    for (i = 0; i < n; i++) {
        const char *piece;
        size_t piece_length;
        if (ids[i] < 0 || (uint32_t)ids[i] >= tok->n_tokens)
            __builtin_trap();
        if ((i == 0 && (flags & PMPD_TOKENIZE_BOS)) || (i + 1 == n && (flags & PMPD_TOKENIZE_EOS)))
            continue;
        if (pmpd_tokenizer_decode(tok, -1, ids[i], &piece, &piece_length) != PMPD_OK || at + piece_length > length)
            __builtin_trap();
        memcpy(back + at, piece, piece_length);
        at += piece_length;
    }
    if (at != length || (length && memcmp(back, data + 1, length) != 0))
        __builtin_trap();
    return 0;
}
