/* The runtime BPE tokenizer against llama2.c: the reference ids in
 * ../shared/vectors, a direct transcription of run.c's algorithm over the
 * raw tokenizer.bin (C strings, linear search, sprintf-style concatenation),
 * and byte-fallback round trips of arbitrary bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd_impl/model/model.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

#define ARENA_BYTES (256u * 1024u)
static unsigned char model_memory[ARENA_BYTES];
static unsigned char scratch_memory[1u << 20];

typedef struct fixture {
    test_container container;
    pmpd_arena arena, scratch;
    pmpd_model *model;
    /* tok512.bin as run.c holds it. */
    int vocab_size;
    char **vocab;
    float *scores;
} fixture;

static void load_reference_vocab(fixture *f)
{
    char path[512];
    size_t size, at = 4;
    int i;
    unsigned char *data = test_read_file(test_shared_path(path, sizeof path, "models/tok512.bin"), &size);
    assert_non_null(data);
    f->vocab_size = 512;
    f->vocab = (char **)calloc(512, sizeof *f->vocab);
    f->scores = (float *)calloc(512, sizeof *f->scores);
    for (i = 0; i < 512; i++) {
        int32_t length;
        memcpy(&f->scores[i], data + at, 4);
        memcpy(&length, data + at + 4, 4);
        f->vocab[i] = (char *)calloc((size_t)length + 1, 1);
        memcpy(f->vocab[i], data + at + 8, (size_t)length);
        at += 8 + (size_t)length;
    }
    assert_int_equal(at, size);
    free(data);
}

static int setup(void **state)
{
    fixture *f = (fixture *)calloc(1, sizeof *f);
    if (!f || test_stories_container(&f->container) != PMPD_OK)
        return -1;
    pmpd_arena_init(&f->arena, model_memory, sizeof model_memory);
    pmpd_arena_init(&f->scratch, scratch_memory, sizeof scratch_memory);
    if (pmpd_model_open_memory(f->container.data, f->container.size, &f->arena, &f->model, NULL) != PMPD_OK)
        return -1;
    load_reference_vocab(f);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = (fixture *)*state;
    int i;
    for (i = 0; i < f->vocab_size; i++)
        free(f->vocab[i]);
    free(f->vocab);
    free(f->scores);
    test_container_free(&f->container);
    free(f);
    return 0;
}

static int reference_lookup(const fixture *f, const char *s)
{
    int i;
    for (i = 0; i < f->vocab_size; i++)
        if (strcmp(f->vocab[i], s) == 0)
            return i;
    return -1;
}

/* run.c's encode(), transcribed plainly (bos = 1, eos = 2, bytes at +3). */
static size_t reference_encode(const fixture *f, const char *text, int bos, int eos, int *tokens)
{
    char buffer[64];
    size_t length = 0, n = 0;
    const char *c;
    if (bos)
        tokens[n++] = 1;
    if (text[0] != '\0')
        tokens[n++] = reference_lookup(f, " ");
    for (c = text; *c != '\0'; c++) {
        if ((*c & 0xC0) != 0x80)
            length = 0;
        buffer[length++] = *c;
        buffer[length] = '\0';
        if ((*(c + 1) & 0xC0) == 0x80 && length < 4)
            continue;
        if (reference_lookup(f, buffer) != -1) {
            tokens[n++] = reference_lookup(f, buffer);
        } else {
            size_t i;
            for (i = 0; i < length; i++)
                tokens[n++] = (unsigned char)buffer[i] + 3;
        }
        length = 0;
    }
    for (;;) {
        float best_score = -1e10f;
        int best_id = -1;
        size_t best_idx = 0, i;
        for (i = 0; i + 1 < n; i++) {
            int id;
            snprintf(buffer, sizeof buffer, "%s%s", f->vocab[tokens[i]], f->vocab[tokens[i + 1]]);
            id = reference_lookup(f, buffer);
            if (id != -1 && f->scores[id] > best_score) {
                best_score = f->scores[id];
                best_id = id;
                best_idx = i;
            }
        }
        if (best_id == -1)
            break;
        tokens[best_idx] = best_id;
        for (i = best_idx + 1; i + 1 < n; i++)
            tokens[i] = tokens[i + 1];
        n--;
    }
    if (eos)
        tokens[n++] = 2;
    return n;
}

