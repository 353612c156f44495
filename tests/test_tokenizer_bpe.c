/* Byte-level BPE (version 2 tokenizer sections) on vocabularies made here
 * by hand, with expected ids worked out from the BPE rule -- merge the
 * adjacent pair of lowest rank, the leftmost among equal ranks, until no
 * pair has a merge -- and the pre-tokenizers' words worked out from their
 * regular expressions.  Then round trips of arbitrary bytes (NUL and
 * invalid UTF-8 included) for every pre-tokenizer, in exactly the scratch
 * pmpd.h documents, and the section validator's refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd_impl/format/container.h"
#include "pmpd_impl/format/le.h"
#include "pmpd_impl/offline/format/builder.h"
#include "pmpd_impl/tokenizer/bpe.h"
#include "pmpd_impl/tokenizer/pretok.h"
#include "pmpd_impl/tokenizer/tokenizer.h"
#include "tests/support/test_support.h"

#define MAX_TEXT 600u
#define SCRATCH_PER_BYTE 24u /* pmpd.h: 24 * (length + 3) bytes */

static unsigned char scratch_memory[SCRATCH_PER_BYTE * (MAX_TEXT + 3) + 64];

/* pmpd.h counts the scratch from a 64-byte-aligned fill level. */
static unsigned char *scratch_base(void)
{
    return scratch_memory + (64 - (uintptr_t)scratch_memory % 64) % 64;
}

/* A hand-made vocabulary: ids 0..255 are the single bytes. */
typedef struct hand_vocab {
    pmpd_bpe_vocab v;
    pmpd_build_model b;
    pmpd_tokenizer tok;
} hand_vocab;

static uint32_t hand_token(hand_vocab *h, const char *piece, size_t length, unsigned type)
{
    pmpd_bpe_vocab *v = &h->v;
    uint32_t id = v->n_tokens, at = v->offsets[id];
    v->offsets = (uint32_t *)realloc(v->offsets, (id + 2) * sizeof *v->offsets);
    v->types = (unsigned char *)realloc(v->types, id + 1);
    v->blob = (unsigned char *)realloc(v->blob, at + length + 1);
    memcpy(v->blob + at, piece, length);
    v->types[id] = (unsigned char)type;
    v->offsets[id + 1] = at + (uint32_t)length;
    if (length > v->max_token_length)
        v->max_token_length = (uint32_t)length;
    v->n_tokens++;
    return id;
}

static uint32_t hand_normal(hand_vocab *h, const char *piece)
{
    return hand_token(h, piece, strlen(piece), PMPD_TOKEN_TYPE_NORMAL);
}

/* The next merge (its rank is the count so far). */
static void hand_merge(hand_vocab *h, uint32_t left, uint32_t right)
{
    pmpd_bpe_vocab *v = &h->v;
    v->merges = (uint32_t *)realloc(v->merges, (v->n_merges + 1) * 2 * sizeof *v->merges);
    v->merges[2 * v->n_merges] = left;
    v->merges[2 * v->n_merges + 1] = right;
    v->n_merges++;
}

static void hand_start(hand_vocab *h, uint32_t pre)
{
    unsigned b;
    memset(h, 0, sizeof *h);
    h->v.offsets = (uint32_t *)calloc(1, sizeof *h->v.offsets);
    h->v.pre = pre;
    h->v.eot_id = PMPD_TOK2_NO_TOKEN;
    for (b = 0; b < 256; b++) {
        char c = (char)b;
        hand_token(h, &c, 1, PMPD_TOKEN_TYPE_NORMAL);
    }
}

static void hand_finish(hand_vocab *h)
{
    pmpd_error err;
    pmpd_build_init(&h->b);
    assert_int_equal(pmpd_build_add_bpe_vocab(&h->b, &h->v, &err), PMPD_OK);
    assert_int_equal(pmpd_tokenizer_parse_bpe(&h->tok, h->b.sections[0].data, h->b.sections[0].size, 0,
                                              h->v.n_tokens, 0, 1, &err),
                     PMPD_OK);
}

static void hand_free(hand_vocab *h)
{
    pmpd_bpe_vocab_free(&h->v);
    pmpd_build_free(&h->b);
}

