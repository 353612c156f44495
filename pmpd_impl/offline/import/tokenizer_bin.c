/* llama2.c tokenizer.bin: int32 max_token_length, then per token an f32
 * score, an int32 length and that many bytes.  The count is not stored: it
 * is the model's vocab_size. */
#include "pmpd_impl/offline/import/import.h"

#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/core/error.h"
#include "pmpd_impl/format/le.h"

/* Walks the entries; with v->offsets set, also stores them. */
static pmpd_status tokbin_walk(const unsigned char *data, size_t size, uint32_t max_length, uint32_t limit,
                               uint32_t *count, pmpd_vocab *v, pmpd_error *err)
{
    size_t at = 4;
    uint32_t n = 0, blob = 0;
    while (limit ? n < limit : at < size) {
        uint32_t length;
        if (size - at < 8)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_TRUNCATED, at, "tokenizer entry %u is cut off after %zu bytes",
                                  (unsigned)n, size - at);
        if (!pmpd_f32_bits_finite(pmpd_le_u32(data + at)))
            return pmpd_error_set(err, PMPD_ERR_FORMAT_NONFINITE, at, "score of token %u is not finite", (unsigned)n);
        length = pmpd_le_u32(data + at + 4);
        if (length > max_length)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, at + 4,
                                  "token %u length %d is negative or above max_token_length %u", (unsigned)n,
                                  (int)(int32_t)length, (unsigned)max_length);
        if (size - at - 8 < length)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_TRUNCATED, at + 8,
                                  "token %u needs %u bytes but only %zu remain", (unsigned)n, (unsigned)length,
                                  size - at - 8);
        if (v->offsets) {
            v->scores[n] = pmpd_le_f32(data + at);
            v->offsets[n] = blob;
            memcpy(v->blob + blob, data + at + 8, length);
        }
        blob += length;
        at += 8 + (size_t)length;
        n++;
    }
    if (at != size)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_BOUNDS, at, "%zu bytes follow the last of %u tokens", size - at,
                              (unsigned)n);
    if (v->offsets)
        v->offsets[n] = blob;
    *count = n;
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_import_llama2c_tokenizer(const unsigned char *data, size_t size, uint32_t vocab_size,
                                          pmpd_vocab *out, pmpd_error *err)
{
    uint32_t max_length, n;
    size_t blob_size;
    pmpd_status status;
    pmpd_error_clear(err);
    memset(out, 0, sizeof *out);
    if (size < 4)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_TRUNCATED, size, "tokenizer ends at byte %zu, inside its header",
                              size);
    if (size > UINT32_MAX)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, 0, "tokenizer file of %zu bytes is too large", size);
    max_length = pmpd_le_u32(data);
    if (max_length == 0 || max_length > PMPD_TOK_MAX_PIECE)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, 0, "max_token_length %d is outside 1..%u",
                              (int)(int32_t)max_length, (unsigned)PMPD_TOK_MAX_PIECE);
    /* First pass validates and counts, so allocations follow the bytes. */
    status = tokbin_walk(data, size, max_length, vocab_size, &n, out, err);
    if (status != PMPD_OK)
        return status;
    if (n == 0)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, 4, "tokenizer holds no tokens");
    if (n > PMPD_MAX_HPARAM)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, 4, "tokenizer holds %u tokens, more than %u", (unsigned)n,
                              PMPD_MAX_HPARAM);
    blob_size = size - 4 - 8 * (size_t)n;
    out->n_tokens = n;
    out->max_token_length = max_length;
    out->flags = PMPD_TOK_FLAG_SPACE_PREFIX;
    out->scores = (float *)malloc((size_t)n * sizeof *out->scores);
    out->offsets = (uint32_t *)malloc(((size_t)n + 1) * sizeof *out->offsets);
    out->blob = (unsigned char *)malloc(blob_size ? blob_size : 1);
    if (!out->scores || !out->offsets || !out->blob) {
        pmpd_vocab_free(out);
        return pmpd_error_set(err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory for %u tokens", (unsigned)n);
    }
    return tokbin_walk(data, size, max_length, n, &n, out, err);
}
