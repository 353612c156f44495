/* The runtime tokenizers, read in place from a container's tokenizer
 * section: llama2.c's scores-driven BPE (section version 1) and byte-level
 * BPE with ranked merges (version 2, see bpe.h and container.h).  Layout of
 * version 1 (all little-endian):
 *     u32 n_tokens, u32 max_token_length, u32 flags, u32 blob_size,
 *     f32 scores[n], u32 offsets[n+1], u32 sorted[n], u8 blob[blob_size]
 * Piece i is blob[offsets[i] .. offsets[i+1]); sorted lists the ids in
 * increasing (piece bytes, id) order, so lookups are binary searches with
 * no index built at open. */
#ifndef PMPD_TOKENIZER_TOKENIZER_H
#define PMPD_TOKENIZER_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"

typedef struct pmpd_tokenizer {
    uint32_t n_tokens;          /* 0 when the container has no tokenizer */
    uint32_t max_token_length;
    uint32_t flags;             /* PMPD_TOK_FLAG_* */
    uint32_t bos_id;
    uint32_t eos_id;
    int32_t space_id;           /* id of " ", or -1 */
    const unsigned char *scores;
    const unsigned char *offsets;
    const unsigned char *sorted;
    const unsigned char *blob;
    int32_t byte_ids[256];      /* id of the piece "<0xNN>" (version 2: of the raw byte), or -1 */
    /* Version 2 (byte-level BPE) only; model is 1 for version 1. */
    uint32_t model;             /* 1 SentencePiece-style, PMPD_TOK2_MODEL_BPE */
    uint32_t pre;               /* PMPD_PRETOK_* */
    uint32_t n_merges;
    uint32_t n_special;
    uint32_t eot_id;            /* PMPD_TOK2_NO_TOKEN when none */
    const unsigned char *special;
    const unsigned char *merges;
    const unsigned char *types;
} pmpd_tokenizer;

/* Validates a tokenizer section of size bytes (found at file_offset in the
 * container, for error offsets) against the model's vocabulary size and
 * fills tok, which then points into data. */
PMPD_INTERNAL pmpd_status pmpd_tokenizer_parse(pmpd_tokenizer *tok, const unsigned char *data, uint64_t size,
                                               uint64_t file_offset, uint32_t vocab_size, uint32_t bos_id,
                                               uint32_t eos_id, pmpd_error *err);

/* Id of the piece whose bytes are a followed by b (either may be empty), or
 * -1 when the vocabulary has no such piece. */
PMPD_INTERNAL int32_t pmpd_tokenizer_lookup(const pmpd_tokenizer *tok, const unsigned char *a, size_t a_length,
                                            const unsigned char *b, size_t b_length);

/* Bytes of piece id (id < n_tokens). */
PMPD_INTERNAL const unsigned char *pmpd_tokenizer_piece(const pmpd_tokenizer *tok, uint32_t id, size_t *length);

/* Checks tok->sorted: every entry an id below n_tokens, the pieces in
 * increasing byte order (a shorter prefix first, ties by increasing id),
 * as both tokenizer section versions store it.  sorted_offset is the
 * index's file offset, for the error.  Errors: PMPD_ERR_FORMAT_VALUE. */
PMPD_INTERNAL pmpd_status pmpd_tokenizer_check_sorted(const pmpd_tokenizer *tok, uint64_t sorted_offset,
                                                      pmpd_error *err);

/* Encodes text[0 .. length) (flags: PMPD_TOKENIZE_*, with BOS/EOS already
 * resolved to PMPD_TOKENIZE_BOS/EOS).  Scratch: 24 * (length + 3) bytes. */
PMPD_INTERNAL pmpd_status pmpd_tokenizer_encode(const pmpd_tokenizer *tok, const char *text, size_t length,
                                                unsigned flags, int32_t *tokens, size_t max_tokens,
                                                size_t *n_tokens, pmpd_arena *scratch);

PMPD_INTERNAL pmpd_status pmpd_tokenizer_decode(const pmpd_tokenizer *tok, int32_t prev_token, int32_t token,
                                                const char **piece, size_t *length);

#endif
