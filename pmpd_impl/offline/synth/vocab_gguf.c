/* A llama2.c vocabulary as llama.cpp's "llama" (SentencePiece) tokenizer
 * metadata.
 *
 * llama2.c's export differs from the SentencePiece pieces in two ways that
 * are undone here: it spells the word-start mark U+2581 as a space, and it
 * wraps BOS and EOS in newlines ("\n<s>\n").  llama.cpp needs each token's
 * type: byte tokens (<0xXX>) are how it falls back for text no piece covers,
 * and control tokens are never produced from text. */
#include "pmpd_impl/offline/synth/synth.h"

#include <string.h>

#include "pmpd_impl/format/le.h"

#define SYNTH_UNKNOWN_ID 0u
#define SYNTH_BOS_ID 1u
#define SYNTH_EOS_ID 2u

/* llama.cpp's token types. */
enum { SYNTH_TOKEN_NORMAL = 1, SYNTH_TOKEN_UNKNOWN = 2, SYNTH_TOKEN_CONTROL = 3, SYNTH_TOKEN_BYTE = 6 };

/* Piece i without llama2.c's newlines around BOS and EOS. */
static void synth_piece(const pmpd_vocab *v, uint32_t i, const unsigned char **p, size_t *n)
{
    *p = v->blob + v->offsets[i];
    *n = v->offsets[i + 1] - v->offsets[i];
    if ((i == SYNTH_BOS_ID || i == SYNTH_EOS_ID) && *n >= 2 && (*p)[0] == '\n' && (*p)[*n - 1] == '\n') {
        (*p)++;
        *n -= 2;
    }
}

static int synth_is_hex_digit(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F');
}

static int32_t synth_token_type(const unsigned char *p, size_t n, uint32_t id)
{
    if (id == SYNTH_UNKNOWN_ID)
        return SYNTH_TOKEN_UNKNOWN;
    if (id == SYNTH_BOS_ID || id == SYNTH_EOS_ID)
        return SYNTH_TOKEN_CONTROL;
    if (n == 6 && memcmp(p, "<0x", 3) == 0 && synth_is_hex_digit(p[3]) && synth_is_hex_digit(p[4]) && p[5] == '>')
        return SYNTH_TOKEN_BYTE;
    return SYNTH_TOKEN_NORMAL;
}

/* Writes a piece as a GGUF string with each space spelled U+2581. */
static void synth_write_piece(pmpd_gguf_out *o, const unsigned char *p, size_t n)
{
    size_t i, spaces = 0, run = 0;
    for (i = 0; i < n; i++)
        spaces += p[i] == ' ';
    pmpd_gguf_u64(o, n + 2 * spaces);
    for (i = 0; i < n; i++) {
        if (p[i] != ' ')
            continue;
        pmpd_gguf_bytes(o, p + run, i - run);
        pmpd_gguf_bytes(o, "\xe2\x96\x81", 3);
        run = i + 1;
    }
    pmpd_gguf_bytes(o, p + run, n - run);
}

PMPD_INTERNAL void pmpd_synth_write_vocab(pmpd_gguf_out *o, const pmpd_vocab *v)
{
    const unsigned char *p;
    unsigned char b[4];
    size_t n;
    uint32_t i;
    pmpd_gguf_kv_string(o, "tokenizer.ggml.model", "llama");
    pmpd_gguf_kv_array(o, "tokenizer.ggml.tokens", PMPD_GGUF_STRING, v->n_tokens);
    for (i = 0; i < v->n_tokens; i++) {
        synth_piece(v, i, &p, &n);
        synth_write_piece(o, p, n);
    }
    pmpd_gguf_kv_array(o, "tokenizer.ggml.scores", PMPD_GGUF_FLOAT32, v->n_tokens);
    for (i = 0; i < v->n_tokens; i++) {
        pmpd_le_put_f32(b, v->scores[i]);
        pmpd_gguf_bytes(o, b, sizeof b);
    }
    pmpd_gguf_kv_array(o, "tokenizer.ggml.token_type", PMPD_GGUF_INT32, v->n_tokens);
    for (i = 0; i < v->n_tokens; i++) {
        synth_piece(v, i, &p, &n);
        pmpd_gguf_u32(o, (uint32_t)synth_token_type(p, n, i));
    }
    pmpd_gguf_kv_u32(o, "tokenizer.ggml.bos_token_id", SYNTH_BOS_ID);
    pmpd_gguf_kv_u32(o, "tokenizer.ggml.eos_token_id", SYNTH_EOS_ID);
    pmpd_gguf_kv_u32(o, "tokenizer.ggml.unknown_token_id", SYNTH_UNKNOWN_ID);
    pmpd_gguf_kv_bool(o, "tokenizer.ggml.add_bos_token", 1);
}

#undef SYNTH_UNKNOWN_ID
#undef SYNTH_BOS_ID
#undef SYNTH_EOS_ID
