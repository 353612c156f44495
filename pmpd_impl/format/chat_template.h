/* The chat-template section (PMPD_SECTION_CHAT_TEMPLATE, version 1): GGUF's
 * tokenizer.chat_template kept as text, so tools can tell a model's chat
 * format.  Layout: u32 length, then length bytes of UTF-8 (no NUL); the
 * section is exactly 4 + length bytes.  The runtime never interprets it. */
#ifndef PMPD_FORMAT_CHAT_TEMPLATE_H
#define PMPD_FORMAT_CHAT_TEMPLATE_H

#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"

#define PMPD_CHAT_TEMPLATE_VERSION 1u
#define PMPD_CHAT_TEMPLATE_MAX_BYTES (1u << 20) /* real templates are 1-10 KB */

/* Checks text[0 .. length): at most PMPD_CHAT_TEMPLATE_MAX_BYTES, well-formed
 * UTF-8 (no overlong forms, surrogates or code points past U+10FFFF), no
 * NUL.  at is text's offset for the message; what names the field. */
PMPD_INTERNAL pmpd_status pmpd_chat_template_check(const unsigned char *text, uint64_t length, uint64_t at,
                                                   const char *what, pmpd_error *err);

/* Validates a version-1 section of size bytes at offset at and points
 * *text / *length at its text. */
PMPD_INTERNAL pmpd_status pmpd_chat_template_parse(const unsigned char *data, uint64_t size, uint64_t at,
                                                   const char **text, uint32_t *length, pmpd_error *err);

#endif
