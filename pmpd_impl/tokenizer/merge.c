/* run.c's merge rule over a doubly linked list of symbols and a binary heap
 * of the symbols whose pair with their right neighbour can merge, ordered by
 * (merged score descending, position ascending).  A symbol keeps the index
 * of its leftmost original symbol, and merging never reorders symbols, so
 * "smallest index" is run.c's "leftmost" at every step.  The heap records
 * where each symbol sits in it, so a merge updates exactly the three pairs
 * it touches (its own, its left neighbour's, the absorbed right symbol's)
 * instead of leaving stale entries behind: the heap never holds more than
 * n entries, which is what keeps the scratch size exact.
 *
 * Byte-level BPE (version 2 sections) runs the same loop with another key:
 * a symbol's pair is the index of its merge in the merge table, and the
 * lowest rank merges first, the leftmost among equal ranks (llama.cpp's
 * order). */
#include "pmpd_impl/tokenizer/merge.h"

#include "pmpd_impl/format/container.h"
#include "pmpd_impl/format/le.h"
#include "pmpd_impl/tokenizer/bpe.h"

#define TOK_MERGE_NONE UINT32_MAX

typedef struct tok_merge_state {
    const pmpd_tokenizer *tok;
    int32_t *ids;    /* symbol i's id; meaningful while i is in the list */
    int32_t *pair;   /* id of ids[i] . ids[next[i]] (BPE: its merge's index), or -1 */
    uint32_t *prev, *next;
    uint32_t *heap;  /* symbols whose pair can merge, best at heap[0] */
    uint32_t *place; /* index of symbol i in heap, or TOK_MERGE_NONE */
    uint32_t heap_size;
} tok_merge_state;

static int32_t tok_pair(const pmpd_tokenizer *tok, int32_t left, int32_t right)
{
    size_t a_length, b_length;
    const unsigned char *a, *b;
    if (tok->model == PMPD_TOK2_MODEL_BPE)
        return pmpd_tokenizer_bpe_pair(tok, left, right);
    a = pmpd_tokenizer_piece(tok, (uint32_t)left, &a_length);
    b = pmpd_tokenizer_piece(tok, (uint32_t)right, &b_length);
    return pmpd_tokenizer_lookup(tok, a, a_length, b, b_length);
}

/* The id a symbol becomes when it absorbs its right neighbour. */
static int32_t tok_merged_id(const pmpd_tokenizer *tok, int32_t pair)
{
    if (tok->model == PMPD_TOK2_MODEL_BPE)
        return (int32_t)pmpd_tokenizer_bpe_merge_field(tok, (uint32_t)pair, 2);
    return pair;
}

static float tok_merge_score(const tok_merge_state *s, uint32_t symbol)
{
    return pmpd_le_f32(s->tok->scores + 4u * (uint32_t)s->pair[symbol]);
}

/* run.c starts its search at -1e10 and takes only strictly better scores. */
static int tok_merge_can_merge(const tok_merge_state *s, uint32_t symbol)
{
    if (s->tok->model == PMPD_TOK2_MODEL_BPE)
        return s->pair[symbol] >= 0;
    return s->pair[symbol] >= 0 && tok_merge_score(s, symbol) > -1e10f;
}

static int tok_merge_before(const tok_merge_state *s, uint32_t a, uint32_t b)
{
    float score_a, score_b;
    if (s->tok->model == PMPD_TOK2_MODEL_BPE) {
        uint32_t rank_a = pmpd_tokenizer_bpe_merge_field(s->tok, (uint32_t)s->pair[a], 3);
        uint32_t rank_b = pmpd_tokenizer_bpe_merge_field(s->tok, (uint32_t)s->pair[b], 3);
        return rank_a < rank_b || (rank_a == rank_b && a < b);
    }
    score_a = tok_merge_score(s, a);
    score_b = tok_merge_score(s, b);
    return score_a > score_b || (score_a == score_b && a < b);
}

static void tok_merge_put(tok_merge_state *s, uint32_t at, uint32_t symbol)
{
    s->heap[at] = symbol;
    s->place[symbol] = at;
}

static void tok_merge_sift_up(tok_merge_state *s, uint32_t at)
{
    uint32_t symbol = s->heap[at];
    while (at > 0 && tok_merge_before(s, symbol, s->heap[(at - 1) / 2])) {
        tok_merge_put(s, at, s->heap[(at - 1) / 2]);
        at = (at - 1) / 2;
    }
    tok_merge_put(s, at, symbol);
}

