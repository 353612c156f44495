/*
 * pmpd.h -- the public API of pmpd, a small-footprint runtime for
 * Llama-family language models on embedded Linux boards.
 *
 * USING THIS HEADER
 *   Link build/libpmpd.a and include this file, or drop the amalgamated
 *   build/pmpd.h (made by `make amalgamation`) into your project and, in
 *   exactly one C file, write
 *
 *       #define PMPD_IMPLEMENTATION
 *       #include "pmpd.h"
 *
 *   Everything else includes it without the define.
 *
 * CONVENTIONS
 *   - Every fallible function returns a pmpd_status: PMPD_OK (0) or a
 *     negative code; pmpd_strerror() names it.  Nothing aborts or exits.
 *   - The caller owns every buffer.  The runtime never calls malloc: the
 *     memory a session needs comes from a caller-provided arena, whose exact
 *     size the planning calls report before anything runs.
 *   - Parsers of untrusted input also fill a pmpd_error record with the byte
 *     offset of the first problem and a readable message.
 *   - Functions declared under "Offline tools" use the heap; they exist only
 *     when the library is compiled with PMPD_OFFLINE=1 (libpmpd_offline.a).
 *
 * Compile-time options (PMPD_*) are listed with their defaults in
 * pmpd_impl/core/config.h.
 */
#ifndef PMPD_H
#define PMPD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PMPD_VERSION_MAJOR 0
#define PMPD_VERSION_MINOR 1
#define PMPD_VERSION_PATCH 0
#define PMPD_VERSION_STRING "0.1.0"

/* ======================================================================
 * Status codes
 * ====================================================================== */

/* 0 is success; every failure is a distinct negative value. */
typedef enum pmpd_status {
    PMPD_OK = 0,

    /* Caller mistakes and resource limits. */
    PMPD_ERR_INVALID_ARGUMENT = -1,  /* NULL pointer, bad option value */
    PMPD_ERR_OUT_OF_MEMORY = -2,     /* the arena has too few bytes left */
    PMPD_ERR_OVERFLOW = -3,          /* a size computation overflowed size_t */
    PMPD_ERR_IO = -4,                /* the OS refused a read or map */
    PMPD_ERR_NOT_FOUND = -5,         /* no such file */
    PMPD_ERR_UNSUPPORTED = -6,       /* not compiled in / not on this platform */
    PMPD_ERR_THREAD = -7,            /* a worker thread could not be started */
    PMPD_ERR_BUDGET = -8,            /* a size budget below what the cheapest choice needs
                                        (pmpd_convert_options.budget_bits) */

    /* Malformed input (model files, tokenizers, importers). */
    PMPD_ERR_FORMAT_MAGIC = -20,     /* not the expected file type */
    PMPD_ERR_FORMAT_VERSION = -21,   /* a version this build cannot read */
    PMPD_ERR_FORMAT_TRUNCATED = -22, /* the input ends inside a structure */
    PMPD_ERR_FORMAT_CHECKSUM = -23,  /* stored and computed CRC differ */
    PMPD_ERR_FORMAT_BOUNDS = -24,    /* an offset or size points outside the input */
    PMPD_ERR_FORMAT_ALIGNMENT = -25, /* data not aligned as the format requires */
    PMPD_ERR_FORMAT_OVERLAP = -26,   /* two regions of the file overlap */
    PMPD_ERR_FORMAT_VALUE = -27,     /* a count, enum or field has an invalid value */
    PMPD_ERR_FORMAT_SHAPE = -28,     /* a tensor shape is zero, overflows or disagrees */
    PMPD_ERR_FORMAT_DUPLICATE = -29, /* a name or section appears twice */
    PMPD_ERR_FORMAT_MISSING = -30,   /* a required tensor or section is absent */
    PMPD_ERR_FORMAT_HPARAMS = -31,   /* hyperparameters are inconsistent */
    PMPD_ERR_FORMAT_NONFINITE = -32, /* NaN or Inf where finite values are required */
    PMPD_ERR_FORMAT_REQUIRED_SECTION = -33, /* unknown section marked required */

    /* Misuse of a session at run time. */
    PMPD_ERR_CONTEXT_FULL = -40,     /* no room left in the context window */
    PMPD_ERR_TOKEN_RANGE = -41,      /* token id outside the vocabulary */
    PMPD_ERR_STATE = -42             /* call not valid in the session's current state */
} pmpd_status;

/* A short, static, English description of a status ("ok", "arena exhausted",
 * ...).  Unknown values give "unknown status".  Never returns NULL. */
const char *pmpd_strerror(pmpd_status status);

/* ======================================================================
 * Error record
 * ====================================================================== */

#define PMPD_ERROR_MESSAGE_SIZE 192
#define PMPD_NO_OFFSET UINT64_MAX

/* Filled by functions that parse untrusted input.  The caller owns it;
 * functions that take one accept NULL when the caller needs only the status.
 * On failure: code is the returned status, offset the byte offset in the
 * input where the problem was found (PMPD_NO_OFFSET if none applies), and
 * message a NUL-terminated sentence naming the field.  On success code is
 * PMPD_OK and message is empty. */
typedef struct pmpd_error {
    pmpd_status code;
    uint64_t offset;
    char message[PMPD_ERROR_MESSAGE_SIZE];
} pmpd_error;

/* Sets *err to the success state.  err may be NULL. */
void pmpd_error_clear(pmpd_error *err);

/* ======================================================================
 * Arena
 * ====================================================================== */

/* Every allocation the runtime makes is aligned at least to this, and the
 * planning calls assume the arena buffer itself is aligned to it. */
#define PMPD_ARENA_ALIGNMENT 64

/* A bump allocator over a caller-provided buffer.  It never frees
 * individual blocks: save a mark, allocate scratch, restore the mark.
 * The fields are public so the struct can live on the stack or in static
 * storage, but treat them as read-only. */
typedef struct pmpd_arena {
    unsigned char *base; /* first usable byte (buffer aligned up), or NULL when measuring */
    size_t capacity;     /* usable bytes from base */
    size_t used;         /* bytes handed out, including alignment padding */
    size_t high_water;   /* largest value 'used' has reached */
} pmpd_arena;

typedef struct pmpd_arena_mark {
    size_t used;
} pmpd_arena_mark;

/* Prepares an arena over buffer[0..size).  The arena aligns the start up to
 * PMPD_ARENA_ALIGNMENT, so an unaligned buffer loses up to 63 bytes.
 * buffer == NULL with any size gives a measuring arena: allocations succeed
 * with NULL results and only the byte counts are kept (used by planning).
 * Errors: PMPD_ERR_INVALID_ARGUMENT if arena is NULL. */
pmpd_status pmpd_arena_init(pmpd_arena *arena, void *buffer, size_t size);

/* Allocates size bytes aligned to align (a power of two; values below
 * PMPD_ARENA_ALIGNMENT are raised to it) and stores the block in *out.
 * The block is not cleared.  A zero-size request succeeds.
 * Errors: PMPD_ERR_INVALID_ARGUMENT (NULL arguments, align not a power of
 * two), PMPD_ERR_OVERFLOW (size + padding overflows size_t),
 * PMPD_ERR_OUT_OF_MEMORY (not enough room).  On error *out is NULL and the
 * arena is unchanged. */
pmpd_status pmpd_arena_alloc(pmpd_arena *arena, size_t size, size_t align, void **out);

/* As pmpd_arena_alloc for count elements of elem_size bytes, checking the
 * multiplication for overflow. */
pmpd_status pmpd_arena_alloc_array(pmpd_arena *arena, size_t count, size_t elem_size,
                                   size_t align, void **out);

/* Remembers the current fill level. */
pmpd_arena_mark pmpd_arena_save(const pmpd_arena *arena);

/* Frees everything allocated since the mark was saved.  A mark from a
 * different arena, or one above the current level, is ignored. */
void pmpd_arena_restore(pmpd_arena *arena, pmpd_arena_mark mark);

/* Bytes still available for an allocation with PMPD_ARENA_ALIGNMENT. */
size_t pmpd_arena_remaining(const pmpd_arena *arena);

/* ======================================================================
 * Models
 * ====================================================================== */

/* Element types of tensors in a .pmpd container.  The numeric values are
 * part of the file format and never change. */
typedef enum pmpd_tensor_type {
    PMPD_TENSOR_F32 = 0,
    PMPD_TENSOR_F16 = 1,
    PMPD_TENSOR_Q8 = 2,      /* int8 groups of 32 + scale */
    PMPD_TENSOR_Q4 = 3,      /* 4-bit groups of 32, rows interleaved for SIMD */
    PMPD_TENSOR_Q2CB = 4,    /* 2-bit groups with shared int8 codebooks */
    PMPD_TENSOR_ANYPREC = 5, /* nested any-precision bit-planes */
    PMPD_TENSOR_W8A8 = 6,    /* int8 rows + one static activation scale per tensor */
    PMPD_TENSOR_NUQ = 7,     /* 2-4-bit Lloyd-Max indices of Hadamard-rotated rows + row scales */
    PMPD_TENSOR_VQ2 = 8,     /* 2-D codebook indices of column pairs of NUQ's rotated rows + row
                                scales, 2-4 bits per weight in half-bit steps ("vq") */
    PMPD_TENSOR_TCQ = 9      /* 1.5-4-bit trellis-coded (bitshift, tail-biting) Hadamard-rotated rows + row scales */
} pmpd_tensor_type;

/* The short name tools use for a tensor type ("f32", "q4", "anyprec"), or
 * NULL for a type this build does not know.  The string is static.
 * Thread-safe; never fails otherwise. */
const char *pmpd_tensor_type_name(pmpd_tensor_type type);

/* The type whose short name is name (as pmpd_tensor_type_name spells it).
 * Errors: PMPD_ERR_INVALID_ARGUMENT (NULL arguments or no such type; *type
 * is left alone).  Thread-safe. */
pmpd_status pmpd_tensor_type_from_name(const char *name, pmpd_tensor_type *type);

