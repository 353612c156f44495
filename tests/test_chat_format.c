/* Chat turns (examples/common/chat.c) against the literal texts each
 * family's template writes, typed out by hand from the documented formats
 * (Meta's Llama 3 and Llama 2 prompt formats, Qwen's ChatML, Zephyr /
 * TinyLlama-Chat); template detection from the templates' own Jinja text,
 * and refusal (EXAMPLE_CHAT_NONE) of templates of other families. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "examples/common/chat.c"

static void expect_turn(example_chat_family f, unsigned turn, const char *system, const char *user,
                        const char *expected)
{
    char out[512];
    size_t n = example_chat_format_turn(f, turn, system, user, out, sizeof out);
    if (strcmp(out, expected))
        fail_msg("%s turn %u:\n got      \"%s\"\n expected \"%s\"", example_chat_family_name(f), turn, out, expected);
    assert_int_equal(n, strlen(expected));
}

static void test_llama3(void **state)
{
    (void)state;
    /* BOS (<|begin_of_text|>) is the tokenizer's (add_bos_token). */
    expect_turn(EXAMPLE_CHAT_LLAMA3, 0, "Be brief.", "Hi!",
                "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect_turn(EXAMPLE_CHAT_LLAMA3, 0, NULL, "Hi!",
                "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n");
    /* Turn 1 first closes the reply the model ended (its <|eot_id|> was
     * not fed back); the system message is not repeated. */
    expect_turn(EXAMPLE_CHAT_LLAMA3, 1, "Be brief.", "And?",
                "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAnd?<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void test_chatml(void **state)
{
    (void)state;
    expect_turn(EXAMPLE_CHAT_CHATML, 0, "Be brief.", "Hi!",
                "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
    expect_turn(EXAMPLE_CHAT_CHATML, 0, "", "Hi!", "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
    expect_turn(EXAMPLE_CHAT_CHATML, 2, NULL, "And?",
                "<|im_end|>\n<|im_start|>user\nAnd?<|im_end|>\n<|im_start|>assistant\n");
}

static void test_zephyr(void **state)
{
    (void)state;
    expect_turn(EXAMPLE_CHAT_ZEPHYR, 0, "Be brief.", "Hi!",
                "<|system|>\nBe brief.</s>\n<|user|>\nHi!</s>\n<|assistant|>\n");
    expect_turn(EXAMPLE_CHAT_ZEPHYR, 0, NULL, "Hi!", "<|user|>\nHi!</s>\n<|assistant|>\n");
    expect_turn(EXAMPLE_CHAT_ZEPHYR, 1, NULL, "And?", "</s>\n<|user|>\nAnd?</s>\n<|assistant|>\n");
}

static void test_llama2(void **state)
{
    (void)state;
    expect_turn(EXAMPLE_CHAT_LLAMA2, 0, "Be brief.", "Hi!", "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi! [/INST]");
    expect_turn(EXAMPLE_CHAT_LLAMA2, 0, NULL, "Hi!", "<s>[INST] Hi! [/INST]");
    expect_turn(EXAMPLE_CHAT_LLAMA2, 1, "Be brief.", "And?", "</s><s>[INST] And? [/INST]");
}

static void test_pieces_mark_messages(void **state)
{
    example_chat_piece p[EXAMPLE_CHAT_MAX_PIECES];
    size_t n = example_chat_turn_pieces(EXAMPLE_CHAT_CHATML, 0, "S<|im_end|>", "U<|im_end|>", p), i, users = 0;
    (void)state;
    /* Messages are USER pieces, whatever they contain: never parsed for
     * special tokens. */
    for (i = 0; i < n; i++)
        if (p[i].kind == EXAMPLE_CHAT_USER) {
            assert_true(!strcmp(p[i].text, "S<|im_end|>") || !strcmp(p[i].text, "U<|im_end|>"));
            users++;
        } else {
            assert_int_equal(p[i].kind, EXAMPLE_CHAT_TEMPLATE);
            assert_null(strstr(p[i].text, "S<|") );
        }
    assert_int_equal(users, 2);
    /* None: nothing to format. */
    assert_int_equal(example_chat_turn_pieces(EXAMPLE_CHAT_NONE, 0, NULL, "x", p), 0);
    assert_int_equal(example_chat_turn_pieces((example_chat_family)99, 0, NULL, "x", p), 0);
}

static void test_format_truncates(void **state)
{
    char out[8];
    (void)state;
    /* snprintf's contract: the length needed, out NUL-terminated. */
    assert_int_equal(example_chat_format_turn(EXAMPLE_CHAT_LLAMA2, 0, NULL, "Hi!", out, sizeof out),
                     strlen("<s>[INST] Hi! [/INST]"));
    assert_true(strlen(out) < sizeof out);
    assert_int_equal(example_chat_format_turn(EXAMPLE_CHAT_NONE, 0, NULL, "Hi!", out, sizeof out), 0);
    assert_string_equal(out, "");
}

/* The chat templates as the models' GGUF files carry them (abridged to
 * their message loops; the markers are verbatim). */
static const char llama3_template[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
static const char chatml_template[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
static const char zephyr_template[] =
    "{% for message in messages %}\\n{% if message['role'] == 'user' %}\\n{{ '<|user|>\\n' + message['content'] + "
    "eos_token }}\\n{% elif message['role'] == 'system' %}\\n{{ '<|system|>\\n' + message['content'] + eos_token }}"
    "\\n{% elif message['role'] == 'assistant' %}\\n{{ '<|assistant|>\\n'  + message['content'] + eos_token }}\\n"
    "{% endif %}\\n{% if loop.last and add_generation_prompt %}\\n{{ '<|assistant|>' }}\\n{% endif %}\\n{% endfor %}";
static const char llama2_template[] =
    "{% if messages[0]['role'] == 'system' %}{% set system_message = '<<SYS>>\\n' + messages[0]['content'] | trim "
    "+ '\\n<</SYS>>\\n\\n' %}{% endif %}{% for message in loop_messages %}{% if message['role'] == 'user' %}"
    "{{ bos_token + '[INST] ' + content | trim + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ ' ' + content | trim + ' ' + eos_token }}{% endif %}{% endfor %}";
/* Other families: refused, not guessed. */
static const char gemma_template[] =
    "{% for message in messages %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + "
    "'<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}";
static const char mistral_template[] =
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + "
    "message['content'] + ' [/INST]' }}{% else %}{{ message['content'] + eos_token}}{% endif %}{% endfor %}";

static void test_detect_template(void **state)
{
    (void)state;
    assert_int_equal(example_chat_detect_template(llama3_template), EXAMPLE_CHAT_LLAMA3);
    assert_int_equal(example_chat_detect_template(chatml_template), EXAMPLE_CHAT_CHATML);
    assert_int_equal(example_chat_detect_template(zephyr_template), EXAMPLE_CHAT_ZEPHYR);
    assert_int_equal(example_chat_detect_template(llama2_template), EXAMPLE_CHAT_LLAMA2);
    assert_int_equal(example_chat_detect_template(gemma_template), EXAMPLE_CHAT_NONE);
    /* [INST] without <<SYS>>: Mistral's format differs (no system block). */
    assert_int_equal(example_chat_detect_template(mistral_template), EXAMPLE_CHAT_NONE);
    /* One marker of a pair is not enough. */
    assert_int_equal(example_chat_detect_template("<|start_header_id|> only"), EXAMPLE_CHAT_NONE);
    assert_int_equal(example_chat_detect_template("<|user|> but no assistant"), EXAMPLE_CHAT_NONE);
    assert_int_equal(example_chat_detect_template(""), EXAMPLE_CHAT_NONE);
    assert_int_equal(example_chat_detect_template(NULL), EXAMPLE_CHAT_NONE);
}

static void test_family_names(void **state)
{
    unsigned f;
    (void)state;
    for (f = EXAMPLE_CHAT_LLAMA3; f <= EXAMPLE_CHAT_LLAMA2; f++)
        assert_int_equal(example_chat_family_from_name(example_chat_family_name((example_chat_family)f)), f);
    assert_string_equal(example_chat_family_name(EXAMPLE_CHAT_LLAMA3), "llama3");
    assert_string_equal(example_chat_family_name(EXAMPLE_CHAT_CHATML), "chatml");
    assert_string_equal(example_chat_family_name(EXAMPLE_CHAT_ZEPHYR), "zephyr");
    assert_string_equal(example_chat_family_name(EXAMPLE_CHAT_LLAMA2), "llama2");
    assert_string_equal(example_chat_family_name((example_chat_family)42), "none");
    assert_int_equal(example_chat_family_from_name("none"), EXAMPLE_CHAT_NONE);
    assert_int_equal(example_chat_family_from_name("Llama3"), EXAMPLE_CHAT_NONE);
    assert_int_equal(example_chat_family_from_name(""), EXAMPLE_CHAT_NONE);
    assert_int_equal(example_chat_family_from_name(NULL), EXAMPLE_CHAT_NONE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama3),          cmocka_unit_test(test_chatml),
        cmocka_unit_test(test_zephyr),          cmocka_unit_test(test_llama2),
        cmocka_unit_test(test_pieces_mark_messages), cmocka_unit_test(test_format_truncates),
        cmocka_unit_test(test_detect_template), cmocka_unit_test(test_family_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
