#include "examples/common/chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each family as fixed texts around the messages, written out from the
 * templates' documented formats (Meta's Llama 3 model card, Qwen's ChatML,
 * HuggingFaceH4/zephyr and TinyLlama-Chat's template, Meta's Llama 2
 * chat_completion).  NULL: the family has no such text. */
typedef struct chat_family_table {
    const char *name;
    const char *marker1, *marker2; /* both in a template of this family */
    const char *end_reply;         /* closes the previous assistant reply */
    int eos_ends_reply;            /* ... with the EOS id first */
    int bos_each_turn;             /* <s> starts every turn (Llama 2) */
    const char *system_open, *system_close;
    const char *user_open, *user_close; /* user_close includes the assistant header */
    int eos_after_message;              /* EOS id closes system and user messages (Zephyr) */
    const char *after_eos;              /* text after that EOS */
} chat_family_table;

static const chat_family_table chat_families[] = {
    {"none", NULL, NULL, NULL, 0, 0, NULL, NULL, NULL, NULL, 0, NULL},
    {"llama3", "<|start_header_id|>", "<|eot_id|>", "<|eot_id|>", 0, 0,
     "<|start_header_id|>system<|end_header_id|>\n\n", "<|eot_id|>",
     "<|start_header_id|>user<|end_header_id|>\n\n", "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", 0,
     NULL},
    {"chatml", "<|im_start|>", "<|im_end|>", "<|im_end|>\n", 0, 0, "<|im_start|>system\n", "<|im_end|>\n",
     "<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n", 0, NULL},
    /* Zephyr: every message ends with EOS and a newline. */
    {"zephyr", "<|user|>", "<|assistant|>", "\n", 1, 0, "<|system|>\n", "", "<|user|>\n", "<|assistant|>\n", 1,
     "\n"},
    /* Llama 2: the system message sits inside the first [INST]. */
    {"llama2", "[INST]", "<<SYS>>", NULL, 1, 1, "<<SYS>>\n", "\n<</SYS>>\n\n", "[INST] ", " [/INST]", 0, NULL},
};

#define CHAT_N_FAMILIES (sizeof chat_families / sizeof chat_families[0])

const char *example_chat_family_name(example_chat_family family)
{
    return (unsigned)family < CHAT_N_FAMILIES ? chat_families[family].name : "none";
}

example_chat_family example_chat_family_from_name(const char *name)
{
    unsigned f;
    for (f = 1; name && f < CHAT_N_FAMILIES; f++)
        if (!strcmp(name, chat_families[f].name))
            return (example_chat_family)f;
    return EXAMPLE_CHAT_NONE;
}

example_chat_family example_chat_detect_template(const char *chat_template)
{
    unsigned f;
    /* Table order matters: a Llama 3 template mentions no ChatML marker,
     * but a Zephyr-like one could mention [INST] in a comment; the first
     * family whose two markers both appear wins. */
    for (f = 1; chat_template && f < CHAT_N_FAMILIES; f++)
        if (strstr(chat_template, chat_families[f].marker1) && strstr(chat_template, chat_families[f].marker2))
            return (example_chat_family)f;
    return EXAMPLE_CHAT_NONE;
}

/* 1 when text is a single control token of the vocabulary. */
static int chat_has_control(const pmpd_model *model, const char *text, pmpd_arena *scratch)
{
    int32_t ids[8];
    size_t n = 0;
    if (pmpd_tokenize_text(model, text, strlen(text), PMPD_TOKENIZE_SPECIAL, ids, 8, &n, scratch) != PMPD_OK)
        return 0;
    return n == 1 && pmpd_token_is_control(model, ids[0]);
}

