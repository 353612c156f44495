/* Serializes a byte-level BPE vocabulary as a version 2 tokenizer section
 * (layout in container.h), doing offline, with the heap, every sort and
 * search the runtime must not: pieces sorted for lookups, merges resolved
 * to their merged ids and sorted by (left, right), specials listed longest
 * first. */
#include "pmpd_impl/offline/format/builder.h"

#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/core/error.h"
#include "pmpd_impl/format/le.h"

typedef struct bpev_merge {
    uint32_t left, right, merged, rank;
} bpev_merge;

static int bpev_merge_compare(const void *a, const void *b)
{
    const bpev_merge *x = (const bpev_merge *)a, *y = (const bpev_merge *)b;
    if (x->left != y->left)
        return x->left < y->left ? -1 : 1;
    if (x->right != y->right)
        return x->right < y->right ? -1 : 1;
    return x->rank < y->rank ? -1 : (x->rank > y->rank ? 1 : 0);
}

static const pmpd_bpe_vocab *bpev_special_vocab;

static int bpev_special_compare(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    const pmpd_bpe_vocab *v = bpev_special_vocab;
    uint32_t lx = v->offsets[x + 1] - v->offsets[x], ly = v->offsets[y + 1] - v->offsets[y];
    if (lx != ly)
        return lx > ly ? -1 : 1;
    return x < y ? -1 : (x > y ? 1 : 0);
}

static int bpev_is_special(unsigned char type)
{
    return type == PMPD_TOKEN_TYPE_CONTROL || type == PMPD_TOKEN_TYPE_USER_DEFINED || type == PMPD_TOKEN_TYPE_UNKNOWN;
}

/* The normal token whose piece is bytes[0 .. length), or -1. */
static int64_t bpev_find(const pmpd_bpe_vocab *v, const pmpd_build_piece *sorted, const unsigned char *bytes, uint32_t length)
{
    size_t lo = 0, hi = v->n_tokens;
    pmpd_build_piece key;
    key.bytes = bytes;
    key.length = length;
    key.id = 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pmpd_build_piece_compare(&sorted[mid], &key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < v->n_tokens; lo++) {
        const pmpd_build_piece *p = &sorted[lo];
        if (p->length != length || memcmp(p->bytes, bytes, length) != 0)
            break;
        if (v->types[p->id] == PMPD_TOKEN_TYPE_NORMAL)
            return p->id;
    }
    return -1;
}

