/* Byte-level BPE (GGUF's "gpt2" tokenizer model) over a version 2
 * tokenizer section: special tokens split out first, then the
 * pre-tokenizer's words, each merged from its raw bytes by merge rank
 * (lowest first, leftmost among equals), as llama.cpp does. */
#ifndef PMPD_TOKENIZER_BPE_H
#define PMPD_TOKENIZER_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/tokenizer/tokenizer.h"

/* Validates a version 2 section (size bytes at file_offset) and fills tok,
 * which then points into data.  Every id, rank, piece and order the
 * encoder relies on is checked here, in O(n_tokens + n_merges). */
PMPD_INTERNAL pmpd_status pmpd_tokenizer_parse_bpe(pmpd_tokenizer *tok, const unsigned char *data, uint64_t size,
                                                   uint64_t file_offset, uint32_t vocab_size, uint32_t bos_id,
                                                   uint32_t eos_id, pmpd_error *err);

/* Index of the merge of (left, right) in the merge table, or -1. */
PMPD_INTERNAL int32_t pmpd_tokenizer_bpe_pair(const pmpd_tokenizer *tok, int32_t left, int32_t right);

/* Field of merge entry index: 0 left, 1 right, 2 merged id, 3 rank. */
PMPD_INTERNAL uint32_t pmpd_tokenizer_bpe_merge_field(const pmpd_tokenizer *tok, uint32_t index, unsigned field);

/* GGUF token type of id (< n_tokens). */
PMPD_INTERNAL uint32_t pmpd_tokenizer_type(const pmpd_tokenizer *tok, uint32_t id);

/* Encodes text[0 .. length) into ids (capacity length + 3), using work
 * (PMPD_TOK_MERGE_BYTES_PER_SYMBOL * (length + 3) bytes, 4-byte aligned);
 * returns the count. */
PMPD_INTERNAL size_t pmpd_tokenizer_encode_bpe(const pmpd_tokenizer *tok, const unsigned char *text, size_t length,
                                               unsigned flags, int32_t *ids, void *work);

#endif