static size_t encode(const hand_vocab *h, const char *text, size_t length, unsigned flags, int32_t *ids)
{
    pmpd_arena scratch;
    size_t n = 0;
    assert_true(length <= MAX_TEXT);
    pmpd_arena_init(&scratch, scratch_base(), SCRATCH_PER_BYTE * (length + 3));
    assert_int_equal(pmpd_tokenizer_encode(&h->tok, text, length, flags, ids, MAX_TEXT + 3, &n, &scratch), PMPD_OK);
    assert_int_equal(scratch.used, 0);
    return n;
}

static void expect_ids(const hand_vocab *h, const char *text, unsigned flags, const int32_t *want, size_t n_want)
{
    int32_t got[MAX_TEXT + 3];
    size_t n = encode(h, text, strlen(text), flags, got), i;
    for (i = 0; i < n && i < n_want; i++)
        if (got[i] != want[i])
            break;
    if (n != n_want || i < n)
        fail_msg("\"%s\": %zu ids, expected %zu; first difference at %zu (%d, expected %d)", text, n, n_want, i,
                 i < n ? (int)got[i] : -1, i < n_want ? (int)want[i] : -1);
}

#define EXPECT(h, text, flags, ...)                                                                                    \
    do {                                                                                                               \
        static const int32_t want_[] = {__VA_ARGS__};                                                                  \
        expect_ids(h, text, flags, want_, sizeof want_ / sizeof want_[0]);                                             \
    } while (0)

/* ids of the hand vocabulary below */
enum { AB = 256, BC, ABC, SP_T, HE, SP_THE, AA, YZ, XY, END_CTL, BAR_A_BAR, LT_BAR_A_BAR_GT, AT_AT };

static void make_hand(hand_vocab *h, uint32_t pre)
{
    hand_start(h, pre);
    assert_int_equal(hand_normal(h, "ab"), AB);
    assert_int_equal(hand_normal(h, "bc"), BC);
    assert_int_equal(hand_normal(h, "abc"), ABC);
    assert_int_equal(hand_normal(h, " t"), SP_T);
    assert_int_equal(hand_normal(h, "he"), HE);
    assert_int_equal(hand_normal(h, " the"), SP_THE);
    assert_int_equal(hand_normal(h, "aa"), AA);
    assert_int_equal(hand_normal(h, "yz"), YZ);
    assert_int_equal(hand_normal(h, "xy"), XY);
    assert_int_equal(hand_token(h, "<|end|>", 7, PMPD_TOKEN_TYPE_CONTROL), END_CTL);
    assert_int_equal(hand_token(h, "|a|", 3, PMPD_TOKEN_TYPE_CONTROL), BAR_A_BAR);
    assert_int_equal(hand_token(h, "<|a|>", 5, PMPD_TOKEN_TYPE_CONTROL), LT_BAR_A_BAR_GT);
    assert_int_equal(hand_token(h, "@@", 2, PMPD_TOKEN_TYPE_USER_DEFINED), AT_AT);
    hand_merge(h, 'a', 'b');      /* rank 0 */
    hand_merge(h, 'b', 'c');      /* 1 */
    hand_merge(h, AB, 'c');       /* 2 */
    hand_merge(h, ' ', 't');      /* 3 */
    hand_merge(h, 'h', 'e');      /* 4 */
    hand_merge(h, SP_T, HE);      /* 5 */
    hand_merge(h, 'a', 'a');      /* 6 */
    hand_merge(h, 'y', 'z');      /* 7 */
    hand_merge(h, 'x', 'y');      /* 8 */
    hand_merge(h, 'a', 'b');      /* a pair listed twice keeps rank 0 */
    hand_finish(h);
}

static void test_merges_by_hand(void **state)
{
    hand_vocab h;
    (void)state;
    make_hand(&h, PMPD_PRETOK_GPT2);
    EXPECT(&h, "abc", 0, ABC);                 /* ab (rank 0), then ab+c (2) */
    EXPECT(&h, "bca", 0, BC, 'a');             /* bc (1); bc+a has no merge */
    EXPECT(&h, "aaa", 0, AA, 'a');             /* equal ranks: the leftmost first */
    EXPECT(&h, "aaaa", 0, AA, AA);
    EXPECT(&h, "xyz", 0, 'x', YZ);             /* yz (7) beats the earlier xy (8) */
    EXPECT(&h, " the", 0, SP_THE);             /* " t" (3), "he" (4), then " t"+"he" (5) */
    EXPECT(&h, "the", 0, 't', HE);
    EXPECT(&h, "abc abc", 0, ABC, ' ', ABC);   /* " abc": " " has no merge with "abc" */
    EXPECT(&h, "cab", 0, 'c', AB);
    hand_free(&h);
}

