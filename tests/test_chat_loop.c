/* pmpd-run --chat's functions on synthetic byte-level BPE models (written
 * by pmpd_synth_gguf from vocabularies made here, imported, opened):
 * the chat family found from the vocabulary's special tokens; a turn's ids
 * worked out by hand (template markers are single control ids, a message
 * typing the same markers is its plain bytes, so it cannot inject one);
 * a scripted conversation (two messages, /reset, one more) that ends at
 * EOF with three replies; a context that fills is said and starts over. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "examples/common/chat.c"
#include "examples/common/chat_loop.c"
#include "pmpd_impl/offline/format/builder.h"
#include "pmpd_impl/offline/format/from_model.h"
#include "pmpd_impl/offline/import/import.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

/* Ids 0..255 the bytes, 256 "ab" (merges need one), then the control
 * tokens of specials (NULL-terminated) from 257. */
static void open_model(const char *pre, const char *const *specials, unsigned bos, unsigned eos, unsigned eot,
                       int add_bos, uint32_t seq_len, pmpd_build_opened *opened)
{
    char vocab_path[256], path[256], piece[2];
    FILE *f;
    unsigned b, n = 0;
    pmpd_synth_options o;
    pmpd_error err;
    pmpd_build_model build;
    unsigned char *g;
    size_t size;
    while (specials[n])
        n++;
    snprintf(vocab_path, sizeof vocab_path, "/tmp/pmpd_test_chat_%ld.vocab", (long)getpid());
    snprintf(path, sizeof path, "/tmp/pmpd_test_chat_%ld.gguf", (long)getpid());
    f = fopen(vocab_path, "wb");
    assert_non_null(f);
    fprintf(f, "pmpd-gpt2-vocab 1\npre %s\nbos %u\neos %u\neot %u\nadd_bos %d\ntokens %u\n", pre, bos, eos, eot,
            add_bos, 257 + n);
    for (b = 0; b < 256; b++) {
        fputs("1 ", f);
        fwrite(piece, 1, test_byte_level_piece(b, piece), f);
        fputc('\n', f);
    }
    fputs("1 ab\n", f);
    for (b = 0; b < n; b++)
        fprintf(f, "3 %s\n", specials[b]);
    fputs("merges 1\na b\n", f);
    fclose(f);
    pmpd_synth_options_default(&o);
    o.dim = 32;
    o.hidden_dim = 32;
    o.n_layers = 1;
    o.n_heads = 1;
    o.n_kv_heads = 1;
    o.seq_len = seq_len;
    o.type = PMPD_GGML_F32;
    o.tokenizer_path = NULL;
    o.gpt2_vocab_path = vocab_path;
    assert_int_equal(pmpd_synth_gguf(path, &o, NULL, &err), PMPD_OK);
    remove(vocab_path);
    g = test_read_file(path, &size);
    remove(path);
    assert_non_null(g);
    pmpd_build_init(&build);
    assert_int_equal(pmpd_import_gguf(g, size, &build, &err), PMPD_OK);
    assert_int_equal(pmpd_build_open(&build, opened, &err), PMPD_OK);
    pmpd_build_free(&build);
    free(g);
}

/* ChatML: 257 <|endoftext|> (BOS), 258 <|im_start|>, 259 <|im_end|> (EOS, EOT). */
static const char *const chatml_specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", NULL};
/* Llama 3: 257 <|begin_of_text|>, 258 <|end_of_text|>, 259 <|start_header_id|>,
 * 260 <|end_header_id|>, 261 <|eot_id|>. */
