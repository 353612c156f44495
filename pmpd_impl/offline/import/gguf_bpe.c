/* GGUF "gpt2" (byte-level BPE) vocabularies into a pmpd_bpe_vocab.
 *
 * GGUF stores normal tokens in GPT-2's byte-level alphabet: every byte is
 * one printable code point (bytes that are printable Latin-1 stand for
 * themselves; the 68 others, in increasing order, for U+0100 onwards).
 * That is undone here so the container holds raw bytes and decoding needs
 * no table.  Control, user-defined and unknown tokens are plain text.
 * Merges are "LEFT RIGHT" strings in rank order, split at the first space
 * after the first byte (a piece may itself start with a space character). */
#include "pmpd_impl/offline/import/import.h"

#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/core/error.h"
#include "pmpd_impl/format/le.h"
#include "pmpd_impl/tokenizer/pretok.h"

#define GBPE_GGUF_INT32 5u
#define GBPE_GGUF_UINT32 4u
#define GBPE_GGUF_STRING 8u

static int gbpe_printable(uint32_t b)
{
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

/* The byte a code point of the byte-level alphabet stands for, or -1. */
static int gbpe_byte_of(uint32_t cp)
{
    uint32_t b, k = 0;
    if (cp < 256)
        return gbpe_printable(cp) ? (int)cp : -1;
    if (cp >= 256 + 68)
        return -1;
    for (b = 0; b < 256; b++)
        if (!gbpe_printable(b) && k++ == cp - 256)
            return (int)b;
    return -1;
}

/* Strict UTF-8 (no overlong forms, surrogates or code points past
 * U+10FFFF): the length of the character at s, or 0 when it is invalid. */
static size_t gbpe_utf8(const unsigned char *s, size_t n, uint32_t *cp)
{
    size_t need, i;
    uint32_t v;
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    if (s[0] < 0xC2 || s[0] > 0xF4)
        return 0;
    need = s[0] < 0xE0 ? 1 : (s[0] < 0xF0 ? 2 : 3);
    if (n <= need)
        return 0;
    v = s[0] & (0x3Fu >> need);
    for (i = 1; i <= need; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3Fu);
    }
    if ((need == 2 && v < 0x800) || (need == 3 && (v < 0x10000 || v > 0x10FFFF)) || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return need + 1;
}

typedef struct gbpe_text {
    const unsigned char *bytes;
    uint64_t length;
    uint32_t id;
} gbpe_text;

static int gbpe_text_compare(const void *a, const void *b)
{
    const gbpe_text *x = (const gbpe_text *)a, *y = (const gbpe_text *)b;
    uint64_t common = x->length < y->length ? x->length : y->length;
    int c = common ? memcmp(x->bytes, y->bytes, (size_t)common) : 0;
    if (c != 0)
        return c;
    if (x->length != y->length)
        return x->length < y->length ? -1 : 1;
    return x->id < y->id ? -1 : (x->id > y->id ? 1 : 0);
}

/* The lowest id whose GGUF text is bytes, or -1. */
static int64_t gbpe_find(const gbpe_text *sorted, uint32_t n, const unsigned char *bytes, uint64_t length)
{
    size_t lo = 0, hi = n;
    gbpe_text key;
    key.bytes = bytes;
    key.length = length;
    key.id = 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (gbpe_text_compare(&sorted[mid], &key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < n && sorted[lo].length == length && memcmp(sorted[lo].bytes, bytes, (size_t)length) == 0)
        return sorted[lo].id;
    return -1;
}

static pmpd_status gbpe_pre(const pmpd_gguf_bpe_input *in, pmpd_bpe_vocab *v, pmpd_error *err)
{
    if (!in->has_pre)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_MISSING, PMPD_NO_OFFSET,
                              "GGUF tokenizer.ggml.pre is missing: a gpt2 vocabulary needs its pre-tokenizer");
    v->pre = pmpd_pretok_from_name((const char *)in->pre, (size_t)in->pre_length);
    if (v->pre == 0) {
        char name[65];
        size_t i, n = in->pre_length < 64 ? (size_t)in->pre_length : 64;
        for (i = 0; i < n; i++)
            name[i] = in->pre[i] >= 0x20 && in->pre[i] < 0x7F ? (char)in->pre[i] : '?';
        name[n] = '\0';
        return pmpd_error_set(err, PMPD_ERR_UNSUPPORTED, in->pre_at,
                              "GGUF tokenizer.ggml.pre \"%s\" is not a pre-tokenizer this build has "
                              "(llama-bpe, qwen2, smollm, gpt-2, starcoder, refact, mpt, deepseek-r1-qwen)", name);
    }
    return PMPD_OK;
}

static pmpd_status gbpe_types(const pmpd_gguf_bpe_input *in, pmpd_bpe_vocab *v, pmpd_error *err)
{
    uint64_t i;
    for (i = 0; i < in->n_tokens; i++) {
        uint32_t type = PMPD_TOKEN_TYPE_NORMAL;
        if (in->has_types) {
            type = pmpd_le_u32(in->data + in->types_at + 4 * i);
            if (type < PMPD_TOKEN_TYPE_NORMAL || type > PMPD_TOKEN_TYPE_BYTE)
                return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, in->types_at + 4 * i,
                                      "GGUF token %llu has type %d, not 1..6", (unsigned long long)i, (int)type);
        }
        v->types[i] = (unsigned char)type;
    }
    return PMPD_OK;
}