static void test_specials_by_hand(void **state)
{
    hand_vocab h;
    (void)state;
    make_hand(&h, PMPD_PRETOK_GPT2);
    EXPECT(&h, "a<|end|>b", PMPD_TOKENIZE_SPECIAL, 'a', END_CTL, 'b');
    /* Without the flag a control token is text: "<|" "end" "|>". */
    EXPECT(&h, "<|end|>", 0, '<', '|', 'e', 'n', 'd', '|', '>');
    /* Longest first: "<|a|>" claims its bytes before "|a|" looks. */
    EXPECT(&h, "<|a|>|a|", PMPD_TOKENIZE_SPECIAL, LT_BAR_A_BAR_GT, BAR_A_BAR);
    EXPECT(&h, "x|a|>", PMPD_TOKENIZE_SPECIAL, 'x', BAR_A_BAR, '>');
    /* User-defined tokens are matched with or without the flag. */
    EXPECT(&h, "x@@y", 0, 'x', AT_AT, 'y');
    EXPECT(&h, "ab@@@", 0, AB, AT_AT, '@');
    /* BOS and EOS (0 and 1 in this test). */
    EXPECT(&h, "ab", PMPD_TOKENIZE_BOS | PMPD_TOKENIZE_EOS, 0, AB, 1);
    EXPECT(&h, "<|end|><|end|>", PMPD_TOKENIZE_SPECIAL | PMPD_TOKENIZE_BOS, 0, END_CTL, END_CTL);
    hand_free(&h);
}

/* The pre-tokenizer's words of text, joined by '|' (texts here hold no '|'). */
static void expect_words(uint32_t kind, const char *text, const char *want)
{
    char got[512];
    size_t at = 0, length = strlen(text), n = 0;
    while (at < length) {
        size_t w = pmpd_pretok_next(kind, (const unsigned char *)text + at, length - at);
        assert_true(w >= 1 && w <= length - at);
        if (n)
            got[n++] = '|';
        memcpy(got + n, text + at, w);
        n += w;
        at += w;
    }
    got[n] = '\0';
    if (strcmp(got, want) != 0)
        fail_msg("%s on \"%s\": \"%s\", expected \"%s\"", pmpd_pretok_name(kind), text, got, want);
}

