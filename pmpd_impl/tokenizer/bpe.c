/* Byte-level BPE encoding.
 *
 * Special tokens are found first, as llama.cpp does: longest first, each
 * claiming its leftmost non-overlapping occurrences in text no longer
 * special has claimed.  The claims are written into the id array itself,
 * two slots ahead of their byte (slot i + 2 for byte i): ids are written
 * from the front and never get more than one slot ahead of the bytes read
 * (one id per byte at most, plus BOS), so a claim is always read before
 * its slot is overwritten, and the claims cost no memory of their own.
 * Then each stretch between specials is cut into words by the
 * pre-tokenizer and each word is merged from its bytes (merge.c). */
#include "pmpd_impl/tokenizer/bpe.h"

#include <string.h>

#include "pmpd_impl/format/container.h"
#include "pmpd_impl/format/le.h"
#include "pmpd_impl/tokenizer/merge.h"
#include "pmpd_impl/tokenizer/pretok.h"

#define BPE_FREE (-1)
#define BPE_INSIDE (-2)

PMPD_INTERNAL uint32_t pmpd_tokenizer_bpe_merge_field(const pmpd_tokenizer *tok, uint32_t index, unsigned field)
{
    return pmpd_le_u32(tok->merges + (size_t)PMPD_TOK2_MERGE_SIZE * index + 4u * field);
}

PMPD_INTERNAL int32_t pmpd_tokenizer_bpe_pair(const pmpd_tokenizer *tok, int32_t left, int32_t right)
{
    uint32_t lo = 0, hi = tok->n_merges, l = (uint32_t)left, r = (uint32_t)right;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        uint32_t ml = pmpd_tokenizer_bpe_merge_field(tok, mid, 0), mr = pmpd_tokenizer_bpe_merge_field(tok, mid, 1);
        if (ml < l || (ml == l && mr < r))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < tok->n_merges && pmpd_tokenizer_bpe_merge_field(tok, lo, 0) == l &&
        pmpd_tokenizer_bpe_merge_field(tok, lo, 1) == r)
        return (int32_t)lo;
    return -1;
}

/* The normal token whose piece is exactly bytes, or -1 (llama-bpe emits a
 * word the vocabulary holds whole without merging it). */
static int32_t bpe_whole_word(const pmpd_tokenizer *tok, const unsigned char *bytes, size_t length)
{
    int32_t id = pmpd_tokenizer_lookup(tok, bytes, length, NULL, 0);
    return id >= 0 && pmpd_tokenizer_type(tok, (uint32_t)id) == PMPD_TOKEN_TYPE_NORMAL ? id : -1;
}

/* A byte the vocabulary has no token for stays in the word as a symbol
 * that merges with nothing (as llama.cpp's would: no merge names it) and
 * is dropped afterwards. */
static size_t bpe_word(const pmpd_tokenizer *tok, const unsigned char *bytes, size_t length, int32_t *out, void *work)
{
    size_t i, n, kept;
    if (tok->pre == PMPD_PRETOK_LLAMA3 && length > 1) {
        int32_t id = bpe_whole_word(tok, bytes, length);
        if (id >= 0) {
            out[0] = id;
            return 1;
        }
    }
    for (i = 0; i < length; i++)
        out[i] = tok->byte_ids[bytes[i]];
    n = pmpd_tokenizer_merge(tok, out, length, work);
    for (i = kept = 0; i < n; i++)
        if (out[i] >= 0)
            out[kept++] = out[i];
    return kept;
}

/* Claims the occurrences of special token id in text (marks at slot + 2). */
static void bpe_claim(const pmpd_tokenizer *tok, uint32_t id, const unsigned char *text, size_t length,
                      int32_t *marks)
{
    size_t piece_length, pos = 0, k;
    const unsigned char *piece = pmpd_tokenizer_piece(tok, id, &piece_length);
    while (piece_length <= length && pos <= length - piece_length) {
        const unsigned char *hit = (const unsigned char *)memchr(text + pos, piece[0], length - piece_length - pos + 1);
        size_t at;
        if (!hit)
            return;
        at = (size_t)(hit - text);
        if (memcmp(hit, piece, piece_length) == 0) {
            for (k = 0; k < piece_length && marks[at + k] == BPE_FREE; k++)
                continue;
            if (k == piece_length) {
                marks[at] = (int32_t)id;
                for (k = 1; k < piece_length; k++)
                    marks[at + k] = BPE_INSIDE;
                pos = at + piece_length;
                continue;
            }
        }
        pos = at + 1;
    }
}

/* Marks the special tokens this call matches; 0 when none can match. */
static int bpe_find_specials(const pmpd_tokenizer *tok, const unsigned char *text, size_t length, unsigned flags,
                             int32_t *marks)
{
    uint32_t k;
    size_t i;
    int any = 0;
    for (k = 0; k < tok->n_special; k++) {
        uint32_t id = pmpd_le_u32(tok->special + 4u * k);
        if (!(flags & PMPD_TOKENIZE_SPECIAL) && pmpd_tokenizer_type(tok, id) != PMPD_TOKEN_TYPE_USER_DEFINED)
            continue;
        if (!any) {
            for (i = 0; i < length; i++)
                marks[i] = BPE_FREE;
            any = 1;
        }
        bpe_claim(tok, id, text, length, marks);
    }
    return any;
}

PMPD_INTERNAL size_t pmpd_tokenizer_encode_bpe(const pmpd_tokenizer *tok, const unsigned char *text, size_t length,
                                               unsigned flags, int32_t *ids, void *work)
{
    int32_t *marks = ids + 2;
    size_t n = 0, pos = 0;
    int specials;
    if (flags & PMPD_TOKENIZE_BOS)
        ids[n++] = (int32_t)tok->bos_id;
    specials = bpe_find_specials(tok, text, length, flags, marks);
    while (pos < length) {
        size_t end = length;
        if (specials) {
            if (marks[pos] >= 0) {
                size_t piece_length;
                int32_t id = marks[pos];
                pmpd_tokenizer_piece(tok, (uint32_t)id, &piece_length);
                ids[n++] = id;
                pos += piece_length;
                continue;
            }
            for (end = pos; end < length && marks[end] == BPE_FREE; end++)
                continue;
        }
        while (pos < end) {
            size_t word = pmpd_pretok_next(tok->pre, text + pos, end - pos);
            n += bpe_word(tok, text + pos, word, ids + n, work);
            pos += word;
        }
    }
    if (flags & PMPD_TOKENIZE_EOS)
        ids[n++] = (int32_t)tok->eos_id;
    return n;
}

#undef BPE_FREE
#undef BPE_INSIDE