static void assert_same_as_reference(fixture *f, const char *text, int bos, int eos)
{
    int32_t ids[600];
    int expected[600];
    size_t n = 0, n_expected, i;
    assert_true(strlen(text) + 3 <= 600);
    assert_int_equal(pmpd_tokenize(f->model, text, bos, eos, ids, 600, &n, &f->scratch), PMPD_OK);
    n_expected = reference_encode(f, text, bos, eos, expected);
    assert_int_equal(n, n_expected);
    for (i = 0; i < n; i++)
        assert_int_equal(ids[i], expected[i]);
    assert_int_equal(f->scratch.used, 0);
}

/* Concatenates the pieces of ids[1..n) as run.c prints them (each after its
 * predecessor). */
static size_t decode_all(const fixture *f, const int32_t *ids, size_t n, char *out)
{
    size_t i, length = 0;
    for (i = 1; i < n; i++) {
        const char *piece;
        size_t piece_length;
        assert_int_equal(pmpd_token_to_piece(f->model, ids[i - 1], ids[i], &piece, &piece_length), PMPD_OK);
        memcpy(out + length, piece, piece_length);
        length += piece_length;
    }
    out[length] = '\0';
    return length;
}

static void test_once_upon_a_time_matches_run_c(void **state)
{
    fixture *f = (fixture *)*state;
    char path[512], text[64];
    size_t size, n, i;
    int32_t ids[32];
    char *vector = (char *)test_read_file(test_shared_path(path, sizeof path, "vectors/stories260K_once_greedy.ids"), &size);
    char *cursor;
    assert_non_null(vector);
    vector = (char *)realloc(vector, size + 1);
    vector[size] = '\0';
    assert_int_equal(pmpd_tokenize(f->model, "Once upon a time", 1, 0, ids, 32, &n, &f->scratch), PMPD_OK);
    assert_true(n >= 3);
    cursor = vector;
    for (i = 0; i < n; i++)
        assert_int_equal(ids[i], strtol(cursor, &cursor, 10));
    /* The next id in the file is the model's, and decoding gives the prompt back. */
    assert_int_equal(decode_all(f, ids, n, text), strlen("Once upon a time"));
    assert_string_equal(text, "Once upon a time");
    assert_same_as_reference(f, "Once upon a time", 1, 0);
    free(vector);
}

static void test_matches_reference_on_texts(void **state)
{
    static const char *const texts[] = {
        "", " ", "a", "Hello, world!", "  two  spaces  ", "Lily's mom said, \"Lily, let's go!\"\n\nThe end.",
        "caf\xc3\xa9 na\xc3\xafve \xe2\x98\x83 \xf0\x9f\x98\x80 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e",
        "\x80\x80\x80\x80\x80 lone continuation bytes", "\xf0\x9f\x98 truncated", "tab\tand\rcontrol\x01\x7f",
    };
    fixture *f = (fixture *)*state;
    size_t i;
    for (i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        assert_same_as_reference(f, texts[i], 1, 1);
        assert_same_as_reference(f, texts[i], 0, 0);
    }
}

static void test_random_bytes_match_reference_and_round_trip(void **state)
{
    fixture *f = (fixture *)*state;
    test_rng rng;
    int round;
    test_rng_seed(&rng, 42);
    for (round = 0; round < 200; round++) {
        char text[200], back[400 * 8];
        int32_t ids[260];
        size_t length = 1 + test_rng_u32(&rng) % 150, i, n;
        for (i = 0; i < length; i++) {
            uint32_t r = test_rng_u32(&rng);
            /* Mix ASCII letters, spaces and arbitrary bytes (never NUL). */
            text[i] = (char)(r % 3 == 0 ? 'a' + (r >> 8) % 26 : r % 3 == 1 ? ' ' + (r >> 8) % 95 : 1 + (r >> 8) % 255);
        }
        text[length] = '\0';
        assert_same_as_reference(f, text, 1, 0);
        assert_int_equal(pmpd_tokenize(f->model, text, 1, 0, ids, 260, &n, &f->scratch), PMPD_OK);
        assert_int_equal(decode_all(f, ids, n, back), length);
        assert_memory_equal(back, text, length);
    }
}

