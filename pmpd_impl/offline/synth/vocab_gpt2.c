/* A byte-level BPE vocabulary for synthetic GGUFs, read from a small text
 * file (tests/oracle/export-llama3-vocab.mjs writes one from the
 * llama3-tokenizer-js package):
 *     pmpd-gpt2-vocab 1
 *     pre NAME          bos ID          eos ID          eot ID
 *     add_bos 0|1       (each optional, any order, before "tokens")
 *     tokens N          then N lines "TYPE TEXT" (GGUF token type, the
 *                       token's GGUF text: byte-level alphabet for normal
 *                       tokens, so no line holds a newline)
 *     merges M          then M lines "LEFT RIGHT"
 * and written as tokenizer.ggml.* with model "gpt2".  Offline, heap. */
#include "pmpd_impl/offline/synth/synth.h"

#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/core/error.h"
#include "pmpd_impl/offline/import/import.h"

/* The next line of the file (without its newline) or NULL at the end. */
static const char *sgpt2_line(const char **at, const char *end, size_t *length)
{
    const char *start = *at, *nl;
    if (start >= end)
        return NULL;
    nl = (const char *)memchr(start, '\n', (size_t)(end - start));
    if (!nl)
        nl = end;
    *length = (size_t)(nl - start);
    *at = nl < end ? nl + 1 : end;
    return start;
}

static int sgpt2_number(const char *s, size_t n, uint32_t *out)
{
    uint64_t v = 0;
    size_t i;
    if (n == 0 || n > 10)
        return 0;
    for (i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v > 0xFFFFFFFFu)
        return 0;
    *out = (uint32_t)v;
    return 1;
}

/* Keeps lines [first, first + count) as a list of strings. */
static pmpd_status sgpt2_lines(const char **at, const char *end, uint32_t count, int typed, pmpd_synth_gpt2 *g,
                               uint32_t **offsets, char **blob, pmpd_error *err)
{
    const char *start = *at;
    uint32_t i;
    size_t length, total = 0;
    *offsets = (uint32_t *)malloc(((size_t)count + 1) * sizeof **offsets);
    *blob = (char *)malloc((size_t)(end - start) + 1);
    if (typed)
        g->types = (int32_t *)malloc((size_t)count * sizeof *g->types + 1);
    if (!*offsets || !*blob || (typed && !g->types))
        return pmpd_error_set(err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory");
    for (i = 0; i < count; i++) {
        const char *line = sgpt2_line(at, end, &length);
        uint32_t type;
        if (!line)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_TRUNCATED, (uint64_t)(*at - start), "line %u of %u is missing",
                                  (unsigned)i, (unsigned)count);
        if (typed) {
            if (length < 2 || !sgpt2_number(line, 1, &type) || line[1] != ' ')
                return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, (uint64_t)(line - start),
                                      "token line %u does not start with a type digit and a space", (unsigned)i);
            g->types[i] = (int32_t)type;
            line += 2;
            length -= 2;
        }
        (*offsets)[i] = (uint32_t)total;
        memcpy(*blob + total, line, length);
        total += length;
    }
    (*offsets)[count] = (uint32_t)total;
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_synth_load_gpt2(const char *path, pmpd_synth_gpt2 *g, pmpd_error *err)
{
    unsigned char *data;
    size_t size, length;
    const char *at, *end, *line;
    pmpd_status status;
    memset(g, 0, sizeof *g);
    g->bos_id = g->eos_id = g->eot_id = 0xFFFFFFFFu;
    g->add_bos = -1;
    if ((status = pmpd_import_read_file(path, &data, &size, err)) != PMPD_OK)
        return status;
    g->file = data;
    at = (const char *)data;
    end = at + size;
    line = sgpt2_line(&at, end, &length);
    if (!line || length != 17 || memcmp(line, "pmpd-gpt2-vocab 1", 17) != 0)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_MAGIC, 0, "%s does not start with \"pmpd-gpt2-vocab 1\"", path);
    while ((line = sgpt2_line(&at, end, &length)) != NULL) {
        const char *space = (const char *)memchr(line, ' ', length);
        size_t key = space ? (size_t)(space - line) : length, vlen = space ? length - key - 1 : 0;
        const char *value = space ? space + 1 : line + length;
        uint32_t number = 0;
        int is_number = sgpt2_number(value, vlen, &number);
        if (key == 3 && memcmp(line, "pre", 3) == 0 && vlen > 0 && vlen < sizeof g->pre) {
            memcpy(g->pre, value, vlen);
            g->pre[vlen] = '\0';
        } else if (key == 3 && memcmp(line, "bos", 3) == 0 && is_number) {
            g->bos_id = number;
        } else if (key == 3 && memcmp(line, "eos", 3) == 0 && is_number) {
            g->eos_id = number;
        } else if (key == 3 && memcmp(line, "eot", 3) == 0 && is_number) {
            g->eot_id = number;
        } else if (key == 7 && memcmp(line, "add_bos", 7) == 0 && is_number && number <= 1) {
            g->add_bos = (int)number;
        } else if (key == 6 && memcmp(line, "tokens", 6) == 0 && is_number && number > 0 && g->n_tokens == 0) {
            g->n_tokens = number;
            if ((status = sgpt2_lines(&at, end, number, 1, g, &g->token_offsets, &g->token_blob, err)) != PMPD_OK)
                return status;
        } else if (key == 6 && memcmp(line, "merges", 6) == 0 && is_number && number > 0 && g->n_merges == 0) {
            g->n_merges = number;
            if ((status = sgpt2_lines(&at, end, number, 0, g, &g->merge_offsets, &g->merge_blob, err)) != PMPD_OK)
                return status;
        } else {
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, (uint64_t)(line - (const char *)data),
                                  "%s: line \"%.*s\" is not understood", path, (int)(length > 40 ? 40 : length), line);
        }
    }
    if (g->n_tokens < 2 || g->n_merges == 0 || !g->pre[0] || g->bos_id >= g->n_tokens || g->eos_id >= g->n_tokens)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_MISSING, PMPD_NO_OFFSET,
                              "%s needs tokens, merges, pre, and bos and eos inside the vocabulary", path);
    return PMPD_OK;
}

