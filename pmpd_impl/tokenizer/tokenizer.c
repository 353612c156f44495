#include "pmpd_impl/tokenizer/tokenizer.h"

#include <string.h>

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/core/error.h"
#include "pmpd_impl/format/container.h"
#include "pmpd_impl/format/le.h"
#include "pmpd_impl/model/model.h"
#include "pmpd_impl/tokenizer/bpe.h"
#include "pmpd_impl/tokenizer/merge.h"
#include "pmpd_impl/tokenizer/pretok.h"

PMPD_INTERNAL const unsigned char *pmpd_tokenizer_piece(const pmpd_tokenizer *tok, uint32_t id, size_t *length)
{
    uint32_t start = pmpd_le_u32(tok->offsets + 4u * id);
    *length = pmpd_le_u32(tok->offsets + 4u * id + 4u) - start;
    return tok->blob + start;
}

/* Orders piece id against the concatenation a.b as strcmp would order the
 * strings: bytewise unsigned, a proper prefix first. */
static int tok_compare_piece(const pmpd_tokenizer *tok, uint32_t id, const unsigned char *a, size_t a_length,
                             const unsigned char *b, size_t b_length)
{
    size_t length, common;
    const unsigned char *piece = pmpd_tokenizer_piece(tok, id, &length);
    int c;
    common = length < a_length ? length : a_length;
    c = common ? memcmp(piece, a, common) : 0;
    if (c != 0 || length <= a_length)
        return c != 0 ? c : (length < a_length || b_length > 0 ? -1 : 0);
    piece += a_length;
    length -= a_length;
    common = length < b_length ? length : b_length;
    c = common ? memcmp(piece, b, common) : 0;
    if (c != 0)
        return c;
    return length < b_length ? -1 : (length > b_length ? 1 : 0);
}

PMPD_INTERNAL int32_t pmpd_tokenizer_lookup(const pmpd_tokenizer *tok, const unsigned char *a, size_t a_length,
                                            const unsigned char *b, size_t b_length)
{
    /* First match in the sorted order, so among equal pieces the lowest id wins. */
    size_t lo = 0, hi = tok->n_tokens;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint32_t id = pmpd_le_u32(tok->sorted + 4u * mid);
        if (tok_compare_piece(tok, id, a, a_length, b, b_length) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < tok->n_tokens) {
        uint32_t id = pmpd_le_u32(tok->sorted + 4u * lo);
        if (tok_compare_piece(tok, id, a, a_length, b, b_length) == 0)
            return (int32_t)id;
    }
    return -1;
}