/* Hyperparameters of a loaded model (llama2.c naming). */
typedef struct pmpd_model_info {
    uint32_t dim;            /* embedding width */
    uint32_t hidden_dim;     /* feed-forward width */
    uint32_t n_layers;
    uint32_t n_heads;
    uint32_t n_kv_heads;     /* grouped-query attention: n_heads % n_kv_heads == 0 */
    uint32_t head_dim;       /* width of a query/key/value head, even; often
                                dim / n_heads, but any value (queries are
                                n_heads * head_dim wide) */
    uint32_t vocab_size;
    uint32_t seq_len;        /* longest context the model was trained for */
    float rope_theta;        /* 10000 for llama2.c models */
    float norm_eps;          /* RMSNorm epsilon, 1e-5 for llama2.c models */
    uint32_t shared_classifier; /* 1: the classifier is the token embedding */
    uint32_t bos_id;
    uint32_t eos_id;
    uint32_t rope_style;     /* pmpd_rope_style: which elements of a head rotate together */
    uint32_t features;       /* PMPD_MODEL_* bits: optional tensors the forward pass uses */
} pmpd_model_info;

/* How rotary position embedding pairs the elements of a head.  The values
 * are part of the file format. */
typedef enum pmpd_rope_style {
    PMPD_ROPE_ADJACENT = 0, /* (2i, 2i+1): Meta's layout, llama2.c, GGUF "llama" */
    PMPD_ROPE_NEOX = 1      /* (i, i + head_dim/2): GPT-NeoX's halves, GGUF "qwen2" */
} pmpd_rope_style;

/* pmpd_model_info.features: each bit names tensors the container must then
 * hold and the forward pass then uses (part of the file format). */
#define PMPD_MODEL_QKV_BIAS 1u   /* blk.N.attn_q.bias [n_heads*head_dim], attn_k.bias and
                                    attn_v.bias [n_kv_heads*head_dim]: f32, added to the
                                    projections before the rotation (Qwen2) */
#define PMPD_MODEL_ROPE_FREQS 2u /* rope_freqs.weight [head_dim/2]: f32 > 0; pair i's rotary
                                    frequency is divided by element i (Llama 3.1+ scaling) */

/* A model opened from a .pmpd container.  Its storage is in the arena given
 * to the open call; tensor data is used in place (zero-copy). */
typedef struct pmpd_model pmpd_model;


/* ======================================================================
 * Model containers and tokenizer
 * ====================================================================== */

/* Kinds of the typed sections a .pmpd container may carry (docs/models.md, "File
 * format").  The numeric values are part of the file format.  A reader skips
 * a section of a kind it does not know unless the section is flagged
 * required, in which case the open fails with PMPD_ERR_FORMAT_REQUIRED_SECTION. */
typedef enum pmpd_section_kind {
    PMPD_SECTION_TOKENIZER = 1,           /* BPE vocabulary, scores, sorted index */
    PMPD_SECTION_PRECISION_SCHEDULE = 2,  /* static PMPD precision schedule */
    PMPD_SECTION_LEARNED_SCHEDULER = 3,   /* learned precision-switch classifier */
    PMPD_SECTION_KV_CODEBOOKS = 4,        /* product-quantized KV-cache codebooks */
    PMPD_SECTION_OUTLIER_CALIBRATION = 5, /* activation scales and outlier channels */
    PMPD_SECTION_QUANTIZER = 6,           /* per-layer quantizer metadata */
    PMPD_SECTION_CHAT_TEMPLATE = 7        /* GGUF tokenizer.chat_template text (optional) */
} pmpd_section_kind;

/* Section flag bit: a reader that does not know the kind must refuse the file. */
#define PMPD_SECTION_FLAG_REQUIRED 1u

/* Opens a container that lies in memory (for example a const array linked
 * into flash).  Nothing is copied: tensors and sections point into data,
 * which must stay valid and unchanged until pmpd_model_close, and must be
 * aligned to PMPD_ARENA_ALIGNMENT (64) bytes.  size is the exact container
 * size.  Every field, offset, checksum and cross-field rule is validated
 * before use; afterwards the runtime trusts the model.  The model's
 * bookkeeping (tensor table, layer pointers, tokenizer index) comes from
 * arena; on failure the arena is restored to its level at the call.
 * Errors: PMPD_ERR_INVALID_ARGUMENT (NULL arguments, data not aligned),
 * PMPD_ERR_UNSUPPORTED (big-endian host), PMPD_ERR_OUT_OF_MEMORY, and the
 * PMPD_ERR_FORMAT_* codes, with err naming the field and byte offset. */
pmpd_status pmpd_model_open_memory(const void *data, size_t size, pmpd_arena *arena,
                                   pmpd_model **out, pmpd_error *err);

/* Opens a container file: mapped read-only through the platform layer where
 * possible, otherwise (mmap failed, or the POSIX port was built with
 * PMPD_USE_MMAP=0) read into the arena.  Reading takes the file's size
 * rounded up to a multiple of 64 bytes, before the model's tables, so the
 * arena then needs that many bytes more than pmpd_model_open_memory would
 * take for the same container (counted from a 64-byte-aligned fill level).
 * Same validation and errors as pmpd_model_open_memory, plus
 * PMPD_ERR_NOT_FOUND and PMPD_ERR_IO; on any failure the arena is restored
 * to its level at the call. */
pmpd_status pmpd_model_open_file(const char *path, pmpd_arena *arena, pmpd_model **out,
                                 pmpd_error *err);

/* Releases the file mapping, if any.  Arena memory stays the caller's (restore
 * a mark to reuse it).  NULL is accepted. */
void pmpd_model_close(pmpd_model *model);

/* The model's hyperparameters; valid until the model is closed. */
const pmpd_model_info *pmpd_model_get_info(const pmpd_model *model);

/* Bytes of weight data one decode step reads: every layer matrix, norm and
 * bias, rope frequency factors, the classifier, the final norm and one
 * embedding row (its share of the
 * embedding table).  Nested any-precision weights count at width bits
 * (0 = their widest; clamped to the widths the tensors hold): only the
 * planes and the table that width reads.  Divide a decode rate's bytes per
 * second by a measured memory bandwidth to see how close to memory speed a
 * kernel runs.  Thread-safe (reads the model only).
 * Errors: PMPD_ERR_INVALID_ARGUMENT (NULL model or bytes). */
pmpd_status pmpd_model_weight_bytes_per_token(const pmpd_model *model, unsigned bits, uint64_t *bytes);

/* One tensor of an open model, for tools that describe a model
 * (pmpd-run --info): name (not NUL-terminated: name_length bytes), type
 * (pmpd_tensor_type), shape and data bytes.  Pointers stay valid until the
 * model is closed. */
typedef struct pmpd_tensor_desc {
    const char *name;
    size_t name_length;
    uint32_t type;
    uint32_t n_dims;
    uint64_t dims[4];
    uint64_t bytes;
} pmpd_tensor_desc;

/* Tensors in the container (0 for NULL).  Thread-safe. */
uint32_t pmpd_model_tensor_count(const pmpd_model *model);

/* Describes tensor index (container order).  Thread-safe.
 * Errors: PMPD_ERR_INVALID_ARGUMENT (NULL arguments, index >= the count). */
pmpd_status pmpd_model_tensor_at(const pmpd_model *model, uint32_t index, pmpd_tensor_desc *desc);

/* Bytes of the whole container (0 for NULL).  Thread-safe. */
uint64_t pmpd_model_container_bytes(const pmpd_model *model);

/* The model's chat template (GGUF tokenizer.chat_template, a Jinja text,
 * kept by the importer in a PMPD_SECTION_CHAT_TEMPLATE section, validated
 * as UTF-8 without NUL on open): *text points into the container, not
 * NUL-terminated, *length bytes.  The runtime never interprets it; tools
 * recognise the chat format from it (examples/common/chat.c).
 * Errors: PMPD_ERR_INVALID_ARGUMENT (NULL arguments), PMPD_ERR_FORMAT_MISSING
 * (the container has none: older files, GGUFs without one). */
pmpd_status pmpd_model_chat_template(const pmpd_model *model, const char **text, size_t *length);

/* Encodes NUL-terminated UTF-8 text with the model's tokenizer exactly as
 * llama2.c's run.c does: optional BOS, a leading space token when the text is
 * not empty (if the tokenizer asks for it), one token per UTF-8 character or
 * its <0xNN> byte tokens, then the highest-scoring merges, then optional EOS.
 * The merges take O(n log n) time in the text's length n (run.c's loop is
 * O(n^2)) with the same result.  The ids go to tokens[0 .. *n_tokens).
 * scratch provides the working buffer, 24 * (strlen(text) + 3) bytes from a
 * 64-byte-aligned fill level, and is restored before returning; nothing is
 * allocated from the heap.
 * Errors: PMPD_ERR_INVALID_ARGUMENT (NULL arguments or a measuring scratch
 * arena, or max_tokens too small: *n_tokens then holds the count needed),
 * PMPD_ERR_FORMAT_MISSING (the container has no tokenizer),
 * PMPD_ERR_OUT_OF_MEMORY (scratch too small), PMPD_ERR_OVERFLOW (text of
 * 2^31 - 3 bytes or more). */
pmpd_status pmpd_tokenize(const pmpd_model *model, const char *text, int add_bos, int add_eos,
                          int32_t *tokens, size_t max_tokens, size_t *n_tokens,
                          pmpd_arena *scratch);

/* Flags of pmpd_tokenize_text. */
#define PMPD_TOKENIZE_BOS 1u       /* put BOS first */
#define PMPD_TOKENIZE_EOS 2u       /* put EOS last */
#define PMPD_TOKENIZE_MODEL_BOS 4u /* BOS and EOS as the model's metadata says (GGUF
                                      tokenizer.ggml.add_bos_token / add_eos_token;
                                      llama2.c vocabularies: BOS), on top of the two above */
#define PMPD_TOKENIZE_SPECIAL 8u   /* byte-level BPE: control tokens written in the text
                                      (<|begin_of_text|>, <|eot_id|>, <|im_start|>, ...)
                                      become their single ids.  Off for untrusted text:
                                      then they are tokenized as plain text.  (User-defined
                                      tokens are always matched, as in llama.cpp.) */