example_chat_family example_chat_detect_vocab(const pmpd_model *model, pmpd_arena *scratch)
{
    unsigned f;
    pmpd_tokenizer_info info;
    if (pmpd_model_get_tokenizer_info(model, &info) != PMPD_OK || info.kind != 2)
        return EXAMPLE_CHAT_NONE;
    /* Llama 2's markers are plain text, never tokens: not detectable. */
    for (f = 1; f < CHAT_N_FAMILIES; f++)
        if (f != EXAMPLE_CHAT_LLAMA2 && chat_has_control(model, chat_families[f].marker1, scratch) &&
            chat_has_control(model, chat_families[f].marker2, scratch))
            return (example_chat_family)f;
    return EXAMPLE_CHAT_NONE;
}

example_chat_family example_chat_detect_model(const pmpd_model *model, pmpd_arena *scratch, const char **source)
{
    const char *text;
    size_t length;
    example_chat_family f = EXAMPLE_CHAT_NONE;
    if (pmpd_model_chat_template(model, &text, &length) == PMPD_OK) {
        /* The stored text is not NUL-terminated. */
        char *copy = (char *)malloc(length + 1);
        if (copy) {
            memcpy(copy, text, length);
            copy[length] = 0;
            f = example_chat_detect_template(copy);
            free(copy);
        }
    }
    if (source)
        *source = f != EXAMPLE_CHAT_NONE ? "chat template" : NULL;
    if (f == EXAMPLE_CHAT_NONE && (f = example_chat_detect_vocab(model, scratch)) != EXAMPLE_CHAT_NONE && source)
        *source = "special tokens";
    return f;
}

static void chat_add(example_chat_piece *pieces, size_t *n, example_chat_piece_kind kind, const char *text)
{
    if ((kind == EXAMPLE_CHAT_TEMPLATE) && (!text || !text[0]))
        return;
    pieces[*n].kind = kind;
    pieces[*n].text = text;
    (*n)++;
}

size_t example_chat_turn_pieces(example_chat_family family, unsigned turn, const char *system,
                                const char *user, example_chat_piece pieces[EXAMPLE_CHAT_MAX_PIECES])
{
    const chat_family_table *t;
    size_t n = 0;
    if (family <= EXAMPLE_CHAT_NONE || (unsigned)family >= CHAT_N_FAMILIES)
        return 0;
    t = &chat_families[family];
    if (turn > 0) {
        if (t->eos_ends_reply)
            chat_add(pieces, &n, EXAMPLE_CHAT_EOS, NULL);
        chat_add(pieces, &n, EXAMPLE_CHAT_TEMPLATE, t->end_reply);
    }
    if (t->bos_each_turn)
        chat_add(pieces, &n, EXAMPLE_CHAT_BOS, NULL);
    if (t->bos_each_turn) /* Llama 2: "[INST] " comes before <<SYS>> */
        chat_add(pieces, &n, EXAMPLE_CHAT_TEMPLATE, t->user_open);
    if (turn == 0 && system && system[0]) {
        chat_add(pieces, &n, EXAMPLE_CHAT_TEMPLATE, t->system_open);
        chat_add(pieces, &n, EXAMPLE_CHAT_USER, system);
        chat_add(pieces, &n, EXAMPLE_CHAT_TEMPLATE, t->system_close);
        if (t->eos_after_message) {
            chat_add(pieces, &n, EXAMPLE_CHAT_EOS, NULL);
            chat_add(pieces, &n, EXAMPLE_CHAT_TEMPLATE, t->after_eos);
        }
    }
    if (!t->bos_each_turn)
        chat_add(pieces, &n, EXAMPLE_CHAT_TEMPLATE, t->user_open);
    chat_add(pieces, &n, EXAMPLE_CHAT_USER, user ? user : "");
    if (t->eos_after_message) {
        chat_add(pieces, &n, EXAMPLE_CHAT_EOS, NULL);
        chat_add(pieces, &n, EXAMPLE_CHAT_TEMPLATE, t->after_eos);
    }
    chat_add(pieces, &n, EXAMPLE_CHAT_TEMPLATE, t->user_close);
    return n;
}

