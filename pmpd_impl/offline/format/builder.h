/* An in-memory model on its way into a .pmpd container (offline, heap).
 * Importers fill a pmpd_build_model; the writer serializes it. */
#ifndef PMPD_OFFLINE_FORMAT_BUILDER_H
#define PMPD_OFFLINE_FORMAT_BUILDER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/format/container.h"
#include "pmpd_impl/model/model.h"
#include "pmpd_impl/offline/import/ggml_types.h"

#if PMPD_OFFLINE

typedef struct pmpd_build_tensor {
    char name[PMPD_TENSOR_NAME_MAX + 1];
    uint32_t type;
    uint32_t n_dims;
    uint64_t dims[PMPD_TENSOR_MAX_DIMS]; /* outermost first */
    unsigned char *data;                 /* little-endian element bytes, owned; NULL while unloaded */
    uint64_t size;
    /* What a GGUF tensor was stored as (NULL for other inputs): the
     * keep-closest choice looks at it.  An unloaded tensor (data NULL,
     * type f32) is that type's blocks at source_offset of the model's
     * source file, decoded only when the writer reaches it, so a streaming
     * conversion holds one tensor's floats at a time. */
    const pmpd_ggml_type_info *source_type;
    uint64_t source_offset;
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
    FILE *source;        /* the input unloaded tensors are read from; owned (closed by pmpd_build_free) */
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

/* Adds an unloaded f32 tensor: the elements of dims, stored as source_type
 * blocks at source_offset of b->source (which the caller has set). */
PMPD_INTERNAL pmpd_status pmpd_build_add_unloaded(pmpd_build_model *b, const char *name, uint32_t n_dims,
                                                  const uint64_t *dims, const pmpd_ggml_type_info *source_type,
                                                  uint64_t source_offset);

/* The values of f32 tensor t (loaded or not) as host floats, rows
 * [first_row, first_row + n_rows) of its innermost dimension, into out.
 * Errors: PMPD_ERR_IO (err names the offset in the input),
 * PMPD_ERR_OUT_OF_MEMORY, PMPD_ERR_OVERFLOW (an offset this platform's
 * fseek cannot reach), PMPD_ERR_INVALID_ARGUMENT (t is not f32). */
PMPD_INTERNAL pmpd_status pmpd_build_tensor_floats(const pmpd_build_model *b, const pmpd_build_tensor *t,
                                                   uint64_t first_row, uint64_t n_rows, float *out, pmpd_error *err);

/* *same = 1 when f32 tensors x and y have the same shape and bit-identical
 * values (compared a row at a time, loaded or not), else 0.  Errors: those
 * of pmpd_build_tensor_floats. */
PMPD_INTERNAL pmpd_status pmpd_build_same_values(const pmpd_build_model *b, const pmpd_build_tensor *x,
                                                 const pmpd_build_tensor *y, int *same, pmpd_error *err);

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

/* The container's header (file_size bytes in all) at p. */
PMPD_INTERNAL void pmpd_build_put_header(const pmpd_build_model *b, unsigned char *p, uint64_t file_size);

/* Tensor i's directory entry in the container at p, for data of type and
 * size at offset with checksum crc. */
PMPD_INTERNAL void pmpd_build_put_tensor_entry(unsigned char *p, uint32_t i, const pmpd_build_tensor *t, uint32_t type,
                                               uint64_t offset, uint64_t size, uint32_t crc);

/* Section i's directory entry (after the n_tensors tensor entries). */
PMPD_INTERNAL void pmpd_build_put_section_entry(unsigned char *p, uint32_t n_tensors, uint32_t i,
                                                const pmpd_build_section *s, uint64_t offset);

/* The header checksum over the header and the directory (directory_end
 * bytes from p), once every entry is in place. */
PMPD_INTERNAL void pmpd_build_seal_header(unsigned char *p, uint64_t directory_end);

/* Where the data of a container with b's tensors and sections starts, and
 * offsets rounded up to the container's alignment. */
PMPD_INTERNAL uint64_t pmpd_build_directory_end(const pmpd_build_model *b);
PMPD_INTERNAL uint64_t pmpd_build_align(uint64_t v);

struct pmpd_ldlq; /* offline/ldlq/ldlq.h */

/* How pmpd_build_write_stream stores the f32 tensors (other types are
 * written as they are). */
typedef struct pmpd_build_stream {
    /* The type f32 tensor t is stored as. */
    uint32_t (*type_of)(void *context, const pmpd_build_tensor *t);
    /* Rows that type lays out together: a chunk of rows is encoded on its
     * own when it is a multiple of this; 0 when the whole matrix must be. */
    uint64_t (*row_block)(uint32_t type);
    /* The stored bytes of an n_dims tensor of type (its rows when encoded
     * in chunks), and the encoding of rows x cols values (host floats) as
     * type into out, size bytes; both under options (nested widths,
     * threads), which may be NULL for the defaults. */
    pmpd_status (*tensor_bytes)(const pmpd_convert_options *options, uint32_t type, uint32_t n_dims,
                                const uint64_t *dims, uint64_t *bytes);
    pmpd_status (*encode)(const pmpd_convert_options *options, uint32_t type, const struct pmpd_ldlq *ldlq,
                          const float *values, uint64_t rows, uint64_t cols, unsigned char *out, size_t size);
    const pmpd_convert_options *options;
    /* The LDLQ factor tensor t is encoded with as type (offline/ldlq), or
     * NULL (data-free); the hook itself may be NULL. */
    const struct pmpd_ldlq *(*ldlq_of)(void *context, const pmpd_build_tensor *t, uint32_t type);
    /* The options of tensor t when they differ per tensor (the bit
     * allocation's NUQ widths); NULL: options for every tensor. */
    const pmpd_convert_options *(*options_of)(void *context, const pmpd_build_tensor *t);
    /* After tensor index is written (may be NULL); done and total are bytes of the container. */
    void (*written)(void *context, uint32_t index, const pmpd_build_tensor *t, uint32_t type, uint64_t done,
                    uint64_t total);
    void *context;
    uint64_t chunk_bytes; /* floats encoded at once, at most (0: 32 MiB); whole tensors for row_block 0 */
} pmpd_build_stream;

/* Writes b as a container to f (positioned at its start, seekable), a
 * chunk of rows at a time: the rows' floats are read
 * (pmpd_build_tensor_floats), encoded, checksummed and written before the
 * next are read, so memory holds how->chunk_bytes of floats (a whole
 * tensor for formats without row blocks).  Offsets follow from the types and shapes, so the data
 * go first and the header and directory last, over the zeros reserved for
 * them; the bytes equal pmpd_build_serialize's of the converted model.
 * *size is the container's length.  Errors: PMPD_ERR_IO (err names the
 * step; *writing is set to 1 when writing f failed, 0 when reading the
 * input did), PMPD_ERR_OUT_OF_MEMORY, PMPD_ERR_OVERFLOW, the encoder's. */
PMPD_INTERNAL pmpd_status pmpd_build_write_stream(const pmpd_build_model *b, FILE *f, const pmpd_build_stream *how,
                                                  uint64_t *size, int *writing, pmpd_error *err);

/* Serializes to a new malloc'ed buffer whose first byte is 64-byte aligned:
 * *block is what to free(), *data the container, *size its length.
 * PMPD_ERR_INVALID_ARGUMENT when a tensor is unloaded. */
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