static int tok_hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* The byte a "<0xNN>" piece stands for, or -1. */
static int tok_byte_piece_value(const unsigned char *piece, size_t length)
{
    int hi, lo;
    if (length != 6 || piece[0] != '<' || piece[1] != '0' || piece[2] != 'x' || piece[5] != '>')
        return -1;
    hi = tok_hex_value(piece[3]);
    lo = tok_hex_value(piece[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

PMPD_INTERNAL pmpd_status pmpd_tokenizer_check_sorted(const pmpd_tokenizer *tok, uint64_t sorted_offset,
                                                      pmpd_error *err)
{
    uint32_t k;
    for (k = 0; k < tok->n_tokens; k++) {
        uint32_t id = pmpd_le_u32(tok->sorted + 4u * k);
        if (id >= tok->n_tokens)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, sorted_offset + 4u * k,
                                  "tokenizer sorted index entry %u is id %u, outside the vocabulary of %u",
                                  (unsigned)k, (unsigned)id, (unsigned)tok->n_tokens);
        if (k > 0) {
            uint32_t prev = pmpd_le_u32(tok->sorted + 4u * (k - 1));
            size_t length;
            const unsigned char *piece = pmpd_tokenizer_piece(tok, id, &length);
            int c = tok_compare_piece(tok, prev, piece, length, NULL, 0);
            if (c > 0 || (c == 0 && prev >= id))
                return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, sorted_offset + 4u * k,
                                      "tokenizer sorted index is not in increasing order at entry %u",
                                      (unsigned)k);
        }
    }
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_tokenizer_parse(pmpd_tokenizer *tok, const unsigned char *data, uint64_t size,
                                               uint64_t file_offset, uint32_t vocab_size, uint32_t bos_id,
                                               uint32_t eos_id, pmpd_error *err)
{
    uint64_t n, blob_size, expected, scores_at, offsets_at, sorted_at, blob_at;
    uint32_t i, flags, max_length;
    pmpd_status status;
    memset(tok, 0, sizeof *tok);
    if (size < PMPD_TOK_HEADER_SIZE)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_TRUNCATED, file_offset,
                              "tokenizer section is %llu bytes, shorter than its 16-byte header",
                              (unsigned long long)size);
    n = pmpd_le_u32(data + PMPD_TOK_N_TOKENS);
    max_length = pmpd_le_u32(data + PMPD_TOK_MAX_TOKEN_LENGTH);
    flags = pmpd_le_u32(data + PMPD_TOK_FLAGS);
    blob_size = pmpd_le_u32(data + PMPD_TOK_BLOB_SIZE);
    if (n != vocab_size)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, file_offset + PMPD_TOK_N_TOKENS,
                              "tokenizer n_tokens is %llu but the model's vocab_size is %u",
                              (unsigned long long)n, (unsigned)vocab_size);
    if (max_length == 0 || max_length > PMPD_TOK_MAX_PIECE)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, file_offset + PMPD_TOK_MAX_TOKEN_LENGTH,
                              "tokenizer max_token_length %u is outside 1..%u", (unsigned)max_length,
                              (unsigned)PMPD_TOK_MAX_PIECE);
    if ((flags & ~PMPD_TOK_FLAG_SPACE_PREFIX) != 0)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, file_offset + PMPD_TOK_FLAGS,
                              "tokenizer flags 0x%x has unknown bits", (unsigned)flags);
    /* n < 2^24 (checked against the header's limits), so nothing here overflows. */
    scores_at = PMPD_TOK_HEADER_SIZE;
    offsets_at = scores_at + 4u * n;
    sorted_at = offsets_at + 4u * (n + 1);
    blob_at = sorted_at + 4u * n;
    expected = blob_at + blob_size;
    if (expected != size)
        return pmpd_error_set(err, size < expected ? PMPD_ERR_FORMAT_TRUNCATED : PMPD_ERR_FORMAT_BOUNDS,
                              file_offset + PMPD_TOK_BLOB_SIZE,
                              "tokenizer section is %llu bytes but its counts imply %llu",
                              (unsigned long long)size, (unsigned long long)expected);
    tok->n_tokens = (uint32_t)n;
    tok->model = 1;
    tok->eot_id = PMPD_TOK2_NO_TOKEN;
    tok->max_token_length = max_length;
    tok->flags = flags;
    tok->bos_id = bos_id;
    tok->eos_id = eos_id;
    tok->scores = data + scores_at;
    tok->offsets = data + offsets_at;
    tok->sorted = data + sorted_at;
    tok->blob = data + blob_at;
    for (i = 0; i < n; i++) {
        uint32_t score_bits = pmpd_le_u32(tok->scores + 4u * i);
        uint32_t start = pmpd_le_u32(tok->offsets + 4u * i);
        uint32_t end = pmpd_le_u32(tok->offsets + 4u * i + 4u);
        if (!pmpd_f32_bits_finite(score_bits))
            return pmpd_error_set(err, PMPD_ERR_FORMAT_NONFINITE, file_offset + scores_at + 4u * i,
                                  "tokenizer score of token %u is not finite", (unsigned)i);
        if ((i == 0 && start != 0) || end < start || end > blob_size || end - start > max_length)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_BOUNDS, file_offset + offsets_at + 4u * i,
                                  "tokenizer piece %u spans bytes %u..%u of a %llu-byte blob "
                                  "(max_token_length %u)",
                                  (unsigned)i, (unsigned)start, (unsigned)end, (unsigned long long)blob_size,
                                  (unsigned)max_length);
    }
    if (pmpd_le_u32(tok->offsets + 4u * n) != blob_size)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_BOUNDS, file_offset + offsets_at + 4u * n,
                              "tokenizer pieces end at byte %u, not at the blob size %llu",
                              (unsigned)pmpd_le_u32(tok->offsets + 4u * n), (unsigned long long)blob_size);
    status = pmpd_tokenizer_check_sorted(tok, file_offset + sorted_at, err);
    if (status != PMPD_OK) {
        tok->n_tokens = 0;
        return status;
    }
    for (i = 0; i < 256; i++) {
        static const char hex[] = "0123456789ABCDEF";
        unsigned char name[6];
        name[0] = '<';
        name[1] = '0';
        name[2] = 'x';
        name[3] = (unsigned char)hex[i >> 4];
        name[4] = (unsigned char)hex[i & 15];
        name[5] = '>';
        tok->byte_ids[i] = pmpd_tokenizer_lookup(tok, name, sizeof name, NULL, 0);
    }
    tok->space_id = pmpd_tokenizer_lookup(tok, (const unsigned char *)" ", 1, NULL, 0);
    return PMPD_OK;
}

