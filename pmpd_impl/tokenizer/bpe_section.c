/* Validation of a version 2 (byte-level BPE) tokenizer section.  The
 * encoder trusts what is checked here: ids inside the vocabulary, merges
 * sorted by (left, right) with ranks below their count and merged pieces
 * that are the concatenations they claim, the special list complete and in
 * matching order.  A byte may lack a token: vocabularies pruned to what
 * UTF-8 text holds (StarCoder's, MPT's) have none for 0xC0, 0xC1 and
 * 0xF5..0xFF; the encoder drops such bytes, as llama.cpp does. */
#include "pmpd_impl/tokenizer/bpe.h"

#include <string.h>

#include "pmpd_impl/core/error.h"
#include "pmpd_impl/format/container.h"
#include "pmpd_impl/format/le.h"
#include "pmpd_impl/tokenizer/pretok.h"

PMPD_INTERNAL uint32_t pmpd_tokenizer_type(const pmpd_tokenizer *tok, uint32_t id)
{
    return tok->types[id];
}

static int bpes_is_special_type(uint32_t type)
{
    return type == PMPD_TOKEN_TYPE_CONTROL || type == PMPD_TOKEN_TYPE_USER_DEFINED ||
           type == PMPD_TOKEN_TYPE_UNKNOWN;
}

static pmpd_status bpes_check_pieces(pmpd_tokenizer *tok, uint64_t blob_size, uint64_t at, pmpd_error *err)
{
    uint32_t i;
    for (i = 0; i < tok->n_tokens; i++) {
        uint32_t start = pmpd_le_u32(tok->offsets + 4u * i), end = pmpd_le_u32(tok->offsets + 4u * i + 4u);
        if ((i == 0 && start != 0) || end < start || end > blob_size || end - start > tok->max_token_length)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_BOUNDS, at + 4u * i,
                                  "tokenizer piece %u spans bytes %u..%u of a %llu-byte blob (max_token_length %u)",
                                  (unsigned)i, (unsigned)start, (unsigned)end, (unsigned long long)blob_size,
                                  (unsigned)tok->max_token_length);
    }
    if (pmpd_le_u32(tok->offsets + 4u * tok->n_tokens) != blob_size)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_BOUNDS, at + 4u * tok->n_tokens,
                              "tokenizer pieces end at byte %u, not at the blob size %llu",
                              (unsigned)pmpd_le_u32(tok->offsets + 4u * tok->n_tokens),
                              (unsigned long long)blob_size);
    return PMPD_OK;
}

static pmpd_status bpes_check_types(const pmpd_tokenizer *tok, uint64_t at, uint32_t *n_special_types,
                                    pmpd_error *err)
{
    uint32_t i, count = 0;
    for (i = 0; i < tok->n_tokens; i++) {
        uint32_t type = tok->types[i];
        size_t length;
        if (type < PMPD_TOKEN_TYPE_NORMAL || type > PMPD_TOKEN_TYPE_BYTE)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, at + i, "token %u has unknown type %u", (unsigned)i,
                                  (unsigned)type);
        pmpd_tokenizer_piece(tok, i, &length);
        if (bpes_is_special_type(type)) {
            if (length == 0)
                return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, at + i, "special token %u has an empty piece",
                                      (unsigned)i);
            count++;
        }
    }
    *n_special_types = count;
    return PMPD_OK;
}

/* The special list holds exactly the special-typed tokens, longest first,
 * ties by increasing id (which also rules out duplicates). */
static pmpd_status bpes_check_special(const pmpd_tokenizer *tok, uint32_t n_special_types, uint64_t at,
                                      uint64_t count_at, pmpd_error *err)
{
    uint32_t k;
    size_t prev_length = 0;
    if (tok->n_special != n_special_types)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, count_at,
                              "tokenizer lists %u special tokens but %u tokens have a special type",
                              (unsigned)tok->n_special, (unsigned)n_special_types);
    for (k = 0; k < tok->n_special; k++) {
        uint32_t id = pmpd_le_u32(tok->special + 4u * k);
        size_t length;
        if (id >= tok->n_tokens || !bpes_is_special_type(tok->types[id]))
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, at + 4u * k,
                                  "special list entry %u (id %u) is not a special token", (unsigned)k, (unsigned)id);
        pmpd_tokenizer_piece(tok, id, &length);
        if (k > 0 && (length > prev_length ||
                      (length == prev_length && id <= pmpd_le_u32(tok->special + 4u * (k - 1)))))
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, at + 4u * k,
                                  "special list is not longest-first, then by id, at entry %u", (unsigned)k);
        prev_length = length;
    }
    return PMPD_OK;
}