/* Encodes text[0 .. length) (UTF-8 expected, any bytes accepted, NUL
 * included) with the model's tokenizer; flags are PMPD_TOKENIZE_*.
 * llama2.c (SentencePiece-style) vocabularies encode as pmpd_tokenize does;
 * PMPD_TOKENIZE_SPECIAL is refused for them (PMPD_ERR_UNSUPPORTED).
 * Byte-level BPE vocabularies (GGUF "gpt2": Llama 3, Qwen2, SmolLM, GPT-2)
 * split out special tokens, then cut the text into words with the model's
 * pre-tokenizer, then merge each word's bytes by merge rank; every byte
 * maps to a token, so pmpd_token_to_piece gives back exactly the input
 * bytes, invalid UTF-8 included -- except in vocabularies pruned to the
 * bytes UTF-8 uses (StarCoder's, MPT's lack 0xC0, 0xC1, 0xF5..0xFF), where
 * such bytes are dropped, as llama.cpp drops them.  (llama.cpp replaces
 * invalid UTF-8 by U+FFFD before tokenizing; for valid UTF-8 the ids are
 * llama.cpp's.)
 * The ids go to tokens[0 .. *n_tokens).  scratch provides the working
 * memory, 24 * (length + 3) bytes from a 64-byte-aligned fill level for
 * either kind, and is restored before returning; no heap.  Thread-safe
 * for distinct scratch arenas (reads the model only).
 * Errors: as pmpd_tokenize (PMPD_ERR_OVERFLOW: length 2^31 - 3 or more),
 * and PMPD_ERR_UNSUPPORTED (see above). */
pmpd_status pmpd_tokenize_text(const pmpd_model *model, const char *text, size_t length, unsigned flags,
                               int32_t *tokens, size_t max_tokens, size_t *n_tokens, pmpd_arena *scratch);

/* What a model's tokenizer is, for tools and chat loops. */
typedef struct pmpd_tokenizer_info {
    uint32_t kind;         /* 0 none, 1 SentencePiece-style (llama2.c scores), 2 byte-level BPE */
    const char *pre;       /* byte-level BPE: pre-tokenizer name ("llama-bpe", "qwen2",
                              "smollm", "gpt-2"); otherwise NULL.  Static storage. */
    uint32_t n_tokens;
    uint32_t bos_id, eos_id;
    int32_t eot_id;        /* end of turn (<|eot_id|>, <|im_end|>), or -1 */
    int add_bos, add_eos;  /* what the model's metadata asks of a prompt */
    uint32_t n_merges;     /* byte-level BPE */
    uint32_t n_special;    /* control, user-defined and unknown tokens */
} pmpd_tokenizer_info;

/* Fills info.  Thread-safe.  Errors: PMPD_ERR_INVALID_ARGUMENT (NULL). */
pmpd_status pmpd_model_get_tokenizer_info(const pmpd_model *model, pmpd_tokenizer_info *info);

/* 1 when token is a control token that a text display should not print --
 * byte-level BPE control, unknown and unused tokens (<|eot_id|>,
 * <|im_start|>, ...; llama.cpp's token_to_piece prints nothing for them
 * unless asked), BOS and EOS of llama2.c vocabularies -- else 0 (also for
 * ids outside the vocabulary, a NULL model or no tokenizer).  Thread-safe. */
int pmpd_token_is_control(const pmpd_model *model, int32_t token);

/* The text of token when it follows prev_token, by run.c's rule: after BOS
 * a leading space is dropped, and a <0xNN> piece stands for the single raw
 * byte NN.  Byte-level BPE tokens give their raw bytes (special tokens their
 * text, e.g. "<|eot_id|>"), whatever prev_token is.  *piece points into the model (or a static table) and is not
 * NUL-terminated; *length is its byte count.  Pass prev_token = -1 when
 * there is none.  Errors: PMPD_ERR_INVALID_ARGUMENT, PMPD_ERR_FORMAT_MISSING
 * (no tokenizer), PMPD_ERR_TOKEN_RANGE (token outside the vocabulary). */
pmpd_status pmpd_token_to_piece(const pmpd_model *model, int32_t prev_token, int32_t token,
                                const char **piece, size_t *length);

#if defined(PMPD_OFFLINE) && PMPD_OFFLINE
/* ---- Offline tools: conversion to .pmpd (heap-using, libpmpd_offline.a) ---- */

/* Which input a conversion failure refers to. */
typedef enum pmpd_convert_input {
    PMPD_CONVERT_INPUT_MODEL = 0,
    PMPD_CONVERT_INPUT_TOKENIZER = 1,
    PMPD_CONVERT_INPUT_OUTPUT = 2
} pmpd_convert_input;

/* One tensor of a streaming conversion, as written. */
typedef struct pmpd_convert_tensor_report {
    uint32_t index, n_tensors;    /* index counts from 0 */
    const char *name;
    const char *source_type;      /* the GGUF tensor's ggml type ("Q4_K"), or "F32" for other inputs */
    pmpd_tensor_type type;        /* stored as */
    uint64_t bytes_done, bytes_total; /* of the container, this tensor's data included */
} pmpd_convert_tensor_report;

/* Bit allocation (seed 002, Q-Palette): what pmpd_convert_file chose when
 * pmpd_convert_options.budget_bits is set.  Each layer's matrices form
 * fusable groups -- {q, k, v} (one input), the output projection,
 * {gate, up} (one input), down -- and each group gets one format of the
 * palette.  A group's sensitivity a_g is fitted from the KL the float
 * model loses when Gaussian noise of relative energy e is added to that
 * group alone (KL ~ a_g * e, on data-free text the model writes itself);
 * err_g is the normalized squared error ||W - Q(W)||^2 / ||W||^2 of the
 * real encoder; the formats minimize sum a_g * err_g within the byte
 * budget, by an exact dynamic programme over the multiple-choice
 * knapsack. */
typedef struct pmpd_palette_group_report {
    uint32_t layer;
    const char *group;          /* "qkv", "attn_output", "gate_up" or "down" */
    pmpd_tensor_type type;      /* the format chosen */
    unsigned bits;              /* its width: bits for PMPD_TENSOR_NUQ (2-4), quarter bits for
                                   PMPD_TENSOR_VQ2 (8-16 by 2) and PMPD_TENSOR_TCQ (6-16:
                                   1.5-4 bits), else 0 */
    double sensitivity;         /* a_g: nats of KL per unit of relative error energy */
    double fit_r2;              /* R^2 of KL ~ a_g * e (through the origin) */
    double fit_ratio;           /* (KL/e at the largest e) / (at the smallest): 1 if linear */
    double error;               /* err_g under the chosen format */
    uint64_t bytes;             /* stored bytes of the group's matrices */
    uint64_t latency_ns;        /* under budget_latency_us: one token's products with
                                   them in that format, measured (else 0) */
    uint64_t weights;           /* their elements */
} pmpd_palette_group_report;

typedef struct pmpd_palette_report {
    uint32_t n_groups;
    const pmpd_palette_group_report *groups; /* layer by layer, in the order above */
    uint32_t n_palette;
    const pmpd_tensor_type *palette;         /* the candidate formats */
    const unsigned *palette_bits;            /* [n_palette]: nuq's width in bits, vq's and
                                                tcq's in quarter bits, 0 for the others */
    const double *errors;       /* [n_groups][n_palette] err of every candidate */
    int gaussian_errors;        /* 1: the nuq, vq and tcq entries' errors are estimates
                                   (pmpd_convert_options.palette_gaussian) */
    int ldlq;                   /* 1: the nuq, vq and tcq entries were rounded by LDLQ and
                                   every error weighed by its input's moment
                                   (pmpd_convert_options.ldlq_sequences) */
    const uint64_t *costs;      /* [n_groups][n_palette] bytes of every candidate */
    uint64_t weights;           /* elements of every layer matrix: the budget's base (the token
                                   embedding and classifier are not in it: q8 as with --type q4) */
    uint64_t budget_bytes;      /* floor(budget_bits * weights / 8); 0 under a latency budget */
    uint64_t bytes;             /* what the choice stores (<= budget_bytes) */
    double budget_bits, bits;   /* bits per weight asked (0 under a latency budget) and reached */
    const uint64_t *latencies;  /* under a latency budget, [n_groups][n_palette] nanoseconds of
                                   every candidate (else NULL) */
    double budget_latency_us, latency_us; /* the latency budget and the choice's predicted
                                   layer-matrix time per decoded token, one thread (0 without) */
    double predicted_kl;        /* sum a_g * err_g: predicted next-token KL increase, nats */
    uint64_t cost_unit;         /* bytes per column of the DP table */
    int exact;                  /* 1: cost_unit is the gcd of the costs, the optimum is exact;
                                   0: costs rounded up to units (never over budget) */
} pmpd_palette_report;

/* The most formats a bit allocation chooses among (n_palette below); a
 * longer palette fails with PMPD_ERR_INVALID_ARGUMENT. */
#define PMPD_PALETTE_MAX_FORMATS 16