static pmpd_status bpev_resolve_merges(const pmpd_bpe_vocab *v, const pmpd_build_piece *sorted, bpev_merge *m,
                                       uint32_t *kept, pmpd_error *err)
{
    unsigned char *joined = (unsigned char *)malloc(2u * (size_t)v->max_token_length + 1);
    uint32_t k, n = 0;
    if (!joined)
        return pmpd_error_set(err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory for the merges");
    for (k = 0; k < v->n_merges; k++) {
        uint32_t l = v->merges[2 * k], r = v->merges[2 * k + 1], ll, rl;
        int64_t id;
        if (l >= v->n_tokens || r >= v->n_tokens) {
            free(joined);
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, PMPD_NO_OFFSET,
                                  "merge %u names token %u, outside the vocabulary of %u", (unsigned)k,
                                  (unsigned)(l >= v->n_tokens ? l : r), (unsigned)v->n_tokens);
        }
        ll = v->offsets[l + 1] - v->offsets[l];
        rl = v->offsets[r + 1] - v->offsets[r];
        memcpy(joined, v->blob + v->offsets[l], ll);
        memcpy(joined + ll, v->blob + v->offsets[r], rl);
        id = ll && rl ? bpev_find(v, sorted, joined, ll + rl) : -1;
        if (id < 0) {
            free(joined);
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, PMPD_NO_OFFSET,
                                  "merge %u of tokens %u and %u makes no token of the vocabulary", (unsigned)k,
                                  (unsigned)l, (unsigned)r);
        }
        m[n].left = l;
        m[n].right = r;
        m[n].merged = (uint32_t)id;
        m[n].rank = k;
        n++;
    }
    free(joined);
    qsort(m, n, sizeof *m, bpev_merge_compare);
    /* Keep the first rank of a pair listed twice. */
    *kept = 0;
    for (k = 0; k < n; k++)
        if (*kept == 0 || m[*kept - 1].left != m[k].left || m[*kept - 1].right != m[k].right)
            m[(*kept)++] = m[k];
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_build_add_bpe_vocab(pmpd_build_model *b, const pmpd_bpe_vocab *v, pmpd_error *err)
{
    uint64_t n = v->n_tokens, blob_size = v->offsets[n], size, types_at, blob_at;
    uint32_t i, n_special = 0, kept = 0;
    pmpd_build_piece *pieces = NULL;
    bpev_merge *merges = NULL;
    uint32_t *special = NULL;
    unsigned char *s = NULL, *at;
    pmpd_status status;
    if (n == 0 || blob_size > UINT32_MAX || v->n_merges == 0)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET, "empty vocabulary or no merges");
    pieces = (pmpd_build_piece *)malloc((size_t)n * sizeof *pieces);
    merges = (bpev_merge *)malloc((size_t)v->n_merges * sizeof *merges);
    special = (uint32_t *)malloc((size_t)n * sizeof *special);
    if (!pieces || !merges || !special) {
        status = pmpd_error_set(err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory for the vocabulary");
        goto done;
    }
    for (i = 0; i < n; i++) {
        pieces[i].bytes = v->blob + v->offsets[i];
        pieces[i].length = v->offsets[i + 1] - v->offsets[i];
        pieces[i].id = i;
        if (bpev_is_special(v->types[i]))
            special[n_special++] = i;
    }
    qsort(pieces, (size_t)n, sizeof *pieces, pmpd_build_piece_compare);
    bpev_special_vocab = v;
    qsort(special, n_special, sizeof *special, bpev_special_compare);
    status = bpev_resolve_merges(v, pieces, merges, &kept, err);
    if (status != PMPD_OK)
        goto done;
    types_at = PMPD_TOK2_HEADER_SIZE + 4u * (n + 1) + 4u * n + 4u * (uint64_t)n_special +
               (uint64_t)PMPD_TOK2_MERGE_SIZE * kept;
    blob_at = (types_at + n + 3) / 4 * 4;
    size = blob_at + blob_size;
    if (size > SIZE_MAX) {
        status = pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET, "vocabulary too large");
        goto done;
    }
    s = (unsigned char *)calloc(1, (size_t)size);
    if (!s) {
        status = pmpd_error_set(err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory for the vocabulary");
        goto done;
    }
    pmpd_le_put_u32(s + PMPD_TOK_N_TOKENS, v->n_tokens);
    pmpd_le_put_u32(s + PMPD_TOK_MAX_TOKEN_LENGTH, v->max_token_length);
    pmpd_le_put_u32(s + PMPD_TOK_FLAGS, v->flags);
    pmpd_le_put_u32(s + PMPD_TOK_BLOB_SIZE, (uint32_t)blob_size);
    pmpd_le_put_u32(s + PMPD_TOK2_MODEL, PMPD_TOK2_MODEL_BPE);
    pmpd_le_put_u32(s + PMPD_TOK2_PRE, v->pre);
    pmpd_le_put_u32(s + PMPD_TOK2_N_MERGES, kept);
    pmpd_le_put_u32(s + PMPD_TOK2_N_SPECIAL, n_special);
    pmpd_le_put_u32(s + PMPD_TOK2_EOT_ID, v->eot_id);
    at = s + PMPD_TOK2_HEADER_SIZE;
    for (i = 0; i <= n; i++, at += 4)
        pmpd_le_put_u32(at, v->offsets[i]);
    for (i = 0; i < n; i++, at += 4)
        pmpd_le_put_u32(at, pieces[i].id);
    for (i = 0; i < n_special; i++, at += 4)
        pmpd_le_put_u32(at, special[i]);
    for (i = 0; i < kept; i++, at += PMPD_TOK2_MERGE_SIZE) {
        pmpd_le_put_u32(at, merges[i].left);
        pmpd_le_put_u32(at + 4, merges[i].right);
        pmpd_le_put_u32(at + 8, merges[i].merged);
        pmpd_le_put_u32(at + 12, merges[i].rank);
    }
    memcpy(at, v->types, (size_t)n);
    if (blob_size)
        memcpy(s + blob_at, v->blob, (size_t)blob_size);
    status = pmpd_build_add_section(b, PMPD_SECTION_TOKENIZER, PMPD_TOKENIZER_VERSION_BPE, PMPD_SECTION_FLAG_REQUIRED,
                                    s, size);
    if (status != PMPD_OK)
        pmpd_error_set(err, status, PMPD_NO_OFFSET, "cannot add the tokenizer section");
done:
    free(pieces);
    free(merges);
    free(special);
    free(s);
    return status;
}

PMPD_INTERNAL void pmpd_bpe_vocab_free(pmpd_bpe_vocab *v)
{
    if (!v)
        return;
    free(v->offsets);
    free(v->blob);
    free(v->types);
    free(v->merges);
    memset(v, 0, sizeof *v);
}