static pmpd_status bpes_check_merges(const pmpd_tokenizer *tok, uint64_t at, pmpd_error *err)
{
    uint32_t k, f;
    for (k = 0; k < tok->n_merges; k++) {
        const unsigned char *e = tok->merges + (size_t)PMPD_TOK2_MERGE_SIZE * k;
        uint64_t e_at = at + (uint64_t)PMPD_TOK2_MERGE_SIZE * k;
        uint32_t v[4];
        size_t l_length, r_length, m_length;
        const unsigned char *l, *r, *m;
        for (f = 0; f < 4; f++)
            v[f] = pmpd_le_u32(e + 4u * f);
        for (f = 0; f < 3; f++)
            if (v[f] >= tok->n_tokens)
                return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, e_at + 4u * f,
                                      "merge %u names token %u, outside the vocabulary of %u", (unsigned)k,
                                      (unsigned)v[f], (unsigned)tok->n_tokens);
        if (v[3] >= tok->n_merges)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, e_at + 12, "merge %u has rank %u, not below the %u merges",
                                  (unsigned)k, (unsigned)v[3], (unsigned)tok->n_merges);
        if (k > 0) {
            uint32_t pl = pmpd_le_u32(e - PMPD_TOK2_MERGE_SIZE), pr = pmpd_le_u32(e - PMPD_TOK2_MERGE_SIZE + 4);
            if (pl > v[0] || (pl == v[0] && pr >= v[1]))
                return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, e_at,
                                      "merges are not in increasing (left, right) order at entry %u", (unsigned)k);
        }
        l = pmpd_tokenizer_piece(tok, v[0], &l_length);
        r = pmpd_tokenizer_piece(tok, v[1], &r_length);
        m = pmpd_tokenizer_piece(tok, v[2], &m_length);
        if (l_length == 0 || r_length == 0 || m_length != l_length + r_length || memcmp(m, l, l_length) != 0 ||
            memcmp(m + l_length, r, r_length) != 0)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, e_at + 8,
                                  "merge %u: token %u is not token %u followed by token %u", (unsigned)k,
                                  (unsigned)v[2], (unsigned)v[0], (unsigned)v[1]);
    }
    return PMPD_OK;
}

/* The normal token whose piece is the single byte b, or -1, for every b:
 * the first sorted entry not below b, then along the equal pieces (lowest
 * id first) to a normal one. */
static void bpes_find_bytes(pmpd_tokenizer *tok)
{
    unsigned b;
    for (b = 0; b < 256; b++) {
        uint32_t lo = 0, hi = tok->n_tokens;
        tok->byte_ids[b] = -1;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            size_t length;
            const unsigned char *p = pmpd_tokenizer_piece(tok, pmpd_le_u32(tok->sorted + 4u * mid), &length);
            if (length == 0 || p[0] < b)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (; lo < tok->n_tokens; lo++) {
            uint32_t id = pmpd_le_u32(tok->sorted + 4u * lo);
            size_t length;
            const unsigned char *p = pmpd_tokenizer_piece(tok, id, &length);
            if (length != 1 || p[0] != b)
                break;
            if (tok->types[id] == PMPD_TOKEN_TYPE_NORMAL) {
                tok->byte_ids[b] = (int32_t)id;
                break;
            }
        }
    }
}