PMPD_INTERNAL void pmpd_synth_gpt2_free(pmpd_synth_gpt2 *g)
{
    free(g->file);
    free(g->token_offsets);
    free(g->token_blob);
    free(g->types);
    free(g->merge_offsets);
    free(g->merge_blob);
    memset(g, 0, sizeof *g);
}

PMPD_INTERNAL void pmpd_synth_write_vocab_gpt2(pmpd_gguf_out *o, const pmpd_synth_gpt2 *g, const char *pre)
{
    uint32_t i;
    pmpd_gguf_kv_string(o, "tokenizer.ggml.model", "gpt2");
    pmpd_gguf_kv_string(o, "tokenizer.ggml.pre", pre ? pre : g->pre);
    pmpd_gguf_kv_array(o, "tokenizer.ggml.tokens", PMPD_GGUF_STRING, g->n_tokens);
    for (i = 0; i < g->n_tokens; i++)
        pmpd_gguf_string(o, g->token_blob + g->token_offsets[i], g->token_offsets[i + 1] - g->token_offsets[i]);
    pmpd_gguf_kv_array(o, "tokenizer.ggml.token_type", PMPD_GGUF_INT32, g->n_tokens);
    for (i = 0; i < g->n_tokens; i++)
        pmpd_gguf_u32(o, (uint32_t)g->types[i]);
    pmpd_gguf_kv_array(o, "tokenizer.ggml.merges", PMPD_GGUF_STRING, g->n_merges);
    for (i = 0; i < g->n_merges; i++)
        pmpd_gguf_string(o, g->merge_blob + g->merge_offsets[i], g->merge_offsets[i + 1] - g->merge_offsets[i]);
    pmpd_gguf_kv_u32(o, "tokenizer.ggml.bos_token_id", g->bos_id);
    pmpd_gguf_kv_u32(o, "tokenizer.ggml.eos_token_id", g->eos_id);
    if (g->eot_id != 0xFFFFFFFFu)
        pmpd_gguf_kv_u32(o, "tokenizer.ggml.eot_token_id", g->eot_id);
    if (g->add_bos >= 0)
        pmpd_gguf_kv_bool(o, "tokenizer.ggml.add_bos_token", g->add_bos);
}