size_t example_chat_format_turn(example_chat_family family, unsigned turn, const char *system, const char *user,
                                char *out, size_t size)
{
    example_chat_piece pieces[EXAMPLE_CHAT_MAX_PIECES];
    size_t n = example_chat_turn_pieces(family, turn, system, user, pieces), i, length = 0;
    if (size)
        out[0] = 0;
    for (i = 0; i < n; i++) {
        const char *text = pieces[i].kind == EXAMPLE_CHAT_BOS ? "<s>"
                           : pieces[i].kind == EXAMPLE_CHAT_EOS ? "</s>"
                                                                : pieces[i].text;
        size_t k = strlen(text);
        if (length + k < size)
            memcpy(out + length, text, k + 1);
        else if (length < size)
            out[length] = 0;
        length += k;
    }
    return length;
}

/* Appends the ids of text[0 .. length) (no BOS) to ids[*n ..). */
static pmpd_status chat_tokenize(const pmpd_model *model, const char *text, size_t length, unsigned flags,
                                 int32_t *ids, size_t max_ids, size_t *n, pmpd_arena *scratch)
{
    size_t got = 0;
    pmpd_status st;
    if (!length)
        return PMPD_OK;
    st = pmpd_tokenize_text(model, text, length, flags, ids + *n, max_ids - *n, &got, scratch);
    if (st == PMPD_OK)
        *n += got;
    return st;
}

static pmpd_status chat_push(int32_t id, int32_t *ids, size_t max_ids, size_t *n)
{
    if (*n >= max_ids)
        return PMPD_ERR_INVALID_ARGUMENT;
    ids[(*n)++] = id;
    return PMPD_OK;
}

pmpd_status example_chat_tokenize_turn(const pmpd_model *model, const example_chat_piece *pieces, size_t n_pieces,
                                       int add_bos, int32_t *ids, size_t max_ids, size_t *n, pmpd_arena *scratch)
{
    pmpd_tokenizer_info info;
    pmpd_status st = pmpd_model_get_tokenizer_info(model, &info);
    size_t i = 0;
    *n = 0;
    if (st != PMPD_OK)
        return st;
    if (add_bos && (st = chat_push((int32_t)info.bos_id, ids, max_ids, n)) != PMPD_OK)
        return st;
    while (i < n_pieces) {
        if (pieces[i].kind == EXAMPLE_CHAT_BOS || pieces[i].kind == EXAMPLE_CHAT_EOS) {
            st = chat_push((int32_t)(pieces[i].kind == EXAMPLE_CHAT_BOS ? info.bos_id : info.eos_id), ids, max_ids, n);
            i++;
        } else if (info.kind == 2) {
            /* Byte-level BPE: each piece on its own, so message text is
             * never read as special tokens. */
            st = chat_tokenize(model, pieces[i].text, strlen(pieces[i].text),
                               pieces[i].kind == EXAMPLE_CHAT_TEMPLATE ? PMPD_TOKENIZE_SPECIAL : 0u, ids, max_ids,
                               n, scratch);
            i++;
        } else {
            /* SentencePiece: the text up to the next id as one string
             * (one leading space, as llama.cpp adds after a special token). */
            size_t j, length = 0;
            char *joined;
            for (j = i; j < n_pieces && pieces[j].text && pieces[j].kind <= EXAMPLE_CHAT_USER; j++)
                length += strlen(pieces[j].text);
            if (!(joined = (char *)malloc(length + 1)))
                return PMPD_ERR_OUT_OF_MEMORY;
            length = 0;
            for (; i < j; i++) {
                size_t k = strlen(pieces[i].text);
                memcpy(joined + length, pieces[i].text, k);
                length += k;
            }
            joined[length] = 0;
            st = chat_tokenize(model, joined, length, 0u, ids, max_ids, n, scratch);
            free(joined);
        }
        if (st != PMPD_OK)
            return st;
    }
    return PMPD_OK;
}