/* Checks each token's text and stores its piece; texts[] gets the GGUF
 * text of each token for the merges. */
static pmpd_status gbpe_tokens(const pmpd_gguf_bpe_input *in, pmpd_bpe_vocab *v, gbpe_text *texts, pmpd_error *err)
{
    size_t at = in->tokens_at;
    uint64_t i, blob = 0;
    for (i = 0; i < in->n_tokens; i++) {
        uint64_t length = pmpd_le_u64(in->data + at), k = 0;
        const unsigned char *s = in->data + at + 8;
        int normal = v->types[i] == PMPD_TOKEN_TYPE_NORMAL;
        if (length > PMPD_TOK_MAX_PIECE)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, at, "GGUF token %llu is %llu bytes long",
                                  (unsigned long long)i, (unsigned long long)length);
        texts[i].bytes = s;
        texts[i].length = length;
        texts[i].id = (uint32_t)i;
        v->offsets[i] = (uint32_t)blob;
        while (k < length) {
            uint32_t cp;
            size_t n = gbpe_utf8(s + k, (size_t)(length - k), &cp);
            int byte;
            if (n == 0)
                return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, at + 8 + k, "GGUF token %llu is not valid UTF-8",
                                      (unsigned long long)i);
            if (normal) {
                byte = gbpe_byte_of(cp);
                if (byte < 0)
                    return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, at + 8 + k,
                                          "GGUF token %llu holds U+%04X, outside the byte-level alphabet",
                                          (unsigned long long)i, (unsigned)cp);
                v->blob[blob++] = (unsigned char)byte;
            } else {
                memcpy(v->blob + blob, s + k, n);
                blob += n;
            }
            k += n;
        }
        if (blob - v->offsets[i] > v->max_token_length)
            v->max_token_length = (uint32_t)(blob - v->offsets[i]);
        if (!normal && length == 0 && v->types[i] != PMPD_TOKEN_TYPE_UNUSED && v->types[i] != PMPD_TOKEN_TYPE_BYTE)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, at, "GGUF special token %llu is empty",
                                  (unsigned long long)i);
        at += 8 + (size_t)length;
    }
    v->offsets[in->n_tokens] = (uint32_t)blob;
    if (v->max_token_length == 0)
        v->max_token_length = 1;
    return PMPD_OK;
}