static const char *const llama3_specials[] = {"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                                              "<|end_header_id|>", "<|eot_id|>", NULL};
/* Zephyr-style markers as control tokens of a BPE vocabulary. */
static const char *const zephyr_specials[] = {"<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>", NULL};
/* A vocabulary of no known family. */
static const char *const other_specials[] = {"<start_of_turn>", "<end_of_turn>", NULL};

static unsigned char scratch_block[1 << 16];

static example_chat_family detect(const char *const *specials, unsigned eot)
{
    pmpd_build_opened o;
    pmpd_arena scratch;
    example_chat_family f;
    open_model("qwen2", specials, 257, 258, eot, 0, 32, &o);
    pmpd_arena_init(&scratch, scratch_block, sizeof scratch_block);
    f = example_chat_detect_vocab(o.model, &scratch);
    pmpd_build_close(&o);
    return f;
}

static void test_detect_vocab(void **state)
{
    (void)state;
    assert_int_equal(detect(chatml_specials, 259), EXAMPLE_CHAT_CHATML);
    assert_int_equal(detect(llama3_specials, 261), EXAMPLE_CHAT_LLAMA3);
    assert_int_equal(detect(zephyr_specials, 258), EXAMPLE_CHAT_ZEPHYR);
    assert_int_equal(detect(other_specials, 258), EXAMPLE_CHAT_NONE);
    assert_int_equal(example_chat_detect_vocab(NULL, NULL), EXAMPLE_CHAT_NONE);
}

static void test_sentencepiece_not_detected(void **state)
{
    test_opened_model m;
    pmpd_arena scratch;
    (void)state;
    /* stories260K's llama2.c vocabulary: no special tokens to tell a
     * family by (TinyLlama-Chat, Llama 2 need --template). */
    assert_int_equal(test_open_shared("models/stories260K.bin", "models/tok512.bin", PMPD_TENSOR_F32, &m), PMPD_OK);
    pmpd_arena_init(&scratch, scratch_block, sizeof scratch_block);
    assert_int_equal(example_chat_detect_vocab(m.model, &scratch), EXAMPLE_CHAT_NONE);
    test_opened_close(&m);
}

/* Appends the bytes of s as ids (every byte is its own id here; "ab" must
 * not occur). */
static size_t bytes_ids(const char *s, int32_t *ids, size_t n)
{
    for (; *s; s++)
        ids[n++] = (unsigned char)*s;
    return n;
}

static void test_turn_ids_chatml(void **state)
{
    pmpd_build_opened o;
    pmpd_arena scratch;
    example_chat_piece p[EXAMPLE_CHAT_MAX_PIECES];
    int32_t got[128], want[128];
    size_t n_got = 0, n_want = 0, n_pieces;
    (void)state;
    open_model("qwen2", chatml_specials, 257, 259, 259, 0, 32, &o);
    pmpd_arena_init(&scratch, scratch_block, sizeof scratch_block);
    /* The user types ChatML's own markers: they stay bytes. */
    n_pieces = example_chat_turn_pieces(EXAMPLE_CHAT_CHATML, 0, "S", "x<|im_end|>", p);
    assert_int_equal(example_chat_tokenize_turn(o.model, p, n_pieces, 0, got, 128, &n_got, &scratch), PMPD_OK);
    want[n_want++] = 258;
    n_want = bytes_ids("system\nS", want, n_want);
    want[n_want++] = 259;
    n_want = bytes_ids("\n", want, n_want);
    want[n_want++] = 258;
    n_want = bytes_ids("user\nx<|im_end|>", want, n_want);
    want[n_want++] = 259;
    n_want = bytes_ids("\n", want, n_want);
    want[n_want++] = 258;
    n_want = bytes_ids("assistant\n", want, n_want);
    assert_int_equal(n_got, n_want);
    assert_memory_equal(got, want, n_want * sizeof *want);
    /* add_bos puts the BOS id first; too small a buffer is refused. */
    assert_int_equal(example_chat_tokenize_turn(o.model, p, n_pieces, 1, got, 128, &n_got, &scratch), PMPD_OK);
    assert_int_equal(got[0], 257);
    assert_int_equal(n_got, n_want + 1);
    assert_int_not_equal(example_chat_tokenize_turn(o.model, p, n_pieces, 1, got, 8, &n_got, &scratch), PMPD_OK);
    pmpd_build_close(&o);
}

static void test_turn_ids_llama3(void **state)
{
    pmpd_build_opened o;
    pmpd_arena scratch;
    example_chat_piece p[EXAMPLE_CHAT_MAX_PIECES];
    int32_t got[128], want[128];
    size_t n_got = 0, n_want = 0, n_pieces;
    (void)state;
    open_model("llama-bpe", llama3_specials, 257, 258, 261, 1, 32, &o);
    pmpd_arena_init(&scratch, scratch_block, sizeof scratch_block);
    n_pieces = example_chat_turn_pieces(EXAMPLE_CHAT_LLAMA3, 1, NULL, "<|eot_id|>", p);
    assert_int_equal(example_chat_tokenize_turn(o.model, p, n_pieces, 0, got, 128, &n_got, &scratch), PMPD_OK);
    want[n_want++] = 261;
    want[n_want++] = 259;
    n_want = bytes_ids("user", want, n_want);
    want[n_want++] = 260;
    n_want = bytes_ids("\n\n<|eot_id|>", want, n_want);
    want[n_want++] = 261;
    want[n_want++] = 259;
    n_want = bytes_ids("assistant", want, n_want);
    want[n_want++] = 260;
    n_want = bytes_ids("\n\n", want, n_want);
    assert_int_equal(n_got, n_want);
    assert_memory_equal(got, want, n_want * sizeof *want);
    pmpd_build_close(&o);
}

typedef struct chat_run {
    pmpd_status status;
    example_chat_stats stats;
    char out[4096], err[4096];
} chat_run;

static void read_all(FILE *f, char *buf, size_t size)
{
    size_t n;
    rewind(f);
    n = fread(buf, 1, size - 1, f);
    buf[n] = 0;
    fclose(f);
}

/* Runs the loop on script with a greedy sampler. */
static void run_script(const pmpd_model *model, uint32_t context, size_t max_reply, const char *system,
                       const char *script, chat_run *r)
{
    pmpd_session_config config;
    pmpd_sampler_config sc;
    pmpd_sampler sampler;
    pmpd_arena arena, scratch;
    pmpd_rng rng;
    example_chat_config c;
    size_t sampler_bytes;
    void *session_block, *sampler_block;
    pmpd_session *session;
    FILE *in = tmpfile(), *out = tmpfile(), *err = tmpfile();
    assert_non_null(in);
    assert_non_null(out);
    assert_non_null(err);
    fputs(script, in);
    rewind(in);
    pmpd_session_config_init(&config);
    config.context_length = context;
    session = test_session_open(model, &config, &session_block);
    memset(&sc, 0, sizeof sc);
    sc.temperature = 0.0f;
    sc.top_p = 1.0f;
    assert_int_equal(pmpd_sampler_plan(pmpd_model_get_info(model)->vocab_size, &sampler_bytes), PMPD_OK);
    sampler_block = malloc(sampler_bytes + PMPD_ARENA_ALIGNMENT);
    assert_non_null(sampler_block);
    pmpd_arena_init(&arena, test_aligned(sampler_block), sampler_bytes);
    assert_int_equal(pmpd_sampler_init(&sampler, &sc, pmpd_model_get_info(model)->vocab_size, &arena), PMPD_OK);
    pmpd_rng_seed(&rng, 1);
    pmpd_arena_init(&scratch, scratch_block, sizeof scratch_block);
    memset(&c, 0, sizeof c);
    c.family = EXAMPLE_CHAT_CHATML;
    c.system = system;
    c.max_reply = max_reply;
    c.context_length = context;
    r->status = example_chat_loop(model, session, &sampler, &rng, &c, in, out, err, &scratch, &r->stats);
    fclose(in);
    read_all(out, r->out, sizeof r->out);
    read_all(err, r->err, sizeof r->err);
    test_session_close(session, session_block);
    free(sampler_block);
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void test_scripted_chat(void **state)
{
    pmpd_build_opened o;
    chat_run *r = (chat_run *)calloc(1, sizeof *r);
    (void)state;
    assert_non_null(r);
    open_model("qwen2", chatml_specials, 257, 259, 259, 0, 256, &o);
    run_script(o.model, 256, 8, "Be brief.", "hello\nand <|im_end|> again\n/reset\n\nlast\n", r);
    assert_int_equal(r->status, PMPD_OK);
    assert_int_equal(r->stats.replies, 3);
    assert_int_equal(r->stats.resets, 1);
    assert_int_equal(r->stats.context_full, 0);
    assert_int_equal(count_lines(r->out), 3); /* one line per reply */
    assert_non_null(strstr(r->err, "(new conversation)"));
    /* Control tokens are never printed. */
    assert_null(strstr(r->out, "<|im_"));
    /* EOF with no line at all: no reply, still fine. */
    run_script(o.model, 256, 8, NULL, "", r);
    assert_int_equal(r->status, PMPD_OK);
    assert_int_equal(r->stats.replies, 0);
    pmpd_build_close(&o);
    free(r);
}

static void test_context_fills(void **state)
{
    pmpd_build_opened o;
    chat_run *r = (chat_run *)calloc(1, sizeof *r);
    (void)state;
    assert_non_null(r);
    open_model("qwen2", chatml_specials, 257, 259, 259, 0, 48, &o);
    /* Turn 0 of "hi" is 21 ids; a 40-position context cannot hold a second
     * turn after a 12-token reply: the loop says so and starts over. */
    run_script(o.model, 40, 12, NULL, "hi\nhi\nhi\n", r);
    assert_int_equal(r->status, PMPD_OK);
    assert_int_equal(r->stats.replies, 3);
    assert_true(r->stats.context_full >= 1);
    assert_non_null(strstr(r->err, "context full"));
    /* A message longer than the whole context is skipped with a notice. */
    run_script(o.model, 40, 4, NULL, "a message far too long for a context of forty positions\nhi\n", r);
    assert_int_equal(r->status, PMPD_OK);
    assert_int_equal(r->stats.replies, 1);
    assert_non_null(strstr(r->err, "more than the context"));
    pmpd_build_close(&o);
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_detect_vocab),    cmocka_unit_test(test_sentencepiece_not_detected),
        cmocka_unit_test(test_turn_ids_chatml), cmocka_unit_test(test_turn_ids_llama3),
        cmocka_unit_test(test_scripted_chat),   cmocka_unit_test(test_context_fills),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
