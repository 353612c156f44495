/* An in-memory model on its way into a .pmpd container (offline, heap).
 * Importers fill a pmpd_build_model; the writer serializes it. */
#ifndef PMPD_OFFLINE_FORMAT_BUILDER_H
#define PMPD_OFFLINE_FORMAT_BUILDER_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/format/container.h"
#include "pmpd_impl/model/model.h"

#if PMPD_OFFLINE

typedef struct pmpd_build_tensor {
    char name[PMPD_TENSOR_NAME_MAX + 1];
    uint32_t type;
    uint32_t n_dims;
    uint64_t dims[PMPD_TENSOR_MAX_DIMS]; /* outermost first */
    unsigned char *data;                 /* little-endian element bytes, owned */
    uint64_t size;
} pmpd_build_tensor;

typedef struct pmpd_build_section {
    uint32_t kind;
    uint32_t version;
    uint32_t flags;
    unsigned char *data; /* owned */
    uint64_t size;
} pmpd_build_section;

typedef struct pmpd_build_model {
    pmpd_model_info info;
    pmpd_build_tensor *tensors;
    uint32_t n_tensors, tensor_capacity;
    pmpd_build_section *sections;
    uint32_t n_sections, section_capacity;
} pmpd_build_model;

/* A tokenizer vocabulary: piece i is blob[offsets[i] .. offsets[i+1]). */
typedef struct pmpd_vocab {
    uint32_t n_tokens;
    uint32_t max_token_length;
    uint32_t flags;           /* PMPD_TOK_FLAG_* */
    float *scores;            /* n_tokens */
    uint32_t *offsets;        /* n_tokens + 1 */
    unsigned char *blob;
} pmpd_vocab;

PMPD_INTERNAL void pmpd_build_init(pmpd_build_model *b);
PMPD_INTERNAL void pmpd_build_free(pmpd_build_model *b);

/* Adds a tensor whose size bytes of little-endian elements are copied from
 * data.  PMPD_ERR_INVALID_ARGUMENT for a bad name, type or shape. */
PMPD_INTERNAL pmpd_status pmpd_build_add_tensor(pmpd_build_model *b, const char *name, uint32_t type, uint32_t n_dims,
                                  const uint64_t *dims, const void *data, uint64_t size);

/* Adds an f32 tensor from host floats. */
PMPD_INTERNAL pmpd_status pmpd_build_add_f32(pmpd_build_model *b, const char *name, uint32_t n_dims, const uint64_t *dims,
                               const float *values);

/* Adds a section; data is copied. */
PMPD_INTERNAL pmpd_status pmpd_build_add_section(pmpd_build_model *b, uint32_t kind, uint32_t version, uint32_t flags,
                                   const void *data, uint64_t size);

PMPD_INTERNAL pmpd_build_tensor *pmpd_build_find(const pmpd_build_model *b, const char *name);

/* Gives t new contents of another type: frees its old data and takes
 * ownership of data (size bytes, from malloc). */
PMPD_INTERNAL void pmpd_build_replace_data(pmpd_build_tensor *t, uint32_t type, unsigned char *data, uint64_t size);

/* Stores every 2-D float tensor (f32 or f16) as type, PMPD_TENSOR_F32 or
 * _F16 (vectors such as norms stay f32; other types are left alone).
 * Errors: PMPD_ERR_UNSUPPORTED (another type), PMPD_ERR_OUT_OF_MEMORY. */
PMPD_INTERNAL pmpd_status pmpd_build_convert_matrices(pmpd_build_model *b, uint32_t type);

/* Adds the vocabulary as a tokenizer section (with its sorted index). */
PMPD_INTERNAL pmpd_status pmpd_build_add_vocab(pmpd_build_model *b, const pmpd_vocab *v);
PMPD_INTERNAL void pmpd_vocab_free(pmpd_vocab *v);

/* A byte-level BPE vocabulary (GGUF "gpt2"): pieces of normal tokens as raw
 * bytes (the byte-level alphabet undone), special tokens as their text. */
typedef struct pmpd_bpe_vocab {
    uint32_t n_tokens;
    uint32_t max_token_length;
    uint32_t flags;           /* PMPD_TOK_FLAG_ADD_BOS / _ADD_EOS */
    uint32_t pre;             /* PMPD_PRETOK_* */
    uint32_t eot_id;          /* PMPD_TOK2_NO_TOKEN when none */
    uint32_t *offsets;        /* n_tokens + 1 */
    unsigned char *blob;
    unsigned char *types;     /* n_tokens GGUF token types */
    uint32_t n_merges;
    uint32_t *merges;         /* [n_merges][2] left and right ids, in rank order */
} pmpd_bpe_vocab;

/* Adds v as a version 2 tokenizer section: finds each merge's merged token
 * (the normal token whose piece is the concatenation), sorts the merges
 * and pieces, lists the special tokens.  A pair merged twice keeps its
 * first (lowest) rank, as llama.cpp does.  Errors: PMPD_ERR_FORMAT_VALUE (a
 * merge whose concatenation is no token: err names it),
 * PMPD_ERR_OUT_OF_MEMORY, PMPD_ERR_INVALID_ARGUMENT (sizes). */
PMPD_INTERNAL pmpd_status pmpd_build_add_bpe_vocab(pmpd_build_model *b, const pmpd_bpe_vocab *v, pmpd_error *err);
PMPD_INTERNAL void pmpd_bpe_vocab_free(pmpd_bpe_vocab *v);

/* Serializes to a new malloc'ed buffer whose first byte is 64-byte aligned:
 * *block is what to free(), *data the container, *size its length. */
PMPD_INTERNAL pmpd_status pmpd_build_serialize(const pmpd_build_model *b, void **block, unsigned char **data, size_t *size);

/* A vocabulary piece as the tokenizer sections sort them: by bytes
 * (unsigned, a shorter prefix first), ties by id; pmpd_build_piece_compare
 * is that order for qsort and binary searches. */
typedef struct pmpd_build_piece {
    const unsigned char *bytes;
    uint32_t length;
    uint32_t id;
} pmpd_build_piece;
PMPD_INTERNAL int pmpd_build_piece_compare(const void *a, const void *b);

#endif /* PMPD_OFFLINE */
#endif
