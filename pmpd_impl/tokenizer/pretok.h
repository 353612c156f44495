/* Pre-tokenizers of byte-level BPE vocabularies: hand-written scanners
 * equivalent to the regular expressions the models were trained with (no
 * regex engine).  Each call finds the next "word" the expression would
 * match at the start of a text fragment; BPE merges never cross words. */
#ifndef PMPD_TOKENIZER_PRETOK_H
#define PMPD_TOKENIZER_PRETOK_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd_impl/core/config.h"

/* Values stored in the container's tokenizer section (version 2). */
enum {
    PMPD_PRETOK_LLAMA3 = 1, /* llama-bpe: contractions, letters, digits in threes, ... */
    PMPD_PRETOK_QWEN2 = 2,  /* as LLAMA3 with single digits */
    PMPD_PRETOK_SMOLLM = 3, /* every digit alone, then GPT2's expression */
    PMPD_PRETOK_GPT2 = 4,   /* GPT-2's original expression */
    PMPD_PRETOK_COUNT = 5
};

/* Byte length (>= 1) of the next word at the start of text[0 .. length),
 * length > 0.  Bytes that are not UTF-8 count as single characters of no
 * letter or number class (as U+FFFD would), so any input is split and no
 * byte is lost. */
PMPD_INTERNAL size_t pmpd_pretok_next(uint32_t kind, const unsigned char *text, size_t length);

/* The kind GGUF's tokenizer.ggml.pre names (length bytes, not
 * NUL-terminated), or 0 when this build has no scanner for it. */
PMPD_INTERNAL uint32_t pmpd_pretok_from_name(const char *name, size_t length);

/* The canonical name of kind ("llama-bpe", ...), or NULL. */
PMPD_INTERNAL const char *pmpd_pretok_name(uint32_t kind);

/* Unicode class of a code point: 0 other, 1 letter (\p{L}), 2 number
 * (\p{N}), 3 white space (\s: the White_Space property). */
PMPD_INTERNAL int pmpd_unicode_class(uint32_t cp);

/* Decodes the character at text[0 .. length), length > 0, as llama.cpp
 * does: the lead byte gives the length and continuation bytes must be
 * 10xxxxxx; anything else is one byte standing for U+FFFD.  Returns its
 * byte length and sets *cp. */
PMPD_INTERNAL size_t pmpd_utf8_decode(const unsigned char *text, size_t length, uint32_t *cp);

#endif