/* Appends the tokens of one UTF-8 character (or stray bytes): the piece if
 * the vocabulary has it, else one <0xNN> token per byte (token 0, <unk> in
 * Llama vocabularies, for a byte without one). */
static size_t tok_emit_chunk(const pmpd_tokenizer *tok, const unsigned char *chunk, size_t length, int32_t *out)
{
    int32_t id = pmpd_tokenizer_lookup(tok, chunk, length, NULL, 0);
    size_t i;
    if (id >= 0) {
        out[0] = id;
        return 1;
    }
    for (i = 0; i < length; i++)
        out[i] = tok->byte_ids[chunk[i]] >= 0 ? tok->byte_ids[chunk[i]] : 0;
    return length;
}

/* llama2.c's run.c encoding into ids (capacity length + 3); returns the count. */
static size_t tok_encode_spm(const pmpd_tokenizer *tok, const unsigned char *s, size_t length, unsigned flags,
                             int32_t *ids, void *work)
{
    size_t n = 0, i, chunk_length = 0;
    unsigned char chunk[4];
    if (flags & PMPD_TOKENIZE_BOS)
        ids[n++] = (int32_t)tok->bos_id;
    if (length > 0 && (tok->flags & PMPD_TOK_FLAG_SPACE_PREFIX))
        n += tok_emit_chunk(tok, (const unsigned char *)" ", 1, ids + n);
    for (i = 0; i < length; i++) {
        /* A UTF-8 character is a lead byte plus up to three continuation bytes. */
        if ((s[i] & 0xC0) != 0x80)
            chunk_length = 0;
        chunk[chunk_length++] = s[i];
        if (i + 1 < length && (s[i + 1] & 0xC0) == 0x80 && chunk_length < 4)
            continue;
        n += tok_emit_chunk(tok, chunk, chunk_length, ids + n);
        chunk_length = 0;
    }
    n = pmpd_tokenizer_merge(tok, ids, n, work);
    if (flags & PMPD_TOKENIZE_EOS)
        ids[n++] = (int32_t)tok->eos_id;
    return n;
}

