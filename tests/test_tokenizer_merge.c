/* The tokenizer's O(n log n) merges against run.c's rule written out plainly
 * here: every round rescans all adjacent pairs and merges the one whose
 * merged piece scores highest (strictly above -1e10), the leftmost among
 * equal scores; a merged piece is the lowest id with those bytes, found by
 * a linear scan.  Random texts over small alphabets (so merges pile up) run
 * through llama2.c's tok512 and through synthetic vocabularies with
 * three-valued scores (ties everywhere), duplicate pieces and scores at and
 * just above run.c's -1e10 floor.  A 200 kB text encodes in exactly the
 * scratch pmpd.h documents and decodes back to itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd_impl/model/model.h"
#include "pmpd_impl/offline/format/builder.h"
#include "pmpd_impl/tokenizer/tokenizer.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

#define MAX_TEXT 2000u
#define SCRATCH_PER_SYMBOL 24u /* pmpd.h: 24 * (strlen(text) + 3) bytes */

static unsigned char scratch_memory[SCRATCH_PER_SYMBOL * (MAX_TEXT + 3) + 64];

/* A vocabulary as the oracle reads it, and the runtime tokenizer over the
 * section the builder made from it (b owns that section). */
typedef struct vocab_case {
    pmpd_vocab v;
    pmpd_build_model b;
    pmpd_tokenizer tok;
} vocab_case;

static void vocab_add(pmpd_vocab *v, uint32_t *capacity, const char *piece, size_t length, float score)
{
    uint32_t at = v->offsets[v->n_tokens];
    if (v->n_tokens + 1 >= *capacity) {
        *capacity *= 2;
        v->scores = (float *)realloc(v->scores, *capacity * sizeof *v->scores);
        v->offsets = (uint32_t *)realloc(v->offsets, (*capacity + 1) * sizeof *v->offsets);
    }
    v->blob = (unsigned char *)realloc(v->blob, at + length + 1);
    memcpy(v->blob + at, piece, length);
    v->scores[v->n_tokens] = score;
    v->n_tokens++;
    v->offsets[v->n_tokens] = at + (uint32_t)length;
    if (length > v->max_token_length)
        v->max_token_length = (uint32_t)length;
}

static void vocab_start(pmpd_vocab *v, uint32_t *capacity, uint32_t flags)
{
    memset(v, 0, sizeof *v);
    *capacity = 16;
    v->scores = (float *)malloc(*capacity * sizeof *v->scores);
    v->offsets = (uint32_t *)calloc(*capacity + 1, sizeof *v->offsets);
    v->flags = flags;
}

static void case_open(vocab_case *c)
{
    pmpd_build_init(&c->b);
    assert_int_equal(pmpd_build_add_vocab(&c->b, &c->v), PMPD_OK);
    assert_int_equal(pmpd_tokenizer_parse(&c->tok, c->b.sections[0].data, c->b.sections[0].size, 0, c->v.n_tokens, 1,
                                          2, NULL),
                     PMPD_OK);
}

static void case_close(vocab_case *c)
{
    pmpd_build_free(&c->b);
    pmpd_vocab_free(&c->v);
}

/* llama2.c's tokenizer.bin read directly: i32 max length, then per token
 * f32 score, i32 length, bytes.  run.c always prepends the space token. */
static void load_tok512(vocab_case *c)
{
    char path[512];
    size_t size, at = 4;
    uint32_t capacity, i;
    unsigned char *data = test_read_file(test_shared_path(path, sizeof path, "models/tok512.bin"), &size);
    assert_non_null(data);
    vocab_start(&c->v, &capacity, PMPD_TOK_FLAG_SPACE_PREFIX);
    for (i = 0; i < 512; i++) {
        float score;
        int32_t length;
        memcpy(&score, data + at, 4);
        memcpy(&length, data + at + 4, 4);
        vocab_add(&c->v, &capacity, (const char *)data + at + 8, (size_t)length, score);
        at += 8 + (size_t)length;
    }
    assert_int_equal(at, size);
    free(data);
    case_open(c);
}

/* ---- the oracle ---------------------------------------------------------- */

static const unsigned char *oracle_piece(const pmpd_vocab *v, int32_t id, size_t *length)
{
    *length = v->offsets[id + 1] - v->offsets[id];
    return v->blob + v->offsets[id];
}

static int32_t oracle_lookup(const pmpd_vocab *v, const unsigned char *a, size_t a_length, const unsigned char *b,
                             size_t b_length)
{
    uint32_t id;
    for (id = 0; id < v->n_tokens; id++) {
        size_t length;
        const unsigned char *p = oracle_piece(v, (int32_t)id, &length);
        if (length == a_length + b_length && memcmp(p, a, a_length) == 0 &&
            (b_length == 0 || memcmp(p + a_length, b, b_length) == 0))
            return (int32_t)id;
    }
    return -1;
}

