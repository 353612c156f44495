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
    PMPD_TENSOR_ANYPREC = 5  /* nested any-precision bit-planes */
} pmpd_tensor_type;

/* Hyperparameters of a loaded model (llama2.c naming). */
typedef struct pmpd_model_info {
    uint32_t dim;            /* embedding width */
    uint32_t hidden_dim;     /* feed-forward width */
    uint32_t n_layers;
    uint32_t n_heads;
    uint32_t n_kv_heads;     /* grouped-query attention: n_heads % n_kv_heads == 0 */
    uint32_t head_dim;       /* dim / n_heads, even */
    uint32_t vocab_size;
    uint32_t seq_len;        /* longest context the model was trained for */
    float rope_theta;        /* 10000 for llama2.c models */
    float norm_eps;          /* RMSNorm epsilon, 1e-5 for llama2.c models */
    uint32_t shared_classifier; /* 1: the classifier is the token embedding */
    uint32_t bos_id;
    uint32_t eos_id;
} pmpd_model_info;

/* A model opened from a .pmpd container.  Its storage is in the arena given
 * to the open call; tensor data is used in place (zero-copy). */
typedef struct pmpd_model pmpd_model;

/* Section-by-section additions follow (format, inference, kernels, ...). */

/* ======================================================================
 * Nested any-precision weights, PMPD (precision engineer)
 * ====================================================================== */

/* Widest code a PMPD_TENSOR_ANYPREC tensor may hold. */
#define PMPD_ANYPREC_MAX_BITS 8

/* Bytes of a PMPD_TENSOR_ANYPREC tensor of rows x cols whose tree starts
 * with a seed_bits-bit k-means and is split down to parent_bits bits
 * (1 <= seed_bits <= parent_bits <= PMPD_ANYPREC_MAX_BITS); layout in
 * README.md, "ANYPREC tensors".  Such a tensor can be used at any width
 * from seed_bits to parent_bits.
 * Errors: PMPD_ERR_INVALID_ARGUMENT (NULL bytes, widths out of range, zero
 * or over 2^31 rows or cols), PMPD_ERR_OVERFLOW. */
pmpd_status pmpd_anyprec_size(uint64_t rows, uint64_t cols, unsigned seed_bits, unsigned parent_bits,
                              uint64_t *bytes);

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
 * too small, negative or non-finite importance), PMPD_ERR_FORMAT_NONFINITE
 * (a weight is NaN or infinite), PMPD_ERR_OUT_OF_MEMORY. */
pmpd_status pmpd_anyprec_quantize(const float *w, uint64_t rows, uint64_t cols, const float *importance,
                                  unsigned seed_bits, unsigned parent_bits, uint64_t row_begin,
                                  uint64_t row_end, void *out, size_t out_size);
#endif

#ifdef __cplusplus
}
#endif

#endif /* PMPD_H */