static void test_pretokenizer_words(void **state)
{
    (void)state;
    expect_words(PMPD_PRETOK_LLAMA3, "Hello world", "Hello| world");
    expect_words(PMPD_PRETOK_LLAMA3, "I'm here", "I|'m| here");
    expect_words(PMPD_PRETOK_LLAMA3, "CAN'T we'RE", "CAN|'T| we|'RE");
    expect_words(PMPD_PRETOK_GPT2, "CAN'T we're", "CAN|'|T| we|'re");
    expect_words(PMPD_PRETOK_LLAMA3, "12345 x", "123|45| x");
    expect_words(PMPD_PRETOK_QWEN2, "12345", "1|2|3|4|5");
    expect_words(PMPD_PRETOK_GPT2, "12345 42", "12345| 42");
    expect_words(PMPD_PRETOK_SMOLLM, "ab12 c", "ab|1|2| c");
    expect_words(PMPD_PRETOK_SMOLLM, "a 1", "a| |1");
    expect_words(PMPD_PRETOK_GPT2, "a 1", "a| 1");
    /* \s+(?!\S) leaves the last space of a run to the next word. */
    expect_words(PMPD_PRETOK_LLAMA3, "a  b", "a| | b");
    expect_words(PMPD_PRETOK_GPT2, "a   b", "a|  | b");
    expect_words(PMPD_PRETOK_LLAMA3, "end   ", "end|   ");
    /* \s*[\r\n]+ ends after the run's last newline. */
    expect_words(PMPD_PRETOK_LLAMA3, "x \n\ny", "x| \n\n|y");
    expect_words(PMPD_PRETOK_LLAMA3, "x\n \ty", "x|\n| |\ty");
    expect_words(PMPD_PRETOK_GPT2, "x\n\ny", "x|\n|\n|y");
    /* punctuation keeps trailing newlines (llama3), one optional space before */
    expect_words(PMPD_PRETOK_LLAMA3, "hi!!\n\nok", "hi|!!\n\n|ok");
    expect_words(PMPD_PRETOK_LLAMA3, "a ...b", "a| ...|b");
    expect_words(PMPD_PRETOK_LLAMA3, "(x)", "(x|)");
    expect_words(PMPD_PRETOK_GPT2, "(x)", "(|x|)");
    /* letters of any script, marks and emoji are not letters */
    expect_words(PMPD_PRETOK_LLAMA3, "\xe6\x97\xa5\xe6\x9c\xac \xce\xb1\xce\xb2", "\xe6\x97\xa5\xe6\x9c\xac| \xce\xb1\xce\xb2");
    expect_words(PMPD_PRETOK_LLAMA3, "e\xcc\x81t", "e|\xcc\x81t");
    expect_words(PMPD_PRETOK_GPT2, "e\xcc\x81t", "e|\xcc\x81|t");
    expect_words(PMPD_PRETOK_LLAMA3, "\xf0\x9f\x98\x80\xf0\x9f\x98\x83!", "\xf0\x9f\x98\x80\xf0\x9f\x98\x83!");
    /* ideographic space is white space, the superscript two a number */
    expect_words(PMPD_PRETOK_GPT2, "a\xe3\x80\x80" "b", "a|\xe3\x80\x80|b");
    expect_words(PMPD_PRETOK_QWEN2, "x\xc2\xb2", "x|\xc2\xb2");
    /* invalid UTF-8: one character per bad byte, of no letter class */
    expect_words(PMPD_PRETOK_LLAMA3, "a\xff\xfe" "b", "a|\xff\xfe|b");
    expect_words(PMPD_PRETOK_LLAMA3, "\xff" "b", "\xff" "b");
    expect_words(PMPD_PRETOK_GPT2, "\xe6\x97 x", "\xe6\x97| x");
}

static void test_pretokenizer_names(void **state)
{
    (void)state;
    assert_int_equal(pmpd_pretok_from_name("llama-bpe", 9), PMPD_PRETOK_LLAMA3);
    assert_int_equal(pmpd_pretok_from_name("qwen2", 5), PMPD_PRETOK_QWEN2);
    assert_int_equal(pmpd_pretok_from_name("smollm", 6), PMPD_PRETOK_SMOLLM);
    assert_int_equal(pmpd_pretok_from_name("gpt-2", 5), PMPD_PRETOK_GPT2);
    assert_int_equal(pmpd_pretok_from_name("deepseek-r1-qwen", 16), PMPD_PRETOK_QWEN2);
    assert_int_equal(pmpd_pretok_from_name("starcoder", 9), PMPD_PRETOK_SMOLLM);
    assert_int_equal(pmpd_pretok_from_name("mpt", 3), PMPD_PRETOK_GPT2);
    assert_string_equal(pmpd_pretok_name(PMPD_PRETOK_SMOLLM), "smollm");
    assert_int_equal(pmpd_pretok_from_name("gpt-22", 6), 0);
    assert_int_equal(pmpd_pretok_from_name("deepseek-llm", 12), 0);
}

/* Random texts: words of a small alphabet (so merges happen), digits,
 * white space runs, multi-byte characters, special tokens and random bytes. */
static size_t random_text(test_rng *rng, char *out, size_t max)
{
    static const char *const parts[] = {"ab", "c", "aa", " the", "xyz", " ", "  ", "\n", "\r\n", "\t", "123", "4",
                                        "'s", "'T", "!", "...", "\xe6\x97\xa5", "\xcc\x81", "\xf0\x9f\x98\x80",
                                        "<|end|>", "@@", "|a|", "\xff", "\xc3", "\x80", "\0"};
    size_t n = 0, length = test_rng_u32(rng) % (max / 4);
    while (n < length) {
        if (test_rng_u32(rng) % 5 == 0) {
            out[n++] = (char)(test_rng_u32(rng) & 0xFF);
        } else {
            const char *p = parts[test_rng_u32(rng) % (sizeof parts / sizeof parts[0])];
            size_t k = p[0] ? strlen(p) : 1;
            memcpy(out + n, p, k);
            n += k;
        }
    }
    return n;
}