static void test_byte_pieces_decode_to_raw_bytes(void **state)
{
    fixture *f = (fixture *)*state;
    const char *piece;
    size_t length;
    int b;
    for (b = 0; b < 256; b++) {
        assert_int_equal(pmpd_token_to_piece(f->model, 100, 3 + b, &piece, &length), PMPD_OK);
        assert_int_equal(length, 1);
        assert_int_equal((unsigned char)piece[0], b);
    }
    assert_int_equal(pmpd_token_to_piece(f->model, -1, 512, &piece, &length), PMPD_ERR_TOKEN_RANGE);
    assert_int_equal(pmpd_token_to_piece(f->model, -1, -1, &piece, &length), PMPD_ERR_TOKEN_RANGE);
}

static void test_leading_space_dropped_only_after_bos(void **state)
{
    fixture *f = (fixture *)*state;
    int id = reference_lookup(f, " a");
    const char *piece;
    size_t length;
    assert_true(id > 0);
    assert_int_equal(pmpd_token_to_piece(f->model, 1, id, &piece, &length), PMPD_OK);
    assert_int_equal(length, 1);
    assert_memory_equal(piece, "a", 1);
    assert_int_equal(pmpd_token_to_piece(f->model, 5, id, &piece, &length), PMPD_OK);
    assert_int_equal(length, 2);
    assert_memory_equal(piece, " a", 2);
}

static void test_small_buffers(void **state)
{
    fixture *f = (fixture *)*state;
    int32_t ids[4];
    size_t n = 99;
    pmpd_arena tiny;
    static unsigned char tiny_memory[128];
    assert_int_equal(pmpd_tokenize(f->model, "Once upon a time", 1, 1, ids, 4, &n, &f->scratch),
                     PMPD_ERR_INVALID_ARGUMENT);
    assert_true(n > 4);
    assert_int_equal(f->scratch.used, 0);
    pmpd_arena_init(&tiny, tiny_memory, sizeof tiny_memory);
    assert_int_equal(pmpd_tokenize(f->model, "Once upon a time, there was a little girl", 1, 1, ids, 4, &n, &tiny),
                     PMPD_ERR_OUT_OF_MEMORY);
    assert_int_equal(pmpd_tokenize(f->model, "x", 1, 1, ids, 4, &n, NULL), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_tokenize(NULL, "x", 1, 1, ids, 4, &n, &f->scratch), PMPD_ERR_INVALID_ARGUMENT);
}

static void test_model_without_tokenizer(void **state)
{
    pmpd_build_model b;
    test_container c;
    pmpd_arena arena;
    pmpd_model *model;
    int32_t ids[8];
    size_t n;
    const char *piece;
    (void)state;
    assert_int_equal(test_import_shared("models/stories260K.bin", NULL, &b), PMPD_OK);
    assert_int_equal(test_serialize(&b, &c), PMPD_OK);
    pmpd_arena_init(&arena, model_memory, sizeof model_memory);
    assert_int_equal(pmpd_model_open_memory(c.data, c.size, &arena, &model, NULL), PMPD_OK);
    pmpd_arena_init(&arena, scratch_memory, sizeof scratch_memory);
    assert_int_equal(pmpd_tokenize(model, "x", 1, 0, ids, 8, &n, &arena), PMPD_ERR_FORMAT_MISSING);
    assert_int_equal(pmpd_token_to_piece(model, 1, 5, &piece, &n), PMPD_ERR_FORMAT_MISSING);
    pmpd_build_free(&b);
    test_container_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_once_upon_a_time_matches_run_c),
        cmocka_unit_test(test_matches_reference_on_texts),
        cmocka_unit_test(test_random_bytes_match_reference_and_round_trip),
        cmocka_unit_test(test_byte_pieces_decode_to_raw_bytes),
        cmocka_unit_test(test_leading_space_dropped_only_after_bos),
        cmocka_unit_test(test_small_buffers),
        cmocka_unit_test(test_model_without_tokenizer),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