static void tok_merge_sift_down(tok_merge_state *s, uint32_t at)
{
    uint32_t symbol = s->heap[at];
    for (;;) {
        uint32_t child = 2 * at + 1;
        if (child >= s->heap_size)
            break;
        if (child + 1 < s->heap_size && tok_merge_before(s, s->heap[child + 1], s->heap[child]))
            child++;
        if (!tok_merge_before(s, s->heap[child], symbol))
            break;
        tok_merge_put(s, at, s->heap[child]);
        at = child;
    }
    tok_merge_put(s, at, symbol);
}

/* Restores the heap order around a symbol whose key changed either way. */
static void tok_merge_fix(tok_merge_state *s, uint32_t at)
{
    if (at > 0 && tok_merge_before(s, s->heap[at], s->heap[(at - 1) / 2]))
        tok_merge_sift_up(s, at);
    else
        tok_merge_sift_down(s, at);
}

static void tok_merge_remove(tok_merge_state *s, uint32_t symbol)
{
    uint32_t at = s->place[symbol];
    s->place[symbol] = TOK_MERGE_NONE;
    s->heap_size--;
    if (at < s->heap_size) {
        tok_merge_put(s, at, s->heap[s->heap_size]);
        tok_merge_fix(s, at);
    }
}

/* Recomputes the pair of symbol with its (new) right neighbour and moves
 * the symbol into, within or out of the heap accordingly. */
static void tok_merge_refresh(tok_merge_state *s, uint32_t symbol)
{
    uint32_t right = s->next[symbol];
    s->pair[symbol] = right == TOK_MERGE_NONE ? -1 : tok_pair(s->tok, s->ids[symbol], s->ids[right]);
    if (!tok_merge_can_merge(s, symbol)) {
        if (s->place[symbol] != TOK_MERGE_NONE)
            tok_merge_remove(s, symbol);
    } else if (s->place[symbol] == TOK_MERGE_NONE) {
        tok_merge_put(s, s->heap_size, symbol);
        s->heap_size++;
        tok_merge_sift_up(s, s->heap_size - 1);
    } else {
        tok_merge_fix(s, s->place[symbol]);
    }
}

PMPD_INTERNAL size_t pmpd_tokenizer_merge(const pmpd_tokenizer *tok, int32_t *ids, size_t n, void *work)
{
    tok_merge_state s;
    uint32_t i, count = (uint32_t)n, kept;
    if (n < 2)
        return n;
    s.tok = tok;
    s.ids = ids;
    s.pair = (int32_t *)work;
    s.prev = (uint32_t *)(s.pair + n);
    s.next = s.prev + n;
    s.heap = s.next + n;
    s.place = s.heap + n;
    s.heap_size = 0;
    for (i = 0; i < count; i++) {
        s.prev[i] = i == 0 ? TOK_MERGE_NONE : i - 1;
        s.next[i] = i + 1 == count ? TOK_MERGE_NONE : i + 1;
        s.place[i] = TOK_MERGE_NONE;
        s.pair[i] = i + 1 == count ? -1 : tok_pair(tok, ids[i], ids[i + 1]);
        if (tok_merge_can_merge(&s, i))
            tok_merge_put(&s, s.heap_size++, i);
    }
    for (i = s.heap_size / 2; i-- > 0;)
        tok_merge_sift_down(&s, i);
    while (s.heap_size > 0) {
        uint32_t left = s.heap[0], right = s.next[left];
        s.ids[left] = tok_merged_id(tok, s.pair[left]);
        if (s.place[right] != TOK_MERGE_NONE)
            tok_merge_remove(&s, right);
        s.next[left] = s.next[right];
        if (s.next[right] != TOK_MERGE_NONE)
            s.prev[s.next[right]] = left;
        tok_merge_refresh(&s, left);
        if (s.prev[left] != TOK_MERGE_NONE)
            tok_merge_refresh(&s, s.prev[left]);
    }
    /* Symbol 0 is never absorbed (only right symbols are), so the list starts
     * there; survivors move down in order, never past an unread one. */
    kept = 0;
    for (i = 0; i != TOK_MERGE_NONE; i = s.next[i])
        ids[kept++] = ids[i];
    return kept;
}

#undef TOK_MERGE_NONE
