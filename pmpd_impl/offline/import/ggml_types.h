/* ggml's tensor types as GGUF files store them (offline): one row per type
 * id with its name, block shape and a decoder of one block to floats.  The
 * GGUF importer asks this table for sizes and decoding; the synthetic GGUF
 * writer asks it for sizes.  Types ggml defines but pmpd does not read
 * have a row without a decoder, so messages can name them. */
#ifndef PMPD_OFFLINE_IMPORT_GGML_TYPES_H
#define PMPD_OFFLINE_IMPORT_GGML_TYPES_H

#include <stdint.h>

#include "pmpd_impl/core/config.h"

#if PMPD_OFFLINE

/* Writes the block_elements floats that one block_bytes block holds. */
typedef void (*pmpd_ggml_decode_fn)(const unsigned char *block, float *out);

typedef struct pmpd_ggml_type_info {
    uint32_t id;             /* ggml's enum ggml_type value, as in GGUF tensor infos */
    const char *name;        /* ggml's spelling: "Q4_K", "BF16", ... */
    uint32_t block_elements; /* a row is a whole number of blocks */
    uint32_t block_bytes;
    pmpd_ggml_decode_fn decode; /* NULL: ggml has the type, pmpd does not read it */
    uint32_t closest;           /* pmpd_tensor_type that --type keep-closest stores it as */
} pmpd_ggml_type_info;

/* The row of type id, or NULL when ggml defines no such type. */
PMPD_INTERNAL const pmpd_ggml_type_info *pmpd_ggml_type_find(uint32_t id);

#endif /* PMPD_OFFLINE */
#endif