PMPD_INTERNAL pmpd_status pmpd_tokenizer_encode(const pmpd_tokenizer *tok, const char *text, size_t length,
                                                unsigned flags, int32_t *tokens, size_t max_tokens,
                                                size_t *n_tokens, pmpd_arena *scratch)
{
    size_t capacity, n;
    int32_t *ids;
    pmpd_arena_mark mark;
    pmpd_status status;
    if (n_tokens)
        *n_tokens = 0;
    if (!tok || !text || (!tokens && max_tokens) || !n_tokens || !scratch || !scratch->base)
        return PMPD_ERR_INVALID_ARGUMENT;
    if (tok->n_tokens == 0)
        return PMPD_ERR_FORMAT_MISSING;
    if ((flags & PMPD_TOKENIZE_SPECIAL) && tok->model != PMPD_TOK2_MODEL_BPE)
        return PMPD_ERR_UNSUPPORTED;
    if (!pmpd_checked_add(length, 3, &capacity) || capacity > PMPD_TOK_MERGE_MAX_SYMBOLS)
        return PMPD_ERR_OVERFLOW;
    mark = pmpd_arena_save(scratch);
    status = pmpd_arena_alloc_array(scratch, capacity, sizeof(int32_t) + PMPD_TOK_MERGE_BYTES_PER_SYMBOL,
                                    PMPD_ARENA_ALIGNMENT, (void **)&ids);
    if (status != PMPD_OK)
        return status;
    if (tok->model == PMPD_TOK2_MODEL_BPE)
        n = pmpd_tokenizer_encode_bpe(tok, (const unsigned char *)text, length, flags, ids, ids + capacity);
    else
        n = tok_encode_spm(tok, (const unsigned char *)text, length, flags, ids, ids + capacity);
    *n_tokens = n;
    if (n > max_tokens) {
        status = PMPD_ERR_INVALID_ARGUMENT;
    } else {
        if (n)
            memcpy(tokens, ids, n * sizeof *ids);
        status = PMPD_OK;
    }
    pmpd_arena_restore(scratch, mark);
    return status;
}

PMPD_INTERNAL pmpd_status pmpd_tokenizer_decode(const pmpd_tokenizer *tok, int32_t prev_token, int32_t token,
                                                const char **piece, size_t *length)
{
    const unsigned char *p;
    size_t n;
    int byte;
    if (!tok || !piece || !length)
        return PMPD_ERR_INVALID_ARGUMENT;
    if (tok->n_tokens == 0)
        return PMPD_ERR_FORMAT_MISSING;
    if (token < 0 || (uint32_t)token >= tok->n_tokens)
        return PMPD_ERR_TOKEN_RANGE;
    p = pmpd_tokenizer_piece(tok, (uint32_t)token, &n);
    if (tok->model == PMPD_TOK2_MODEL_BPE) {
        /* Pieces are stored as raw bytes (the importer undid the byte-level
         * alphabet). */
        *piece = (const char *)p;
        *length = n;
        return PMPD_OK;
    }
    if (prev_token >= 0 && (uint32_t)prev_token == tok->bos_id && n > 0 && p[0] == ' ') {
        p++;
        n--;
    }
    byte = tok_byte_piece_value(p, n);
    if (byte >= 0) {
        /* The piece's text is not the byte itself: point into a constant
         * table holding every byte value. */
        static const unsigned char pmpd_tok_all_bytes[] = {
#define PMPD_TOK_ROW(h) h##0, h##1, h##2, h##3, h##4, h##5, h##6, h##7, h##8, h##9, h##A, h##B, h##C, h##D, h##E, h##F
            PMPD_TOK_ROW(0x0), PMPD_TOK_ROW(0x1), PMPD_TOK_ROW(0x2), PMPD_TOK_ROW(0x3),
            PMPD_TOK_ROW(0x4), PMPD_TOK_ROW(0x5), PMPD_TOK_ROW(0x6), PMPD_TOK_ROW(0x7),
            PMPD_TOK_ROW(0x8), PMPD_TOK_ROW(0x9), PMPD_TOK_ROW(0xA), PMPD_TOK_ROW(0xB),
            PMPD_TOK_ROW(0xC), PMPD_TOK_ROW(0xD), PMPD_TOK_ROW(0xE), PMPD_TOK_ROW(0xF)
#undef PMPD_TOK_ROW
        };
        p = pmpd_tok_all_bytes + byte;
        n = 1;
    }
    *piece = (const char *)p;
    *length = n;
    return PMPD_OK;
}