typedef struct pmpd_convert_options {
    const char *tokenizer_path;   /* llama2.c tokenizer.bin, or NULL */
    pmpd_tensor_type type;        /* PMPD_TENSOR_F32 or _F16 for the matrices, or _Q8, _Q4,
                                     _Q2CB (group-quantized, docs/kernels.md),
                                     or _ANYPREC (nested); with the quantized types the token
                                     embedding and classifier become q8 */
    /* PMPD_TENSOR_ANYPREC only: the tree's seed and parent widths (0: 2 and 4). */
    unsigned anyprec_seed_bits, anyprec_parent_bits;
    /* PMPD_TENSOR_ANYPREC only: the type of the token embedding and
     * classifier.  0 (the default) or PMPD_TENSOR_Q8: q8.  PMPD_TENSOR_Q4:
     * q4, half q8's bytes per decoded token.  PMPD_TENSOR_ANYPREC: nested
     * with the layers' widths where that reads fewer bytes than q8 (not with
     * fewer than about 256 columns, which stay q8), so their bytes fall with
     * the width: 2-bit decode of a 2048 x 32,000 classifier reads 16 MB,
     * q4 37 MB, q8 70.  Both cost quality (pycode21M, KL to f32 at 4 / 3 / 2
     * bits: q8 0.030 / 0.116 / 0.634, q4 0.041 / 0.130 / 0.660, nested
     * 0.042 / 0.153 / 0.785; docs/pmpd.md).  Other values: PMPD_ERR_INVALID_ARGUMENT. */
    pmpd_tensor_type anyprec_vocabulary;
    /* PMPD_TENSOR_W8A8 only: 1 = no shadow path for activation outliers
     * (every input channel at the tensor's absmax scale); for measuring
     * what the shadow path buys. */
    int w8a8_no_shadow;
    /* PMPD_TENSOR_W8A8 only: keep the shadow path in at most this many
     * tensors, those whose output it helps most (ranked by the estimate in
     * docs/w8a8.md); 0 = in every tensor with outlier channels. */
    unsigned w8a8_shadow_tensors;
    /* 1: every matrix in the pmpd type nearest its GGUF tensor's type
     * (docs/models.md has the keep-closest table; other inputs' matrices stay f32);
     * type is then not used. */
    int keep_closest;
    /* PMPD_TENSOR_ANYPREC, PMPD_TENSOR_Q2CB and PMPD_TENSOR_TCQ: threads quantizing
     * rows, the caller's included (0: one per core).  The output is the same for any
     * count. */
    unsigned threads;
    /* Called now and then with work done and total (rows while quantizing,
     * then bytes while writing; when tensor_written is NULL, bytes written
     * after each tensor of a streaming conversion); may be NULL. */
    void (*progress)(void *context, uint64_t done, uint64_t total);
    void *progress_context;
    /* Streaming conversions (f32, f16, q8, q4, q2cb and keep-closest), which
     * encode and write one tensor at a time: called after each tensor with
     * progress_context; may be NULL. */
    void (*tensor_written)(void *context, const pmpd_convert_tensor_report *report);
    /* PMPD_TENSOR_NUQ only (Hadamard-rotated Lloyd-Max weights; the token
     * embedding and classifier become q8): bits per weight, 2, 3 or 4
     * (0: 4). */
    unsigned nuq_bits;
    /* PMPD_TENSOR_VQ2 only (2-D codebook indices of pairs of Hadamard-
     * rotated columns; the token embedding and classifier become q8): the
     * width in quarter bits per weight, 8, 10, 12, 14 or 16 (2 to 4 bits in
     * half-bit steps; the unit VQ shares with trellis widths); 0: 8.
     * Another value fails the conversion with PMPD_ERR_INVALID_ARGUMENT. */
    unsigned vq_quarter_bits;
    /* PMPD_TENSOR_TCQ only (trellis-coded Hadamard-rotated weights; the
     * token embedding and classifier become q8): the width in quarter bits
     * per weight, 6..16 (1.5 to 4 bits in steps of 0.25: odd values are
     * half-TCQ, half of each row's sequences one shift up); 0: 8 (2 bits).
     * Another value fails with PMPD_ERR_INVALID_ARGUMENT.  Encoding is a
     * Viterbi search, orders of magnitude slower than the other formats
     * (threads above). */
    unsigned tcq_quarter_bits;
    /* > 0: bit allocation (pmpd_palette_report above; type and keep_closest
     * are not used).  Every layer matrix takes a format of palette, one per
     * fusable group, so that they store at most budget_bits bits per weight
     * on average; the token embedding and classifier become q8 and are
     * outside the budget; vectors stay f32.  Needs the whole float model in
     * memory (a GGUF input is read whole).  A budget below the cheapest
     * assignment fails with PMPD_ERR_BUDGET, err saying the least. */
    double budget_bits;
    /* > 0 instead of budget_bits: the allocation under a latency budget.
     * The layer matrices' products for one decoded token, on one thread,
     * take at most this many microseconds; each (shape, format)'s time is
     * measured on this machine while converting, with the kernels this
     * library was built with (weights read from memory, as in decode). */
    double budget_latency_us;
    const pmpd_tensor_type *palette; /* candidates among f32, f16, q8, q4, q2cb, nuq, vq, tcq; NULL: q8, q4, q2cb */
    uint32_t n_palette;              /* at most PMPD_PALETTE_MAX_FORMATS */
    /* [n_palette] or NULL: the width of each entry: PMPD_TENSOR_NUQ entries
     * in bits (2-4), PMPD_TENSOR_VQ2 entries in quarter bits (8, 10, 12,
     * 14, 16) and PMPD_TENSOR_TCQ entries in quarter bits (6-16), so one
     * palette can hold nuq2, nuq3, vq2.5, vq3.5, tcq2.25 and tcq3.5; 0 for
     * the other formats (NULL, or 0 for a nuq, vq or tcq entry: nuq_bits or
     * 4, vq_quarter_bits or 8, tcq_quarter_bits or 8).  Another width fails
     * with PMPD_ERR_INVALID_ARGUMENT, err naming the entry. */
    const unsigned *palette_bits;
    /* The sensitivity's data-free text: sequences and tokens each, BOS
     * included (0: 4 and 32; more gives steadier fits on large models at
     * proportional cost). */
    uint32_t palette_sequences, palette_length;
    /* 1: no sensitivity run; a_g = the group's share of the layer weights,
     * so the allocation minimizes the mean relative error per weight (and
     * predicted_kl is that mean, not nats); for measuring what the
     * measured sensitivities buy. */
    int palette_flat;
    /* 1: the rotated formats' errors (nuq, vq, tcq entries) are estimated,
     * not measured: each is the format's normalized error on Gaussian rows
     * of the matrix's width, encoded once per (entry, width) instead of
     * every group being encoded in every entry (seed 002's data-free loss
     * term: a rotated row is close to Gaussian).  The other formats are
     * measured as before.  On pycode21M over eight TCQ widths the
     * conversion takes 3 minutes instead of 25 (the measured errors encode
     * the whole model once per entry, which grows with the model; the
     * estimates do not), and the estimates lie within a few percent of the
     * measured errors (docs/palette.md). */
    int palette_gaussian;
    /* > 0: data-aware rounding for nuq, vq and tcq (LDLQ, seed 002's
     * data-aware setting): the second moment H of every layer's input is
     * measured over ldlq_sequences sequences of ldlq_length tokens (0:
     * 128) that the float model writes itself from BOS at temperature 1
     * (or cut from ldlq_text_path), and each rotated row is rounded block by block (nuq
     * a column, vq a pair, tcq a 256-column sequence) with the earlier
     * blocks' errors fed forward so that the layer's output error
     * tr(E H E^T), not the weights' ||E||^2, is made small.  The files are
     * the same formats, read by the same kernels.  Under budget_bits every
     * candidate's error is then that output error (palette_gaussian is
     * refused).  Needs the whole float model in memory and cols^2 doubles
     * per distinct layer input (docs/palette.md); other types ignore it. */
    uint32_t ldlq_sequences, ldlq_length;
    /* With ldlq_sequences: a text file (UTF-8; its first 16 bytes per
     * token needed, at least 1 MiB, are read) whose tokens make the
     * calibration sequences instead (BOS, then ldlq_length - 1 consecutive
     * tokens each, from the start); too short a text fails with
     * PMPD_ERR_INVALID_ARGUMENT saying how many tokens it gives.  The
     * moment must hold for the text the model will see: on pycode21M 64
     * windows of other Python files did worse than the model's own text,
     * 512 windows better than none (docs/palette.md).  NULL: self-written. */
    const char *ldlq_text_path;
    /* The allocation, before the container is written (progress_context);
     * may be NULL.  progress reports the sensitivity runs (groups x 3
     * noise energies), then the candidates' errors (groups x palette);
     * threads (0: one per core) is the sensitivity sessions' count. */
    void (*allocated)(void *context, const pmpd_palette_report *report);
} pmpd_convert_options;

typedef struct pmpd_convert_summary {
    uint32_t n_tensors;
    uint64_t bytes;               /* size of the written container */
    uint64_t parameters;          /* elements over all tensors */
    pmpd_convert_input failed_input; /* on failure: which file err refers to */
} pmpd_convert_summary;

/* Converts a llama2.c checkpoint (legacy or version 1) or a GGUF v2/v3 file
 * of architecture llama or qwen2 (others: PMPD_ERR_UNSUPPORTED) at in_path
 * into a container at out_path.  The input kind is detected from its first
 * bytes.  The container is written to "<out_path>.tmp" and
 * renamed, so no partial output is left on failure.  f32, f16, q8, q4,
 * q2cb and keep_closest stream: a GGUF's tensors are read, encoded and
 * written a chunk of rows at a time, so memory does not grow with the
 * model (docs/models.md).  options may be NULL
 * (f32, no tokenizer unless the input carries one); summary may be NULL.
 * Errors: PMPD_ERR_NOT_FOUND / PMPD_ERR_IO for files, PMPD_ERR_FORMAT_* for
 * malformed input (err names the field and byte offset, summary->failed_input
 * the file), PMPD_ERR_INVALID_ARGUMENT. */
pmpd_status pmpd_convert_file(const char *in_path, const char *out_path,
                              const pmpd_convert_options *options,
                              pmpd_convert_summary *summary, pmpd_error *err);

/* ---- Offline tools: synthetic Llama models as GGUF (heap-using) ---- */

/* ggml tensor types a synthetic GGUF can hold; the values are ggml's.
 * K-quants and IQ4_XS pack 256-weight super-blocks: dim and hidden must be
 * multiples of 256 for them; the others need multiples of 32 (F32, F16 and
 * BF16: any width). */
typedef enum pmpd_ggml_type {
    PMPD_GGML_F32 = 0,
    PMPD_GGML_F16 = 1,
    PMPD_GGML_Q4_0 = 2,   /* 32 weights: f16 scale + 16 bytes of nibbles */
    PMPD_GGML_Q4_1 = 3,   /* 32 weights: f16 scale and min + nibbles */
    PMPD_GGML_Q5_0 = 6,   /* 32 weights: f16 scale + fifth bits + nibbles */
    PMPD_GGML_Q5_1 = 7,   /* 32 weights: f16 scale and min + fifth bits + nibbles */
    PMPD_GGML_Q8_0 = 8,   /* 32 weights: f16 scale + 32 int8 */
    PMPD_GGML_Q4_K = 12,  /* 256 weights: 8 groups of 32 with 6-bit scales and mins */
    PMPD_GGML_Q5_K = 13,  /* as Q4_K with a fifth bit */
    PMPD_GGML_Q6_K = 14,  /* 256 weights: 16 groups of 16 with int8 scales */
    PMPD_GGML_IQ4_NL = 20, /* 32 weights: f16 scale + nibbles indexing a fixed table */
    PMPD_GGML_IQ4_XS = 23, /* 256 weights: IQ4_NL groups of 32 with 6-bit scales */
    PMPD_GGML_BF16 = 30,  /* the upper half of each f32 */
    /* Not a ggml type but a mix in the spirit of llama.cpp's Q4_K_M:
     * Q6_K for output.weight (for token_embd.weight when tied), and for
     * attn_v and ffn_down of layers i with i < n/8, i >= 7n/8 or
     * (i - n/8) % 3 == 2; Q4_K for every other matrix. */
    PMPD_GGML_MIX_Q4_K_M = 1000
} pmpd_ggml_type;