PMPD_INTERNAL pmpd_status pmpd_tokenizer_parse_bpe(pmpd_tokenizer *tok, const unsigned char *data, uint64_t size,
                                                   uint64_t file_offset, uint32_t vocab_size, uint32_t bos_id,
                                                   uint32_t eos_id, pmpd_error *err)
{
    uint64_t n, blob_size, offsets_at, sorted_at, special_at, merges_at, types_at, blob_at, expected;
    uint32_t flags, model, pre, n_special_types = 0, i;
    pmpd_status status;
    memset(tok, 0, sizeof *tok);
    if (size < PMPD_TOK2_HEADER_SIZE)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_TRUNCATED, file_offset,
                              "tokenizer section is %llu bytes, shorter than its 48-byte header",
                              (unsigned long long)size);
    n = pmpd_le_u32(data + PMPD_TOK_N_TOKENS);
    tok->max_token_length = pmpd_le_u32(data + PMPD_TOK_MAX_TOKEN_LENGTH);
    flags = pmpd_le_u32(data + PMPD_TOK_FLAGS);
    blob_size = pmpd_le_u32(data + PMPD_TOK_BLOB_SIZE);
    model = pmpd_le_u32(data + PMPD_TOK2_MODEL);
    pre = pmpd_le_u32(data + PMPD_TOK2_PRE);
    tok->n_merges = pmpd_le_u32(data + PMPD_TOK2_N_MERGES);
    tok->n_special = pmpd_le_u32(data + PMPD_TOK2_N_SPECIAL);
    tok->eot_id = pmpd_le_u32(data + PMPD_TOK2_EOT_ID);
    if (n != vocab_size)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, file_offset + PMPD_TOK_N_TOKENS,
                              "tokenizer n_tokens is %llu but the model's vocab_size is %u", (unsigned long long)n,
                              (unsigned)vocab_size);
    if (tok->max_token_length == 0 || tok->max_token_length > PMPD_TOK_MAX_PIECE)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, file_offset + PMPD_TOK_MAX_TOKEN_LENGTH,
                              "tokenizer max_token_length %u is outside 1..%u", (unsigned)tok->max_token_length,
                              (unsigned)PMPD_TOK_MAX_PIECE);
    if ((flags & ~(PMPD_TOK_FLAG_ADD_BOS | PMPD_TOK_FLAG_ADD_EOS)) != 0)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, file_offset + PMPD_TOK_FLAGS,
                              "tokenizer flags 0x%x has unknown bits", (unsigned)flags);
    if (model != PMPD_TOK2_MODEL_BPE)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, file_offset + PMPD_TOK2_MODEL,
                              "tokenizer model %u is not byte-level BPE (2)", (unsigned)model);
    if (!pmpd_pretok_name(pre))
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, file_offset + PMPD_TOK2_PRE,
                              "tokenizer pre-tokenizer %u is unknown", (unsigned)pre);
    if (tok->n_merges == 0 || tok->n_merges > PMPD_TOK2_MAX_MERGES)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, file_offset + PMPD_TOK2_N_MERGES,
                              "tokenizer n_merges %u is outside 1..%u", (unsigned)tok->n_merges,
                              (unsigned)PMPD_TOK2_MAX_MERGES);
    if (tok->n_special > n)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, file_offset + PMPD_TOK2_N_SPECIAL,
                              "tokenizer n_special %u exceeds the %u tokens", (unsigned)tok->n_special,
                              (unsigned)n);
    if (tok->eot_id != PMPD_TOK2_NO_TOKEN && tok->eot_id >= n)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, file_offset + PMPD_TOK2_EOT_ID,
                              "tokenizer eot_id %u is outside the vocabulary", (unsigned)tok->eot_id);
    for (i = PMPD_TOK2_RESERVED; i < PMPD_TOK2_HEADER_SIZE; i++)
        if (data[i] != 0)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, file_offset + i,
                                  "tokenizer reserved byte %u is not zero", (unsigned)i);
    /* n <= 2^24 and n_merges <= 2^24, so none of this overflows 64 bits. */
    offsets_at = PMPD_TOK2_HEADER_SIZE;
    sorted_at = offsets_at + 4u * (n + 1);
    special_at = sorted_at + 4u * n;
    merges_at = special_at + 4u * (uint64_t)tok->n_special;
    types_at = merges_at + (uint64_t)PMPD_TOK2_MERGE_SIZE * tok->n_merges;
    blob_at = (types_at + n + 3) / 4 * 4;
    expected = blob_at + blob_size;
    if (expected != size)
        return pmpd_error_set(err, size < expected ? PMPD_ERR_FORMAT_TRUNCATED : PMPD_ERR_FORMAT_BOUNDS,
                              file_offset + PMPD_TOK_BLOB_SIZE, "tokenizer section is %llu bytes but its counts imply %llu",
                              (unsigned long long)size, (unsigned long long)expected);
    for (i = (uint32_t)(types_at + n); i < blob_at; i++)
        if (data[i] != 0)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, file_offset + i, "tokenizer padding byte is not zero");
    tok->n_tokens = (uint32_t)n;
    tok->flags = flags;
    tok->model = model;
    tok->pre = pre;
    tok->bos_id = bos_id;
    tok->eos_id = eos_id;
    tok->space_id = -1;
    tok->offsets = data + offsets_at;
    tok->sorted = data + sorted_at;
    tok->special = data + special_at;
    tok->merges = data + merges_at;
    tok->types = data + types_at;
    tok->blob = data + blob_at;
    if ((status = bpes_check_pieces(tok, blob_size, file_offset + offsets_at, err)) == PMPD_OK &&
        (status = pmpd_tokenizer_check_sorted(tok, file_offset + sorted_at, err)) == PMPD_OK &&
        (status = bpes_check_types(tok, file_offset + types_at, &n_special_types, err)) == PMPD_OK &&
        (status = bpes_check_special(tok, n_special_types, file_offset + special_at,
                                     file_offset + PMPD_TOK2_N_SPECIAL, err)) == PMPD_OK &&
        (status = bpes_check_merges(tok, file_offset + merges_at, err)) == PMPD_OK)
        bpes_find_bytes(tok);
    if (status != PMPD_OK)
        tok->n_tokens = 0;
    return status;
}