pmpd_status pmpd_tokenize(const pmpd_model *model, const char *text, int add_bos, int add_eos, int32_t *tokens,
                          size_t max_tokens, size_t *n_tokens, pmpd_arena *scratch)
{
    unsigned flags = (add_bos ? PMPD_TOKENIZE_BOS : 0u) | (add_eos ? PMPD_TOKENIZE_EOS : 0u);
    if (n_tokens)
        *n_tokens = 0;
    if (!model || !text)
        return PMPD_ERR_INVALID_ARGUMENT;
    return pmpd_tokenizer_encode(&model->tokenizer, text, strlen(text), flags, tokens, max_tokens, n_tokens,
                                 scratch);
}

pmpd_status pmpd_tokenize_text(const pmpd_model *model, const char *text, size_t length, unsigned flags,
                               int32_t *tokens, size_t max_tokens, size_t *n_tokens, pmpd_arena *scratch)
{
    const pmpd_tokenizer *tok;
    if (n_tokens)
        *n_tokens = 0;
    if (!model)
        return PMPD_ERR_INVALID_ARGUMENT;
    tok = &model->tokenizer;
    if (flags & PMPD_TOKENIZE_MODEL_BOS) {
        /* llama2.c vocabularies always start with BOS; version 2 says. */
        if (tok->model != PMPD_TOK2_MODEL_BPE || (tok->flags & PMPD_TOK_FLAG_ADD_BOS))
            flags |= PMPD_TOKENIZE_BOS;
        if (tok->model == PMPD_TOK2_MODEL_BPE && (tok->flags & PMPD_TOK_FLAG_ADD_EOS))
            flags |= PMPD_TOKENIZE_EOS;
    }
    return pmpd_tokenizer_encode(tok, text, length, flags, tokens, max_tokens, n_tokens, scratch);
}

int pmpd_token_is_control(const pmpd_model *model, int32_t token)
{
    const pmpd_tokenizer *tok;
    uint32_t type;
    if (!model || token < 0 || (uint32_t)token >= model->tokenizer.n_tokens)
        return 0;
    tok = &model->tokenizer;
    if (tok->model != PMPD_TOK2_MODEL_BPE)
        return (uint32_t)token == tok->bos_id || (uint32_t)token == tok->eos_id;
    type = pmpd_tokenizer_type(tok, (uint32_t)token);
    return type == PMPD_TOKEN_TYPE_CONTROL || type == PMPD_TOKEN_TYPE_UNKNOWN || type == PMPD_TOKEN_TYPE_UNUSED;
}

pmpd_status pmpd_model_get_tokenizer_info(const pmpd_model *model, pmpd_tokenizer_info *info)
{
    const pmpd_tokenizer *tok;
    if (!model || !info)
        return PMPD_ERR_INVALID_ARGUMENT;
    tok = &model->tokenizer;
    memset(info, 0, sizeof *info);
    info->eot_id = -1;
    if (tok->n_tokens == 0)
        return PMPD_OK;
    info->kind = tok->model == PMPD_TOK2_MODEL_BPE ? 2u : 1u;
    info->pre = tok->model == PMPD_TOK2_MODEL_BPE ? pmpd_pretok_name(tok->pre) : NULL;
    info->n_tokens = tok->n_tokens;
    info->bos_id = tok->bos_id;
    info->eos_id = tok->eos_id;
    if (tok->eot_id != PMPD_TOK2_NO_TOKEN)
        info->eot_id = (int32_t)tok->eot_id;
    info->add_bos = tok->model != PMPD_TOK2_MODEL_BPE || (tok->flags & PMPD_TOK_FLAG_ADD_BOS) != 0;
    info->add_eos = tok->model == PMPD_TOK2_MODEL_BPE && (tok->flags & PMPD_TOK_FLAG_ADD_EOS) != 0;
    info->n_merges = tok->n_merges;
    info->n_special = tok->n_special;
    return PMPD_OK;
}

pmpd_status pmpd_token_to_piece(const pmpd_model *model, int32_t prev_token, int32_t token, const char **piece,
                                size_t *length)
{
    if (!model)
        return PMPD_ERR_INVALID_ARGUMENT;
    return pmpd_tokenizer_decode(&model->tokenizer, prev_token, token, piece, length);
}