typedef struct pmpd_synth_options {
    uint32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, seq_len;
    pmpd_ggml_type type;          /* every matrix, embedding and classifier included */
    uint64_t seed;                /* same seed, same shape: same weights */
    int tied;                     /* 1: no output.weight (the classifier is the embedding) */
    const char *tokenizer_path;   /* llama2.c tokenizer.bin (required); its size is the vocabulary */
    /* Called after each tensor with bytes written and the file's total; may be NULL. */
    void (*progress)(void *context, uint64_t done, uint64_t total);
    void *progress_context;
    /* Architecture variants (0 = the default in brackets). */
    const char *arch;             /* "llama" or "qwen2" (random Q/K/V biases) ["llama"] */
    uint32_t head_dim;            /* head width, written as <arch>.attention.key_length and
                                     value_length when it differs from dim / n_heads [dim/n_heads] */
    float rope_theta;             /* <arch>.rope.freq_base [10000] */
    float norm_eps;               /* <arch>.attention.layer_norm_rms_epsilon [1e-5] */
    int rope_freqs;               /* 1: a rope_freqs.weight tensor of Llama 3.1's factors
                                     (factor 8, low 1, high 4, original context 8192) */
    /* Standard deviation of the weights [0.02].  Larger values give logits
     * with wider gaps between the likeliest tokens, which greedy
     * comparisons between runtimes need. */
    float weight_std;
    /* Instead of tokenizer_path: a byte-level BPE vocabulary file (see
     * pmpd-mkgguf --help, --vocab-gpt2), written as tokenizer.ggml.model
     * "gpt2" with its merges; NULL for none. */
    const char *gpt2_vocab_path;
    const char *pre;              /* with gpt2_vocab_path: tokenizer.ggml.pre to write
                                     instead of the file's; NULL keeps it */
    const char *chat_template;    /* tokenizer.chat_template to write; NULL: none */
} pmpd_synth_options;

typedef struct pmpd_synth_summary {
    uint32_t n_tensors;
    uint32_t vocab_size;
    uint64_t parameters;
    uint64_t bytes;               /* size of the written file */
} pmpd_synth_summary;

/* TinyLlama-1.1B's shape (dim 2048, hidden 5632, 22 layers, 32 heads, 4 KV
 * heads, context 2048), Q4_0, seed 1, untied; tokenizer_path NULL (set it). */
void pmpd_synth_options_default(pmpd_synth_options *options);

/* Writes a GGUF v3 file of architecture llama (or options->arch) that
 * llama.cpp loads: weights drawn from normal(0, options->weight_std) by a
 * generator seeded with options->seed, RMSNorm weights 1.0 (always F32),
 * Q/K/V biases for "qwen2" and rope_freqs.weight (F32) when asked, the
 * tokenizer as tokenizer.ggml.*.
 * Streams one row at a time; the file is written to "<out_path>.tmp" and
 * renamed, so no partial output is left on failure.  summary may be NULL.
 * Errors: PMPD_ERR_INVALID_ARGUMENT (an impossible shape or type, err says
 * which), PMPD_ERR_NOT_FOUND / PMPD_ERR_IO (err names the file),
 * PMPD_ERR_FORMAT_* (a malformed tokenizer), PMPD_ERR_OUT_OF_MEMORY. */
pmpd_status pmpd_synth_gguf(const char *out_path, const pmpd_synth_options *options,
                            pmpd_synth_summary *summary, pmpd_error *err);
#endif

/* ======================================================================
 * Inference: sessions, forward pass, sampler
 * ====================================================================== */

/* How a session stores its KV cache.  f16 halves the cache at a small cost
 * in accuracy (keys and values rounded to binary16). */
typedef enum pmpd_kv_type {
    PMPD_KV_F32 = 0,
    PMPD_KV_F16 = 1,
    PMPD_KV_PQ = 2,   /* product-quantized codes + full-precision recent window
                         (needs the model's KV codebook section) */
    PMPD_KV_INT8 = 3, /* baseline: each head vector uniformly quantized, 8 bits */
    PMPD_KV_INT4 = 4  /* baseline: the same at 4 bits */
} pmpd_kv_type;

/* What a session is built for.  Fill with pmpd_session_config_init, then
 * change fields.  The arena a session needs depends on every field. */
typedef struct pmpd_session_config {
    uint32_t context_length; /* positions the session holds (prompt + output);
                                0 = the model's seq_len; at most seq_len */
    uint32_t kv_type;        /* pmpd_kv_type */
    uint32_t prefill_batch;  /* prompt tokens per prefill step, processed as one
                                matrix x matrix product; 0 = 128 (measured:
                                1.3-2x batch 32's prefill rate at 8-16 threads
                                on a 16-core Xeon, >= at 1-2 threads on Zen3);
                                capped at context_length */
    uint32_t n_threads;      /* threads including the caller's, at most
                                pmpd_max_threads(); 0 = 1 (no worker threads) */
    uint32_t kv_window;      /* PMPD_KV_PQ only: newest tokens kept in full
                                precision, coded as one batch when full;
                                0 = head_dim; capped at context_length */
    uint32_t trace_events;   /* 0 = no trace; else room in the arena for this
                                many trace events (pmpd_session_trace) */
    uint32_t prefill_in_flight; /* prompt chunks (of prefill_batch tokens) a
                                prefill runs at once, out of order (seed 004,
                                docs/prefill.md): while one chunk waits on
                                attention or a quantization step, the
                                threads run another chunk's products; each
                                chunk beyond the first costs a batch of
                                activations in the arena.  1 = in order:
                                chunk after chunk, every step over all
                                threads.  0 = PMPD_SESSION_DEFAULT_IN_FLIGHT
                                with several threads, 1 with one (measured:
                                one thread gains 0.5-4%, less than a batch
                                of activations is worth on a small board).
                                At most 8.  Models whose products are not
                                all two-part (nested and float weights)
                                and pmpd_session_prefill_all run in order
                                whatever this says; results are bit for bit
                                the same either way */
    uint32_t float_threads;  /* out-of-order prefill: threads that serve only
                                the float lane (norms, rope, attention,
                                activation quantization); the others then
                                serve only the int8 lane (matrix products).
                                0 = every thread serves both lanes (the
                                fastest on CPUs: measured in docs/prefill.md).
                                Less than n_threads */
    uint32_t worker_stack_bytes; /* each worker thread's stack; 0 = the
                                system's default (glibc: the stack rlimit,
                                often 8 MiB of address space per worker,
                                which counts against the commit limit where
                                overcommit is off; musl: 128 KiB).  Workers
                                run the products and attention, whose
                                frames stay small (no arrays sized by the
                                model on the stack): PMPD_WORKER_STACK_BYTES
                                is enough for every weight and KV format
                                (measured with pmpd-run; tests run nuq, vq,
                                tcq, f32, q4, nested and w8a8 and, in
                                test_matrix, every weight and KV mode on it).
                                A size the system refuses (below
                                PTHREAD_STACK_MIN, 16 KiB on x86-64 glibc,
                                128 KiB on arm64 glibc) fails
                                pmpd_session_create with PMPD_ERR_THREAD.
                                The calling thread's own stack:
                                docs/running.md ("Stack") */
} pmpd_session_config;

/* A worker stack size that serves every format with room to spare (the
 * deepest worker call measured runs in 20 KiB: docs/running.md, "Stack")
 * and that every Linux C library accepts: arm64 glibc's PTHREAD_STACK_MIN
 * is 128 KiB. */
#define PMPD_WORKER_STACK_BYTES (128u * 1024u)

/* Chunks in flight by default with several threads (see prefill_in_flight). */
#define PMPD_SESSION_DEFAULT_IN_FLIGHT 2u

/* Sets the defaults: whole context, f32 KV cache, batch 128, one thread,
 * no trace, prefill chunks in flight by the thread count (see
 * prefill_in_flight), no dedicated float threads, the system's worker
 * stack size. */
void pmpd_session_config_init(pmpd_session_config *config);

/* The largest n_threads a session accepts: PMPD_MAX_THREADS as this library
 * was compiled (default 64; always 1 on the none platform).  Thread-safe. */
unsigned pmpd_max_threads(void);

/* A conversation with a model: KV cache, activations and worker threads,
 * all in the caller's arena.  Several sessions may share one model, each
 * used by one thread at a time. */
typedef struct pmpd_session pmpd_session;

/* Writes to *arena_bytes the exact number of arena bytes pmpd_session_create
 * takes for this model and configuration, computed without allocating or
 * running anything.  The figure is a multiple of PMPD_ARENA_ALIGNMENT and
 * the session leaves the arena's fill level at such a multiple, so figures
 * of several objects planned separately (a sampler, a second session) add
 * up.  It assumes the fill level at the call is such a multiple (true for a
 * fresh arena over an aligned buffer); otherwise add up to
 * PMPD_ARENA_ALIGNMENT - 1 bytes.
 * Errors: PMPD_ERR_INVALID_ARGUMENT (NULL model or output, bad config
 * field: context longer than seq_len, unknown KV type, too many threads),
 * PMPD_ERR_UNSUPPORTED (a weight type this build has no kernel for),
 * PMPD_ERR_OVERFLOW. */
pmpd_status pmpd_session_plan(const pmpd_model *model, const pmpd_session_config *config,
                              size_t *arena_bytes);

/* Creates a session in arena and starts its worker threads (n_threads - 1).
 * config may be NULL for the defaults.  The model must outlive the session;
 * the session keeps pointers into the arena and the model only.  On failure
 * *out is NULL and the arena is restored to its level at the call.
 * The session writes its KV rows a position at a time, so on a system with
 * demand paging, arena pages nobody has touched fault in inside the decode
 * steps that first reach them: for steady step times, write the arena's
 * buffer once beforehand (or lock it) as pmpd-run does.  Each token's KV
 * rows also lie on pages the streamed weights have pushed out of the TLB:
 * on Linux, 2 MiB pages for the arena (madvise(MADV_HUGEPAGE) on a 2 MiB-
 * aligned buffer, as pmpd-run asks) took that write from 7.1-8.4 to
 * 1.7-2.3 us per layer (one thread, 2-core Zen5 VM, pmpd-run --trace).
 * Errors: as pmpd_session_plan, plus PMPD_ERR_OUT_OF_MEMORY (the arena has
 * fewer bytes than planned) and PMPD_ERR_THREAD. */
pmpd_status pmpd_session_create(const pmpd_model *model, const pmpd_session_config *config,
                                pmpd_arena *arena, pmpd_session **out);