static int32_t oracle_pair(const pmpd_vocab *v, int32_t left, int32_t right)
{
    size_t a_length, b_length;
    const unsigned char *a = oracle_piece(v, left, &a_length);
    const unsigned char *b = oracle_piece(v, right, &b_length);
    return oracle_lookup(v, a, a_length, b, b_length);
}

/* One ASCII character: its piece, else its <0xNN> piece, else 0. */
static int32_t oracle_char(const pmpd_vocab *v, unsigned char c)
{
    char name[8];
    int32_t id = oracle_lookup(v, &c, 1, NULL, 0);
    if (id >= 0)
        return id;
    snprintf(name, sizeof name, "<0x%02X>", c);
    id = oracle_lookup(v, (const unsigned char *)name, 6, NULL, 0);
    return id >= 0 ? id : 0;
}

/* pair[i] caches the merge of ids[i] and ids[i+1] so a round costs one
 * lookup per changed pair; the round itself still scans every pair. */
static size_t oracle_encode(const pmpd_vocab *v, const char *text, int bos, int eos, int32_t *ids, int32_t *pair)
{
    size_t n = 0, i, length = strlen(text);
    if (bos)
        ids[n++] = 1;
    if (length > 0 && (v->flags & PMPD_TOK_FLAG_SPACE_PREFIX))
        ids[n++] = oracle_char(v, ' ');
    for (i = 0; i < length; i++)
        ids[n++] = oracle_char(v, (unsigned char)text[i]);
    for (i = 0; i + 1 < n; i++)
        pair[i] = oracle_pair(v, ids[i], ids[i + 1]);
    for (;;) {
        float best_score = -1e10f;
        size_t best = n;
        for (i = 0; i + 1 < n; i++) {
            if (pair[i] >= 0 && v->scores[pair[i]] > best_score) {
                best_score = v->scores[pair[i]];
                best = i;
            }
        }
        if (best == n)
            break;
        ids[best] = pair[best];
        for (i = best + 1; i + 1 < n; i++) {
            ids[i] = ids[i + 1];
            pair[i] = pair[i + 1];
        }
        n--;
        if (best + 1 < n)
            pair[best] = oracle_pair(v, ids[best], ids[best + 1]);
        if (best > 0)
            pair[best - 1] = oracle_pair(v, ids[best - 1], ids[best]);
    }
    if (eos)
        ids[n++] = 2;
    return n;
}

/* ---- comparisons --------------------------------------------------------- */

static void random_text(test_rng *rng, const char *alphabet, size_t length, char *text)
{
    size_t i, k = strlen(alphabet);
    for (i = 0; i < length; i++)
        text[i] = alphabet[test_rng_u32(rng) % k];
    text[length] = '\0';
}

static void assert_matches_oracle(const vocab_case *c, const char *text, int bos, int eos)
{
    static int32_t got[MAX_TEXT + 3], expected[MAX_TEXT + 3], pair[MAX_TEXT + 3];
    pmpd_arena scratch;
    size_t n = 0, n_expected, i;
    pmpd_arena_init(&scratch, scratch_memory, sizeof scratch_memory);
    assert_int_equal(pmpd_tokenizer_encode(&c->tok, text, strlen(text),
                                           (bos ? PMPD_TOKENIZE_BOS : 0u) | (eos ? PMPD_TOKENIZE_EOS : 0u), got,
                                           MAX_TEXT + 3, &n, &scratch), PMPD_OK);
    n_expected = oracle_encode(&c->v, text, bos, eos, expected, pair);
    if (n != n_expected)
        fail_msg("\"%s\": %zu tokens, the oracle %zu", text, n, n_expected);
    for (i = 0; i < n; i++)
        if (got[i] != expected[i])
            fail_msg("\"%s\": token %zu is %d, the oracle says %d", text, i, (int)got[i], (int)expected[i]);
    assert_int_equal(scratch.used, 0);
}

static void test_tok512_random_texts(void **state)
{
    static char text[MAX_TEXT + 1];
    vocab_case c;
    test_rng rng;
    int round;
    (void)state;
    load_tok512(&c);
    test_rng_seed(&rng, 512);
    for (round = 0; round < 300; round++) {
        random_text(&rng, round % 2 ? " eatonhsrdl" : " ab", test_rng_u32(&rng) % 300, text);
        assert_matches_oracle(&c, text, round % 3 != 0, round % 5 == 0);
    }
    random_text(&rng, " eatonhsrdlu,.", MAX_TEXT, text);
    assert_matches_oracle(&c, text, 1, 0);
    case_close(&c);
}

/* Every piece over {a, b, c, space} up to 3 bytes plus random longer ones
 * and random duplicates of earlier pieces (whose lower id must win), scored
 * -1, 0 or 1, now and then exactly -1e10 (never merged) or -9.99e9 (just
 * mergeable).  'x' exists only as a byte piece, 'y' not at all (id 0). */