static void test_round_trip(void **state)
{
    static const uint32_t kinds[] = {PMPD_PRETOK_LLAMA3, PMPD_PRETOK_QWEN2, PMPD_PRETOK_SMOLLM, PMPD_PRETOK_GPT2};
    char text[MAX_TEXT], back[MAX_TEXT];
    int32_t ids[MAX_TEXT + 3];
    size_t k;
    (void)state;
    for (k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        hand_vocab h;
        test_rng rng;
        int round;
        make_hand(&h, kinds[k]);
        test_rng_seed(&rng, 1000 + k);
        for (round = 0; round < 400; round++) {
            size_t length = random_text(&rng, text, MAX_TEXT), n = encode(&h, text, length, 0, ids), i, at = 0;
            assert_true(n <= length);
            for (i = 0; i < n; i++) {
                const char *piece;
                size_t piece_length;
                assert_int_equal(pmpd_tokenizer_decode(&h.tok, i ? ids[i - 1] : -1, ids[i], &piece, &piece_length),
                                 PMPD_OK);
                assert_true(at + piece_length <= length);
                memcpy(back + at, piece, piece_length);
                at += piece_length;
            }
            assert_int_equal(at, length);
            assert_memory_equal(back, text, length);
        }
        hand_free(&h);
    }
}

/* The working memory is 24 * (length + 3) bytes: one byte less fails. */
static void test_scratch_size(void **state)
{
    hand_vocab h;
    char text[MAX_TEXT];
    int32_t ids[MAX_TEXT + 3];
    size_t n = 0;
    pmpd_arena scratch;
    (void)state;
    make_hand(&h, PMPD_PRETOK_LLAMA3);
    memset(text, 'a', sizeof text);
    pmpd_arena_init(&scratch, scratch_base(), SCRATCH_PER_BYTE * (MAX_TEXT + 3));
    assert_int_equal(pmpd_tokenizer_encode(&h.tok, text, MAX_TEXT, PMPD_TOKENIZE_SPECIAL, ids, MAX_TEXT + 3, &n,
                                           &scratch),
                     PMPD_OK);
    assert_int_equal(n, MAX_TEXT / 2);
    pmpd_arena_init(&scratch, scratch_base(), SCRATCH_PER_BYTE * (MAX_TEXT + 3) - 1);
    assert_int_equal(pmpd_tokenizer_encode(&h.tok, text, MAX_TEXT, 0, ids, MAX_TEXT + 3, &n, &scratch),
                     PMPD_ERR_OUT_OF_MEMORY);
    hand_free(&h);
}

/* A copy of the section, changed by the caller, must be refused with the
 * status and at the offset given. */
static void expect_refused(const hand_vocab *h, size_t at, uint32_t value, pmpd_status status, const char *words)
{
    size_t size = (size_t)h->b.sections[0].size;
    unsigned char *copy = (unsigned char *)malloc(size);
    pmpd_tokenizer tok;
    pmpd_error err;
    memcpy(copy, h->b.sections[0].data, size);
    pmpd_le_put_u32(copy + at, value);
    if (pmpd_tokenizer_parse_bpe(&tok, copy, size, 1000, h->v.n_tokens, 0, 1, &err) != status)
        fail_msg("value %u at %zu: %s (%s), expected %s", (unsigned)value, at, pmpd_strerror(err.code),
                 err.message, pmpd_strerror(status));
    if (!strstr(err.message, words))
        fail_msg("message \"%s\" does not say \"%s\"", err.message, words);
    assert_int_equal(tok.n_tokens, 0);
    free(copy);
}