/* Appends n_tokens prompt tokens at the current position, prefill_batch at
 * a time, and computes the logits that predict the token after the last
 * one.  A prompt normally starts with the model's BOS id.  If logits is not
 * NULL, *logits points to vocab_size floats owned by the session, valid
 * until the next call on it.  All tokens are checked before anything runs:
 * on error the session is unchanged.
 * Errors: PMPD_ERR_INVALID_ARGUMENT (NULL session or tokens, n_tokens 0),
 * PMPD_ERR_TOKEN_RANGE (an id < 0 or >= vocab_size), PMPD_ERR_CONTEXT_FULL
 * (the tokens do not fit in the positions left, including a prompt longer
 * than the whole context), PMPD_ERR_STATE (destroyed session). */
pmpd_status pmpd_session_prefill(pmpd_session *session, const int32_t *tokens, size_t n_tokens,
                                 const float **logits);

/* As pmpd_session_prefill, but also writes the logits after every token:
 * row i of logits (caller-owned, n_tokens rows of vocab_size floats) is the
 * distribution of the token after tokens[i], at the prefill width.  The
 * classifier then runs on every row (a matrix product per prefill_batch
 * tokens) instead of the last only: for scoring a text (perplexity), not
 * for generation.  Same errors, plus PMPD_ERR_INVALID_ARGUMENT for NULL
 * logits. */
pmpd_status pmpd_session_prefill_all(pmpd_session *session, const int32_t *tokens, size_t n_tokens,
                                     float *logits);

/* Appends one token (usually the one just sampled) and computes the logits
 * for the next.  Same ownership and errors as pmpd_session_prefill. */
pmpd_status pmpd_session_decode(pmpd_session *session, int32_t token, const float **logits);

/* The logits of the last prefill or decode call.
 * Errors: PMPD_ERR_STATE when there are none (fresh or reset session, or a
 * destroyed one), PMPD_ERR_INVALID_ARGUMENT. */
pmpd_status pmpd_session_logits(const pmpd_session *session, const float **logits);

/* Positions in use (tokens processed since creation or the last reset). */
size_t pmpd_session_position(const pmpd_session *session);

/* Empties the context: the next call starts a new conversation at position
 * 0.  The threads and the arena memory are kept.  Logits pointers obtained
 * before are no longer valid.  Errors: PMPD_ERR_INVALID_ARGUMENT,
 * PMPD_ERR_STATE (destroyed session). */
pmpd_status pmpd_session_reset(pmpd_session *session);

/* One step of the schedule, as a trace records it: a share of one pool job
 * (one thread's range of a matrix product's rows, of attention's query
 * groups, ...) or a whole job that ran on the calling thread alone. */
typedef struct pmpd_trace_event {
    const char *name;      /* the matrix's tensor name, or the step's ("attention",
                              "rmsnorm", "swiglu", "add", "rope"; the out-of-order
                              prefill's also "embedding", "kv-write",
                              "add+rmsnorm"); not NUL-terminated */
    uint32_t name_length;
    uint32_t layer;        /* PMPD_TRACE_NO_LAYER outside the layers */
    const char *category;  /* NUL-terminated: "product" (matrix rows),
                              "quantize" (a product's input), "attention",
                              "elementwise" */
    uint32_t thread;       /* 0 = the calling thread, 1.. = workers */
    uint32_t chunk;        /* the prompt chunk (prefill_batch tokens) of a
                              prefill, counted from 0 in each prefill call;
                              PMPD_TRACE_NO_CHUNK in decode */
    uint64_t begin_ns, end_ns; /* monotonic clock (0 where the platform has none) */
} pmpd_trace_event;

#define PMPD_TRACE_NO_LAYER 0xFFFFFFFFu
#define PMPD_TRACE_NO_CHUNK 0xFFFFFFFFu

/* The events recorded since the session was created or the trace last
 * cleared, in the order their steps finished (threads interleave), and
 * *dropped, the events that found the trace full (config.trace_events
 * bounds it).  The events are the session's, valid until the next call
 * that runs the model or clears the trace; names point into the model.
 * A session created without a trace reports 0 events.  Not thread-safe
 * against a running call on the same session.
 * Errors: PMPD_ERR_INVALID_ARGUMENT (a NULL argument), PMPD_ERR_STATE
 * (destroyed session). */
pmpd_status pmpd_session_trace(const pmpd_session *session, const pmpd_trace_event **events, size_t *count,
                               size_t *dropped);

/* Forgets the recorded events (the arena room stays).  Errors as above. */
pmpd_status pmpd_session_trace_clear(pmpd_session *session);

/* Stops and joins the worker threads.  The arena memory stays the caller's.
 * Afterwards every call on the session returns PMPD_ERR_STATE (as long as
 * its arena memory has not been reused).  NULL and repeated calls are
 * accepted. */
void pmpd_session_destroy(pmpd_session *session);

/* ---- Sampling ---- */

/* A deterministic pseudo-random generator owned by the caller: the same
 * seed gives the same numbers on every platform. */
typedef struct pmpd_rng {
    uint64_t state;
} pmpd_rng;

void pmpd_rng_seed(pmpd_rng *rng, uint64_t seed);
/* Uniform 32-bit value. */
uint32_t pmpd_rng_u32(pmpd_rng *rng);
/* Uniform in [0, 1). */
float pmpd_rng_float(pmpd_rng *rng);

typedef struct pmpd_sampler_config {
    float temperature; /* 0 = greedy (argmax, lowest id on ties); > 0 scales logits */
    uint32_t top_k;    /* keep the k most probable tokens; 0 = all */
    float top_p;       /* keep the smallest most-probable set whose probability
                          reaches top_p; 0 or 1 = all */
} pmpd_sampler_config;

/* Picks tokens from logits.  The fields are public so it can live on the
 * stack; treat them as read-only.  scratch holds vocab_size candidates. */
typedef struct pmpd_sampler {
    pmpd_sampler_config config;
    uint32_t vocab_size;
    void *scratch;
} pmpd_sampler;

/* Arena bytes pmpd_sampler_init takes for a vocabulary (exact, and a
 * multiple of PMPD_ARENA_ALIGNMENT, as for sessions).
 * Errors: PMPD_ERR_INVALID_ARGUMENT, PMPD_ERR_OVERFLOW. */
pmpd_status pmpd_sampler_plan(uint32_t vocab_size, size_t *arena_bytes);

/* Prepares a sampler with its scratch from arena.
 * Errors: PMPD_ERR_INVALID_ARGUMENT (NULL, vocab_size 0, temperature
 * negative or not finite, top_p outside [0, 1]), PMPD_ERR_OUT_OF_MEMORY. */
pmpd_status pmpd_sampler_init(pmpd_sampler *sampler, const pmpd_sampler_config *config,
                              uint32_t vocab_size, pmpd_arena *arena);

/* Draws the next token from vocab_size logits (for greedy sampling rng may
 * be NULL; otherwise it advances by one draw).  Same logits, config and rng
 * state give the same token.  Errors: PMPD_ERR_INVALID_ARGUMENT. */
pmpd_status pmpd_sampler_sample(pmpd_sampler *sampler, const float *logits, pmpd_rng *rng,
                                int32_t *token);

/* ======================================================================
 * Nested any-precision weights, PMPD
 * ====================================================================== */

/* Widest code a PMPD_TENSOR_ANYPREC tensor may hold. */
#define PMPD_ANYPREC_MAX_BITS 8

/* Bytes of a PMPD_TENSOR_ANYPREC tensor of rows x cols whose tree starts
 * with a seed_bits-bit k-means and is split down to parent_bits bits
 * (1 <= seed_bits <= parent_bits <= PMPD_ANYPREC_MAX_BITS); layout in
 * docs/pmpd.md, "ANYPREC tensors".  Such a tensor can be used at any width
 * from seed_bits to parent_bits.
 * Errors: PMPD_ERR_INVALID_ARGUMENT (NULL bytes, widths out of range, zero
 * or over 2^31 rows or cols), PMPD_ERR_OVERFLOW. */
pmpd_status pmpd_anyprec_size(uint64_t rows, uint64_t cols, unsigned seed_bits, unsigned parent_bits,
                              uint64_t *bytes);

/* Precision in a session.  A model whose matrices are PMPD_TENSOR_ANYPREC
 * runs each forward pass at one width (bits per weight).  Prefill runs at
 * prefill_bits; decode step t (t = 0 for the first decode call after a
 * prefill) runs at decode_bits[i] for the last i with from_step[i] <= t.
 * Widths only go down: decode_bits is strictly decreasing and from_step
 * non-decreasing with from_step[0] == 0; PMPD_SCHEDULE_NEVER marks a width
 * never reached.  A width of 0 means each tensor's widest; a width outside
 * what a tensor holds is clamped to its range.  Changing width between two
 * tokens costs nothing: the kernels read fewer bit-planes and another
 * centroid table of the same weights. */
#define PMPD_SCHEDULE_MAX_WIDTHS 8
#define PMPD_SCHEDULE_NEVER UINT32_MAX

typedef struct pmpd_precision_schedule {
    uint32_t prefill_bits;
    uint32_t n_widths;                              /* 1..PMPD_SCHEDULE_MAX_WIDTHS */
    uint32_t decode_bits[PMPD_SCHEDULE_MAX_WIDTHS];
    uint32_t from_step[PMPD_SCHEDULE_MAX_WIDTHS];
} pmpd_precision_schedule;

/* Fills *schedule with one prefill width and one decode width. */
void pmpd_precision_schedule_uniform(pmpd_precision_schedule *schedule, unsigned prefill_bits,
                                     unsigned decode_bits);

/* The decode width at decode step `step` (0 = widest). */
unsigned pmpd_precision_schedule_bits_at(const pmpd_precision_schedule *schedule, uint32_t step);

/* Checks the rules above.  Errors: PMPD_ERR_INVALID_ARGUMENT. */
pmpd_status pmpd_precision_schedule_check(const pmpd_precision_schedule *schedule);

/* Serialized form (the PMPD_SECTION_PRECISION_SCHEDULE section, version 1):
 * little-endian u32 prefill_bits, n_widths, then n_widths pairs
 * (decode_bits, from_step).  Writes at most capacity bytes to out and the
 * size to *size.  Errors: PMPD_ERR_INVALID_ARGUMENT (bad schedule, NULL, or
 * capacity too small: *size then holds the bytes needed). */
pmpd_status pmpd_precision_schedule_encode(const pmpd_precision_schedule *schedule, void *out,
                                           size_t capacity, size_t *size);