static void build_tied_vocab(vocab_case *c, test_rng *rng)
{
    static const char letters[] = "abc ";
    uint32_t capacity, i, length;
    char piece[8];
    vocab_start(&c->v, &capacity, test_rng_u32(rng) % 2 ? PMPD_TOK_FLAG_SPACE_PREFIX : 0);
    vocab_add(&c->v, &capacity, "<unk>", 5, 0.0f);
    vocab_add(&c->v, &capacity, "<s>", 3, 0.0f);
    vocab_add(&c->v, &capacity, "</s>", 4, 0.0f);
    vocab_add(&c->v, &capacity, "<0x78>", 6, 0.0f);
    for (length = 1; length <= 3; length++) {
        uint32_t count = length == 1 ? 4 : length == 2 ? 16 : 64, k;
        for (i = 0; i < count; i++) {
            uint32_t r = test_rng_u32(rng) % 32, code = i;
            float score = r == 0 ? -1e10f : r == 1 ? -9.99e9f : (float)(int)(r % 3) - 1.0f;
            for (k = 0; k < length; k++, code /= 4)
                piece[k] = letters[code % 4];
            vocab_add(&c->v, &capacity, piece, length, score);
        }
    }
    for (i = 0; i < 30; i++) {
        length = 4 + test_rng_u32(rng) % 3;
        random_text(rng, letters, length, piece);
        vocab_add(&c->v, &capacity, piece, length, (float)(int)(test_rng_u32(rng) % 3) - 1.0f);
    }
    for (i = 0; i < 20; i++) {
        size_t dup_length;
        const unsigned char *dup = oracle_piece(&c->v, 4 + (int32_t)(test_rng_u32(rng) % (c->v.n_tokens - 4)),
                                                &dup_length);
        memcpy(piece, dup, dup_length);
        vocab_add(&c->v, &capacity, piece, dup_length, (float)(int)(test_rng_u32(rng) % 3));
    }
    case_open(c);
}

static void test_tied_synthetic_vocabularies(void **state)
{
    static char text[MAX_TEXT + 1];
    test_rng rng;
    int vocab, round;
    (void)state;
    test_rng_seed(&rng, 7);
    for (vocab = 0; vocab < 40; vocab++) {
        vocab_case c;
        build_tied_vocab(&c, &rng);
        for (round = 0; round < 40; round++) {
            random_text(&rng, round % 4 ? "abc " : "abc xy", test_rng_u32(&rng) % 200, text);
            assert_matches_oracle(&c, text, round % 2, round % 3 == 0);
        }
        case_close(&c);
    }
}

/* ---- a long text, through the public API --------------------------------- */

static void test_long_text_in_documented_scratch(void **state)
{
    const size_t length = 200000, scratch_bytes = SCRATCH_PER_SYMBOL * (length + 3);
    test_container container;
    pmpd_arena arena, scratch;
    pmpd_model *model;
    test_rng rng;
    char *text = (char *)malloc(length + 1), *back = (char *)malloc(length + 1);
    int32_t *ids = (int32_t *)malloc((length + 3) * sizeof *ids);
    void *model_block = malloc(64 * 1024 + PMPD_ARENA_ALIGNMENT);
    void *scratch_block = malloc(scratch_bytes + PMPD_ARENA_ALIGNMENT);
    size_t n = 0, i, at = 0;
    (void)state;
    assert_true(text && back && ids && model_block && scratch_block);
    assert_int_equal(test_stories_container(&container), PMPD_OK);
    pmpd_arena_init(&arena, test_aligned(model_block), 64 * 1024);
    assert_int_equal(pmpd_model_open_memory(container.data, container.size, &arena, &model, NULL), PMPD_OK);
    test_rng_seed(&rng, 200);
    random_text(&rng, " eatonhsrdlu,.\n", length, text);
    pmpd_arena_init(&scratch, test_aligned(scratch_block), scratch_bytes - 1);
    assert_int_equal(pmpd_tokenize(model, text, 1, 0, ids, length + 3, &n, &scratch), PMPD_ERR_OUT_OF_MEMORY);
    pmpd_arena_init(&scratch, test_aligned(scratch_block), scratch_bytes);
    assert_int_equal(pmpd_tokenize(model, text, 1, 0, ids, length + 3, &n, &scratch), PMPD_OK);
    assert_int_equal(scratch.used, 0);
    assert_int_equal(scratch.high_water, scratch_bytes);
    for (i = 1; i < n; i++) {
        const char *piece;
        size_t piece_length;
        assert_int_equal(pmpd_token_to_piece(model, ids[i - 1], ids[i], &piece, &piece_length), PMPD_OK);
        assert_true(at + piece_length <= length);
        memcpy(back + at, piece, piece_length);
        at += piece_length;
    }
    assert_int_equal(at, length);
    assert_memory_equal(back, text, length);
    pmpd_model_close(model);
    test_container_free(&container);
    free(text);
    free(back);
    free(ids);
    free(model_block);
    free(scratch_block);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tok512_random_texts),
        cmocka_unit_test(test_tied_synthetic_vocabularies),
        cmocka_unit_test(test_long_text_in_documented_scratch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