static void test_section_refusals(void **state)
{
    hand_vocab h;
    const unsigned char *s;
    uint32_t n, n_special, n_merges;
    size_t merges_at, special_at, types_at;
    (void)state;
    make_hand(&h, PMPD_PRETOK_GPT2);
    s = h.b.sections[0].data;
    n = pmpd_le_u32(s + PMPD_TOK_N_TOKENS);
    n_special = pmpd_le_u32(s + PMPD_TOK2_N_SPECIAL);
    n_merges = pmpd_le_u32(s + PMPD_TOK2_N_MERGES);
    assert_int_equal(n_merges, 9); /* the duplicate pair dropped */
    assert_int_equal(n_special, 4);
    special_at = PMPD_TOK2_HEADER_SIZE + 8u * n + 4u;
    merges_at = special_at + 4u * n_special;
    types_at = merges_at + 16u * n_merges;
    expect_refused(&h, PMPD_TOK2_MODEL, 1, PMPD_ERR_FORMAT_VALUE, "not byte-level BPE");
    expect_refused(&h, PMPD_TOK2_PRE, 9, PMPD_ERR_FORMAT_VALUE, "pre-tokenizer 9 is unknown");
    expect_refused(&h, PMPD_TOK2_N_MERGES, 0, PMPD_ERR_FORMAT_VALUE, "n_merges 0");
    expect_refused(&h, PMPD_TOK2_N_MERGES, n_merges + 1, PMPD_ERR_FORMAT_TRUNCATED, "counts imply");
    expect_refused(&h, PMPD_TOK2_EOT_ID, n, PMPD_ERR_FORMAT_VALUE, "eot_id");
    expect_refused(&h, PMPD_TOK_FLAGS, 8, PMPD_ERR_FORMAT_VALUE, "unknown bits");
    expect_refused(&h, PMPD_TOK2_RESERVED, 1, PMPD_ERR_FORMAT_VALUE, "reserved");
    /* merges naming missing tokens, ranks out of range, broken order, wrong results */
    expect_refused(&h, merges_at + 4, n, PMPD_ERR_FORMAT_VALUE, "outside the vocabulary");
    expect_refused(&h, merges_at + 12, n_merges, PMPD_ERR_FORMAT_VALUE, "rank 9, not below the 9 merges");
    expect_refused(&h, merges_at + 16, 0, PMPD_ERR_FORMAT_VALUE, "increasing (left, right) order");
    expect_refused(&h, merges_at + 8, 'q', PMPD_ERR_FORMAT_VALUE, "is not token");
    /* special list and token types */
    expect_refused(&h, special_at, 'a', PMPD_ERR_FORMAT_VALUE, "is not a special token");
    expect_refused(&h, special_at, BAR_A_BAR, PMPD_ERR_FORMAT_VALUE, "longest-first");
    expect_refused(&h, types_at + 'q', 0x01010103u, PMPD_ERR_FORMAT_VALUE, "5 tokens have a special type");
    expect_refused(&h, types_at + 4 * ('a' / 4), 0x09090909u, PMPD_ERR_FORMAT_VALUE, "unknown type 9");
    /* A byte with no normal token ('z' made a control token here; pruned
     * vocabularies lack 0xC0, 0xC1, 0xF5..0xFF) is dropped, and no merge
     * reaches across it. */
    {
        hand_vocab bad;
        pmpd_error err;
        hand_start(&bad, PMPD_PRETOK_GPT2);
        hand_normal(&bad, "ab");
        hand_merge(&bad, 'a', 'b');
        bad.v.types['z'] = PMPD_TOKEN_TYPE_CONTROL;
        hand_finish(&bad);
        EXPECT(&bad, "azb", 0, 'a', 'b');
        EXPECT(&bad, "abz", 0, 256);
        EXPECT(&bad, "azb", PMPD_TOKENIZE_SPECIAL, 'a', 'z', 'b');
        pmpd_build_free(&bad.b);
        /* and a merge whose concatenation is no token */
        hand_merge(&bad, 'b', 'q');
        pmpd_build_free(&bad.b);
        pmpd_build_init(&bad.b);
        assert_int_equal(pmpd_build_add_bpe_vocab(&bad.b, &bad.v, &err), PMPD_ERR_FORMAT_VALUE);
        assert_non_null(strstr(err.message, "makes no token"));
        hand_free(&bad);
    }
    hand_free(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merges_by_hand),      cmocka_unit_test(test_specials_by_hand),
        cmocka_unit_test(test_pretokenizer_words),  cmocka_unit_test(test_pretokenizer_names),
        cmocka_unit_test(test_round_trip),          cmocka_unit_test(test_scratch_size),
        cmocka_unit_test(test_section_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