/* Reads the model's static schedule section.  Errors: PMPD_ERR_NOT_FOUND
 * (no such section), PMPD_ERR_FORMAT_VERSION, PMPD_ERR_FORMAT_SHAPE (size
 * disagrees with n_widths), PMPD_ERR_FORMAT_VALUE (rules broken), with err
 * naming the field. */
pmpd_status pmpd_precision_schedule_from_model(const pmpd_model *model, pmpd_precision_schedule *schedule,
                                               pmpd_error *err);

/* Smallest seed width and largest parent width over the model's ANYPREC
 * tensors.  Errors: PMPD_ERR_NOT_FOUND (the model has none). */
pmpd_status pmpd_model_anyprec_widths(const pmpd_model *model, unsigned *seed_bits, unsigned *parent_bits);

/* Makes the session follow schedule from now on (NULL: widest everywhere).
 * The schedule is copied.  Errors: PMPD_ERR_INVALID_ARGUMENT (NULL session,
 * bad schedule), PMPD_ERR_STATE (destroyed session). */
pmpd_status pmpd_session_set_precision(pmpd_session *session, const pmpd_precision_schedule *schedule);

/* The width the next decode call will use (0 = widest) and the number of
 * decode calls since the last prefill. */
unsigned pmpd_session_decode_bits(const pmpd_session *session);
uint32_t pmpd_session_decode_step(const pmpd_session *session);

/* Learned PMPD scheduler: call right after a prefill.  Pools the last
 * layer's keys and values of the prompt with the learned classifiers (one
 * per pair of adjacent widths, layout in
 * pmpd_impl/precision/learned_scheduler.h), picks each pair's switch step,
 * and replaces the session's decode schedule (the prefill width is kept).
 * weights/size are the PMPD_SECTION_LEARNED_SCHEDULER bytes, or NULL to use
 * the model's section.  The features come from the last layer's K and V
 * in any KV-cache mode (the compressed modes give what their attention
 * sees; the scheduler is trained on f32 ones).  Working memory, about
 * 4*((T+1)*D + T*M + 3*M*D + H + N) bytes plus 7*64 for T prompt positions,
 * comes from scratch and is given back before returning.  Errors:
 * PMPD_ERR_INVALID_ARGUMENT, PMPD_ERR_STATE (destroyed session or no
 * prefill), PMPD_ERR_NOT_FOUND (no section), PMPD_ERR_FORMAT_* (malformed
 * weights, feature size not 2*head_dim), PMPD_ERR_OUT_OF_MEMORY (scratch
 * too small). */
pmpd_status pmpd_session_apply_learned_scheduler(pmpd_session *session, const void *weights, size_t size,
                                                 pmpd_arena *scratch);

#if defined(PMPD_OFFLINE) && PMPD_OFFLINE
/* Quantizes rows [row_begin, row_end) of the row-major float matrix
 * w[rows][cols] into out (out_size bytes, at least pmpd_anyprec_size, and
 * zero-filled by the caller before the first call), also writing the
 * header.  Per row: a weighted 1-D k-means with 2^seed_bits clusters, then
 * every cluster split by the optimal weighted 2-means, level by level, up to
 * parent_bits.  importance[cols] weighs the columns (e.g. mean squared
 * input activation); NULL weighs them equally.  Deterministic.  Call it on
 * row ranges to show progress.  Uses the heap.
 * Errors: PMPD_ERR_INVALID_ARGUMENT (NULL, bad widths, bad range, out_size
 * too small, importance not positive and finite, a call not starting at row
 * 0 whose out holds no header of these widths written by this build),
 * PMPD_ERR_FORMAT_NONFINITE (a weight is NaN or infinite),
 * PMPD_ERR_OUT_OF_MEMORY. */
pmpd_status pmpd_anyprec_quantize(const float *w, uint64_t rows, uint64_t cols, const float *importance,
                                  unsigned seed_bits, unsigned parent_bits, uint64_t row_begin,
                                  uint64_t row_end, void *out, size_t out_size);

/* ---- Calibration (offline, heap): data-free sets and quality metrics ---- */

/* How a calibration set is drawn from the float model: n_prompts prompts of
 * BOS + prompt_length tokens sampled at temperature (BOS excluded), each
 * continued greedily for output_length tokens by the float model. */
typedef struct pmpd_calibration_config {
    uint32_t n_prompts;
    uint32_t prompt_length;
    uint32_t output_length;  /* OL */
    uint64_t seed;
    float temperature;
} pmpd_calibration_config;

/* 32 prompts of 8 tokens, 48 output tokens, temperature 1. */
void pmpd_calibration_config_init(pmpd_calibration_config *config);

/* Which set a sample is for; each uses its own range of seeds, so the sets
 * never share a prompt stream. */
#define PMPD_CALIBRATION_TRAIN 0u
#define PMPD_CALIBRATION_VALIDATION 1u
#define PMPD_CALIBRATION_TEST 2u

typedef struct pmpd_calibration_set {
    uint32_t n_prompts, prompt_length, output_length, vocab_size;
    int32_t *prompts;         /* [n_prompts][prompt_length], BOS first */
    int32_t *reference;       /* [n_prompts][output_length] float greedy tokens */
    float *reference_logits;  /* [n_prompts][output_length][vocab] float logits */
} pmpd_calibration_set;

/* Samples set `which` (PMPD_CALIBRATION_*) from float_model.  Free with
 * pmpd_calibration_set_free.  Errors: PMPD_ERR_INVALID_ARGUMENT (prompt +
 * output longer than seq_len), PMPD_ERR_OUT_OF_MEMORY, session errors. */
pmpd_status pmpd_calibration_set_sample(const pmpd_model *float_model, const pmpd_calibration_config *config,
                                        uint32_t which, pmpd_calibration_set *set);
void pmpd_calibration_set_free(pmpd_calibration_set *set);

/* The same from a user's prompts: n_prompts rows of prompt_length tokens
 * (BOS first, as the set stores them), continued by the float model.
 * Errors: as above, plus PMPD_ERR_TOKEN_RANGE. */
pmpd_status pmpd_calibration_set_from_prompts(const pmpd_model *float_model, const int32_t *prompts,
                                              uint32_t n_prompts, uint32_t prompt_length, uint32_t output_length,
                                              pmpd_calibration_set *set);

/* Quality against the float reference, averaged over the set: token-level
 * Rouge-L (LCS F-measure) of the greedy output, next-token KL(float ||
 * model) in nats and top-1 agreement under teacher forcing along the
 * reference, and the mean width of the decode steps. */
typedef struct pmpd_calibration_quality {
    double rouge_l, kl, top1, average_decode_bits;
} pmpd_calibration_quality;

/* Runs every prompt of set through `model` at the schedule's widths (NULL:
 * widest).  A model without ANYPREC tensors reports 32 decode bits. */
pmpd_status pmpd_calibration_evaluate(const pmpd_model *model, const pmpd_calibration_set *set,
                                      const pmpd_precision_schedule *schedule, pmpd_calibration_quality *quality);

/* Every configuration a solver evaluated, for tables and plots. */
#define PMPD_CALIBRATION_MAX_CANDIDATES 64
typedef struct pmpd_calibration_report {
    uint32_t n;
    pmpd_precision_schedule schedule[PMPD_CALIBRATION_MAX_CANDIDATES];
    pmpd_calibration_quality quality[PMPD_CALIBRATION_MAX_CANDIDATES];
} pmpd_calibration_report;

/* Phase-aware allocation: evaluates every (prefill, decode) width pair with
 * decode <= prefill on the set and picks the one with the lowest decode
 * width, then the lowest prefill width, whose Rouge-L is at least the
 * widest pair's minus epsilon.  *best gets it as a uniform schedule,
 * *reference the widest pair's quality; report (may be NULL) every pair. */
pmpd_status pmpd_precision_phase_aware(const pmpd_model *nested, const pmpd_calibration_set *validation,
                                       double epsilon, pmpd_precision_schedule *best,
                                       pmpd_calibration_quality *reference, pmpd_calibration_report *report);

/* Static PMPD scheduler: with prefill at prefill_bits, decode widths from
 * the widest down to the seed width, and each width's switch step one of
 * n_candidates points {0, OL/(N-1), ..., never} (never earlier than a wider
 * width's), keeps the schedule with the lowest average decode width (then
 * the best Rouge-L) whose Rouge-L is at least the widest pair's minus
 * epsilon.  Errors: PMPD_ERR_INVALID_ARGUMENT (n_candidates outside 2..8),
 * PMPD_ERR_NOT_FOUND (no ANYPREC tensors), evaluation errors. */
pmpd_status pmpd_precision_static_solve(const pmpd_model *nested, const pmpd_calibration_set *validation,
                                        double epsilon, unsigned prefill_bits, unsigned n_candidates,
                                        pmpd_precision_schedule *best, pmpd_calibration_report *report);

/* As pmpd_calibration_evaluate, but each prompt's decode schedule comes
 * from the learned scheduler (weights: section bytes) applied after its
 * prefill at prefill_bits. */
pmpd_status pmpd_calibration_evaluate_learned(const pmpd_model *nested, const pmpd_calibration_set *set,
                                              unsigned prefill_bits, const void *weights, size_t size,
                                              pmpd_calibration_quality *quality);

/* Learned-scheduler training: N candidate switch steps, M pooling queries,
 * H hidden units, epochs over class-balanced (oversampled) data, Adam's
 * learning rate, and the seed of the initial weights and sampling. */
typedef struct pmpd_learned_train_config {
    uint32_t n_candidates, n_queries, hidden, epochs;
    float learning_rate;
    uint64_t seed;
} pmpd_learned_train_config;

/* N = 4, M = 4, H = 32, 150 epochs, learning rate 0.01. */
void pmpd_learned_train_config_init(pmpd_learned_train_config *config);

typedef struct pmpd_learned_train_report {
    uint32_t n_pairs;
    uint32_t label_counts[PMPD_SCHEDULE_MAX_WIDTHS][8]; /* [pair][candidate] */
    double train_accuracy[PMPD_SCHEDULE_MAX_WIDTHS];
} pmpd_learned_train_report;

/* Trains one classifier per pair of adjacent widths (widest first) on the
 * training set's prompts, prefilled at prefill_bits.  Label of a prompt for
 * pair high -> low: the earliest candidate step whose greedy output's
 * Rouge-L against the float reference is at least that of staying at high.
 * *weights (malloc'ed, free() it) receives the section bytes, *size their
 * count; config NULL = defaults; report may be NULL.  Errors:
 * PMPD_ERR_INVALID_ARGUMENT, PMPD_ERR_NOT_FOUND (no ANYPREC tensors),
 * PMPD_ERR_OUT_OF_MEMORY, session errors. */
