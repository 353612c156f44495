/* Chat templates without a template engine: the four families the GGUF
 * models people run use (Llama 3, ChatML, Zephyr, Llama 2), each a small
 * table of fixed texts around the system and user messages.  Tool code
 * (pmpd-run --chat), not runtime: the runtime only tokenizes and runs. */
#ifndef PMPD_EXAMPLES_CHAT_H
#define PMPD_EXAMPLES_CHAT_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"

typedef enum example_chat_family {
    EXAMPLE_CHAT_NONE = 0, /* unknown: no chat formatting */
    EXAMPLE_CHAT_LLAMA3,   /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
    EXAMPLE_CHAT_CHATML,   /* <|im_start|>role\n...<|im_end|>\n (Qwen, SmolLM) */
    EXAMPLE_CHAT_ZEPHYR,   /* <|user|>\n...</s>\n<|assistant|>\n (TinyLlama-Chat) */
    EXAMPLE_CHAT_LLAMA2    /* <s>[INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] */
} example_chat_family;

/* The family's name ("llama3", "chatml", "zephyr", "llama2"), "none". */
const char *example_chat_family_name(example_chat_family family);

/* The family named name (as above), or EXAMPLE_CHAT_NONE. */
example_chat_family example_chat_family_from_name(const char *name);

/* The family of a Jinja chat template (GGUF tokenizer.chat_template) by the
 * marker texts it writes; EXAMPLE_CHAT_NONE for NULL or anything else (the
 * caller then refuses to chat rather than guess a format). */
example_chat_family example_chat_detect_template(const char *chat_template);

/* The family by the vocabulary's special tokens (byte-level BPE:
 * <|start_header_id|> and <|eot_id|>, <|im_start|> and <|im_end|>, <|user|>
 * and <|assistant|> each a single control id).  SentencePiece vocabularies
 * (TinyLlama-Chat, Llama 2) carry no such tokens: EXAMPLE_CHAT_NONE (the
 * user names the family).  scratch: tokenizer working memory (a few KiB). */
example_chat_family example_chat_detect_vocab(const pmpd_model *model, pmpd_arena *scratch);

/* The model's family: from its stored chat template (GGUF
 * tokenizer.chat_template, pmpd_model_chat_template) when it names one of
 * the four, else from its vocabulary's special tokens (a template of
 * another family, or none, falls back to them).  *source (may be NULL)
 * says which: "chat template", "special tokens", or NULL for none. */
example_chat_family example_chat_detect_model(const pmpd_model *model, pmpd_arena *scratch, const char **source);

/* One stretch of a formatted turn. */
typedef enum example_chat_piece_kind {
    EXAMPLE_CHAT_TEMPLATE = 0, /* the template's own text: special tokens parsed */
    EXAMPLE_CHAT_USER,         /* a message: never parsed for special tokens */
    EXAMPLE_CHAT_BOS,          /* the BOS id (written "<s>") */
    EXAMPLE_CHAT_EOS           /* the EOS id (written "</s>") */
} example_chat_piece_kind;

typedef struct example_chat_piece {
    example_chat_piece_kind kind;
    const char *text; /* TEMPLATE, USER */
} example_chat_piece;

#define EXAMPLE_CHAT_MAX_PIECES 12

/* The pieces of one turn: closing the previous reply when turn > 0 (the
 * stop token was not fed to the model, so the template's end of turn is),
 * the system message on turn 0 when system is not NULL or empty, the user
 * message, and the assistant header the reply follows.  BOS at the start
 * of a conversation is the caller's (as the model's metadata says), except
 * Llama 2, whose template writes <s> at every turn.  Returns the count,
 * 0 for EXAMPLE_CHAT_NONE. */
size_t example_chat_turn_pieces(example_chat_family family, unsigned turn, const char *system,
                                const char *user, example_chat_piece pieces[EXAMPLE_CHAT_MAX_PIECES]);

/* The turn as text (BOS and EOS written <s> and </s>) into out (NUL-
 * terminated); returns the length it needs, as snprintf does. */
size_t example_chat_format_turn(example_chat_family family, unsigned turn, const char *system, const char *user,
                                char *out, size_t size);

/* Tokenizes a turn's pieces into ids[0 .. *n): template text with
 * PMPD_TOKENIZE_SPECIAL where the vocabulary supports it (byte-level BPE),
 * messages without it, so a user typing <|im_end|> gets plain-text ids;
 * in SentencePiece vocabularies (which never parse special tokens) the text
 * between two ids is tokenized as one string, as llama.cpp does.  add_bos:
 * put the model's BOS first (the conversation's first turn, when the
 * model's metadata asks for it and the template has no <s> of its own).
 * Errors: those of pmpd_tokenize_text; PMPD_ERR_INVALID_ARGUMENT when ids
 * is too small (*n then holds what was written). */
pmpd_status example_chat_tokenize_turn(const pmpd_model *model, const example_chat_piece *pieces, size_t n_pieces,
                                       int add_bos, int32_t *ids, size_t max_ids, size_t *n, pmpd_arena *scratch);

#endif