static pmpd_status gbpe_merges(const pmpd_gguf_bpe_input *in, pmpd_bpe_vocab *v, gbpe_text *texts, pmpd_error *err)
{
    size_t at = in->merges_at;
    uint64_t i;
    qsort(texts, (size_t)in->n_tokens, sizeof *texts, gbpe_text_compare);
    for (i = 0; i < in->n_merges; i++) {
        uint64_t length = pmpd_le_u64(in->data + at), split;
        const unsigned char *s = in->data + at + 8;
        int64_t left, right;
        for (split = 1; split < length && s[split] != ' '; split++)
            continue;
        if (split + 1 >= length)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, at, "GGUF merge %llu is not two pieces joined by a space",
                                  (unsigned long long)i);
        left = gbpe_find(texts, v->n_tokens, s, split);
        right = gbpe_find(texts, v->n_tokens, s + split + 1, length - split - 1);
        if (left < 0 || right < 0)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, at + 8 + (left < 0 ? 0 : split + 1),
                                  "GGUF merge %llu names a %s piece that is not in the vocabulary",
                                  (unsigned long long)i, left < 0 ? "left" : "right");
        if (v->types[left] != PMPD_TOKEN_TYPE_NORMAL || v->types[right] != PMPD_TOKEN_TYPE_NORMAL)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, at, "GGUF merge %llu names a token that is not normal",
                                  (unsigned long long)i);
        v->merges[2 * i] = (uint32_t)left;
        v->merges[2 * i + 1] = (uint32_t)right;
        at += 8 + (size_t)length;
    }
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_import_gguf_bpe_vocab(const pmpd_gguf_bpe_input *in, pmpd_bpe_vocab *out,
                                                     pmpd_error *err)
{
    size_t at = in->tokens_at;
    uint64_t i, blob_size = 0;
    gbpe_text *texts = NULL;
    pmpd_status status;
    memset(out, 0, sizeof *out);
    if (in->n_tokens == 0 || in->n_tokens > PMPD_MAX_HPARAM)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, in->tokens_at - 8, "GGUF vocabulary of %llu tokens",
                              (unsigned long long)in->n_tokens);
    if ((status = gbpe_pre(in, out, err)) != PMPD_OK)
        return status;
    if (!in->has_merges)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_MISSING, PMPD_NO_OFFSET,
                              "GGUF tokenizer.ggml.merges is missing: a gpt2 (byte-level BPE) vocabulary needs them");
    if (in->merges_element != GBPE_GGUF_STRING || in->n_merges == 0 || in->n_merges > PMPD_TOK2_MAX_MERGES)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, in->merges_key_at,
                              "GGUF tokenizer.ggml.merges is not 1..%u strings", (unsigned)PMPD_TOK2_MAX_MERGES);
    if (in->has_types && ((in->types_element != GBPE_GGUF_INT32 && in->types_element != GBPE_GGUF_UINT32) ||
                          in->n_types != in->n_tokens))
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, in->types_at,
                              "GGUF tokenizer.ggml.token_type is not %llu int32 values", (unsigned long long)in->n_tokens);
    if (in->eot_id != PMPD_TOK2_NO_TOKEN && in->eot_id >= in->n_tokens)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_HPARAMS, PMPD_NO_OFFSET,
                              "GGUF tokenizer.ggml.eot_token_id %u is outside the vocabulary", (unsigned)in->eot_id);
    for (i = 0; i < in->n_tokens; i++) {
        uint64_t length = pmpd_le_u64(in->data + at);
        blob_size += length;
        at += 8 + (size_t)length;
    }
    if (blob_size > UINT32_MAX)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, in->tokens_at, "GGUF vocabulary text is too large");
    out->n_tokens = (uint32_t)in->n_tokens;
    out->n_merges = (uint32_t)in->n_merges;
    out->eot_id = in->eot_id;
    out->flags = ((in->add_bos < 0 ? out->pre == PMPD_PRETOK_LLAMA3 : in->add_bos) ? PMPD_TOK_FLAG_ADD_BOS : 0u) |
                 (in->add_eos > 0 ? PMPD_TOK_FLAG_ADD_EOS : 0u);
    out->offsets = (uint32_t *)malloc(((size_t)in->n_tokens + 1) * sizeof *out->offsets);
    out->blob = (unsigned char *)malloc(blob_size ? (size_t)blob_size : 1);
    out->types = (unsigned char *)malloc((size_t)in->n_tokens);
    out->merges = (uint32_t *)malloc((size_t)in->n_merges * 2 * sizeof *out->merges);
    texts = (gbpe_text *)malloc((size_t)in->n_tokens * sizeof *texts);
    if (!out->offsets || !out->blob || !out->types || !out->merges || !texts)
        status = pmpd_error_set(err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory for the vocabulary");
    if (status == PMPD_OK)
        status = gbpe_types(in, out, err);
    if (status == PMPD_OK)
        status = gbpe_tokens(in, out, texts, err);
    if (status == PMPD_OK)
        status = gbpe_merges(in, out, texts, err);
    free(texts);
    if (status != PMPD_OK)
        pmpd_bpe_vocab_free(out);
    return status;
}

#undef GBPE_GGUF_INT32
#undef GBPE_GGUF_UINT32
#undef GBPE_GGUF_STRING