pmpd_status pmpd_learned_scheduler_train(const pmpd_model *nested, const pmpd_calibration_set *train,
                                         unsigned prefill_bits, const pmpd_learned_train_config *config,
                                         void **weights, size_t *size, pmpd_learned_train_report *report);

/* ---- Offline tools: a model file's PMPD schedules in one call (pmpd-calibrate) ---- */

/* What the schedules were calibrated against: the float model the nested
 * weights were quantized from, or (input already nested) the nested model
 * at its widest width. */
#define PMPD_CALIBRATED_ON_FLOAT 0u
#define PMPD_CALIBRATED_ON_WIDEST 1u

typedef struct pmpd_schedule_calibration_options {
    const char *tokenizer_path; /* checkpoint input: llama2.c tokenizer.bin (NULL: the GGUF's own, or none);
                                   a .pmpd carries its own and refuses one */
    const char *prompt_file;    /* NULL: prompts sampled from the reference model; else one prompt per line,
                                   dealt in turn to the training, validation and test sets */
    unsigned seed_bits, parent_bits; /* nested widths made from float weights (0: 2 and 4); a nested input
                                        keeps its own, and other values than those are refused */
    unsigned candidates;        /* switch-step candidates per width, 2..8 */
    int weighted;               /* weigh columns by the training set's activations (float input only) */
    double epsilon;             /* Rouge-L the solvers may give up against the widest width */
    pmpd_calibration_config sets;
    pmpd_learned_train_config learned;
    /* Rows quantized of the total, now and then (may be NULL). */
    void (*progress)(void *context, uint64_t done, uint64_t total);
    /* One line per step ("static schedule solver (4 switch candidates)"; may be NULL). */
    void (*step)(void *context, const char *what);
    void *context;
} pmpd_schedule_calibration_options;

/* Widths 2:4, 4 candidates, epsilon 0.05, the calibration and training
 * defaults above, no tokenizer, prompt file or callbacks. */
void pmpd_schedule_calibration_options_init(pmpd_schedule_calibration_options *options);

#define PMPD_SCHEDULE_REPORT_MAX_ROWS 16
typedef struct pmpd_schedule_calibration_report {
    uint32_t calibrated_on;     /* PMPD_CALIBRATED_ON_* */
    uint32_t input_type;        /* the input's layer matrices: f32, f16 or anyprec (f32 for checkpoints) */
    unsigned seed_bits, parent_bits;
    uint32_t test_prompts, prompt_length, output_length;
    pmpd_calibration_quality validation_reference; /* the widest width on the validation set */
    /* Measured on the test set: uniform widths, widest first, then the
     * phase-aware pair, the static schedule and the learned scheduler
     * (whose schedule has decode_bits[0] = 0: chosen per prompt). */
    uint32_t n_rows;
    char name[PMPD_SCHEDULE_REPORT_MAX_ROWS][32];
    pmpd_precision_schedule schedule[PMPD_SCHEDULE_REPORT_MAX_ROWS];
    pmpd_calibration_quality quality[PMPD_SCHEDULE_REPORT_MAX_ROWS];
    pmpd_learned_train_report learned;
} pmpd_schedule_calibration_report;

/* Calibrates the static schedule and trains the learned scheduler of the
 * model at in_path and writes the nested model with both sections to
 * out_path (through out_path.tmp, renamed when complete; nothing is left
 * behind on failure).  The input is a llama2.c checkpoint, a GGUF file or
 * a .pmpd container.  Float layer matrices (f32 or f16; every checkpoint)
 * are quantized to nested weights, the embedding and a separate classifier
 * to q8, and the float model is the reference; a container whose layer
 * matrices are already nested keeps its weights and is calibrated against
 * itself at its widest width.  A container keeps every other tensor and
 * section (KV codebooks, tokenizer, ...) byte for byte; an earlier static
 * schedule or learned scheduler is replaced.  report may be NULL.
 * Errors: PMPD_ERR_NOT_FOUND / PMPD_ERR_IO (files), PMPD_ERR_FORMAT_* (a
 * malformed input), PMPD_ERR_UNSUPPORTED (layer matrices of another type,
 * named in err), PMPD_ERR_INVALID_ARGUMENT (options out of range or not
 * applicable to the input, named in err), PMPD_ERR_OUT_OF_MEMORY, session
 * errors; err names the step that failed. */
pmpd_status pmpd_schedule_calibrate_file(const char *in_path, const char *out_path,
                                         const pmpd_schedule_calibration_options *options,
                                         pmpd_schedule_calibration_report *report, pmpd_error *err);
#endif

/* ======================================================================
 * Product-quantized KV cache
 * ====================================================================== */

/* Bytes one token's keys and values occupy in ONE layer's KV cache when
 * stored as kv_type (a pmpd_kv_type value): f32 and f16 store every number;
 * the PQ mode one code per subspace of pq_key_sub_dim / pq_value_sub_dim
 * numbers (2 or 4) of pq_bits (1-8; a byte each, or half a byte when
 * pq_bits <= 4) for its coded history, plus a fixed full-precision recent
 * window not counted here (the pq_* arguments are ignored by the other
 * modes); the uniform int8 and int4 baselines one or half a byte per number
 * plus two f32 (scale, minimum) per head vector.  Errors:
 * PMPD_ERR_INVALID_ARGUMENT (unknown type, zero sizes, bad PQ layout),
 * PMPD_ERR_OVERFLOW. */
pmpd_status pmpd_kv_bytes_per_token(uint32_t kv_type, uint32_t n_kv_heads, uint32_t head_dim,
                                    uint32_t pq_key_sub_dim, uint32_t pq_value_sub_dim, uint32_t pq_bits,
                                    size_t *bytes);

/* Bytes the session's KV cache holds for the positions in use, all layers,
 * keys and values (for PQ: the codes plus the whole recent window, which is
 * allocated up front).  Errors: PMPD_ERR_INVALID_ARGUMENT, PMPD_ERR_STATE
 * (destroyed session). */
pmpd_status pmpd_session_kv_bytes(const pmpd_session *session, size_t *bytes);

#if defined(PMPD_OFFLINE) && PMPD_OFFLINE
/* ---- Offline tools: PQ codebook training (heap-using) ---- */

/* Trains the codebook of one PQ layout from count calibration vectors of
 * dim floats (post-rotary keys, or values): k-means with k = 2^bits per
 * subspace of sub_dim (2 or 4) consecutive numbers, seeded by k-means++
 * from seed, at most iterations Lloyd steps.  Same input and seed give the
 * same codebook everywhere.  centroids receives dim * 2^bits floats laid
 * out [dim / sub_dim][2^bits][sub_dim].
 * Errors: PMPD_ERR_INVALID_ARGUMENT (NULL, count 0, bad layout, a
 * non-finite input), PMPD_ERR_OVERFLOW, PMPD_ERR_OUT_OF_MEMORY. */
pmpd_status pmpd_pq_train_codebook(const float *vectors, size_t count, uint32_t dim, uint32_t sub_dim,
                                   uint32_t bits, uint32_t iterations, uint64_t seed, float *centroids);

/* Writes a PMPD_SECTION_KV_CODEBOOKS section body (version 1; layout in
 * pmpd_impl/kvcache/pq_codebook_set.h): n_books (1 = shared by all layers,
 * or one per layer) pairs of key and value codebooks, centroids holding the
 * pairs one after another.  *written receives the section size; with out
 * NULL only the size is computed.  Errors: PMPD_ERR_INVALID_ARGUMENT (bad
 * layout, out_size too small), PMPD_ERR_OVERFLOW. */
pmpd_status pmpd_pq_section_write(uint32_t head_dim, uint32_t key_sub_dim, uint32_t value_sub_dim,
                                  uint32_t bits, uint32_t n_books, const float *centroids, void *out,
                                  size_t out_size, size_t *written);

/* How pmpd_pq_calibrate draws its data and trains. */
typedef struct pmpd_pq_calibration_options {
    uint32_t key_sub_dim;     /* 2 or 4 */
    uint32_t value_sub_dim;   /* 2 or 4 */
    uint32_t per_layer;       /* 1: a codebook pair per layer; 0: one pair shared by all */
    uint32_t n_sequences;     /* calibration texts sampled from BOS */
    uint32_t sequence_length; /* tokens per text (capped at the model's seq_len) */
    uint32_t iterations;      /* Lloyd steps per subspace */
    uint64_t seed;            /* texts use seed, seed+1, ...; k-means seeds derive from it */
    uint32_t bits;            /* bits per code, 1-8 (2^bits centroids); <= 4 packs two
                                 codes per byte */
} pmpd_pq_calibration_options;

/* 2-dim subspaces for K and V, 8-bit codes, per-layer codebooks, 8 texts
 * of 256 tokens, 20 iterations, seed 1. */
void pmpd_pq_calibration_options_init(pmpd_pq_calibration_options *options);

/* Data-free calibration: the model itself (f32 KV cache; nested weights at
 * their widest width, other types as stored) samples its own texts at
 * temperature 1; their post-rotary keys and their values train
 * the codebooks (at most 65536 evenly spread vectors per codebook).
 * *section receives a malloc'ed PMPD_SECTION_KV_CODEBOOKS body (free it)
 * and *size its length.  Deterministic for a given model and options.
 * Errors: PMPD_ERR_INVALID_ARGUMENT, PMPD_ERR_OUT_OF_MEMORY,
 * PMPD_ERR_OVERFLOW, and session errors. */
pmpd_status pmpd_pq_calibrate(const pmpd_model *model, const pmpd_pq_calibration_options *options,
                              void **section, size_t *size);

/* Opens the container at in_path (any weight type), calibrates as above and
 * writes a copy to out_path: every tensor and section kept byte for byte,
 * the codebook section added (replacing any earlier one).  The copy goes to
 * out_path.tmp first and is renamed when complete.  Errors: those of
 * pmpd_model_open_file and pmpd_pq_calibrate, PMPD_ERR_IO when out_path
 * cannot be written (nothing is left behind); err names the step. */
pmpd_status pmpd_pq_calibrate_file(const char *in_path, const char *out_path,
                                   const pmpd_pq_calibration_options *options, pmpd_error *err);
#endif

#ifdef __cplusplus
}
#endif

#endif /* PMPD_H */
