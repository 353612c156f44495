/*
 * Product quantization of head vectors (seed 001, MILLION).  A vector of
 * dim floats is cut into n_sub = dim / sub_dim consecutive subspaces of
 * sub_dim (2 or 4) floats; each subspace has its own codebook of
 * n_centroids (2^bits, bits <= 8) centroids, and a vector is stored as the
 * index of the nearest centroid per subspace: one byte each, or with bits
 * <= 4 two per byte (subspace 2k in the low nibble, 2k+1 in the high);
 * code_bytes per vector, laid out in blocks of tokens (below).
 *
 * Codebook data is centroids[sub][c][j] (sub < n_sub, c < n_centroids,
 * j < sub_dim), f32.  Keys are quantized after the rotary embedding, so
 * queries meet the codebook as they are.
 */
#ifndef PMPD_KVCACHE_PQ_CODEBOOK_H
#define PMPD_KVCACHE_PQ_CODEBOOK_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"

typedef struct pmpd_pq_layout {
    uint32_t dim;          /* vector length (the head dimension) */
    uint32_t sub_dim;      /* floats per subspace: 2 or 4 */
    uint32_t n_sub;        /* dim / sub_dim = code bytes per vector */
    uint32_t n_centroids;  /* 2^bits */
    uint32_t packed;       /* 1: two codes per byte (bits <= 4) */
    uint32_t code_bytes;   /* bytes of one vector's codes */
} pmpd_pq_layout;

/* Codes are stored in blocks of PMPD_PQ_BLOCK tokens, code byte by code
 * byte: [block][byte][PMPD_PQ_BLOCK].  One byte position of a whole block
 * is one 64-byte run, so a SIMD register holds one subspace's codes for
 * 64 tokens and a kernel can look them all up at once. */
#define PMPD_PQ_BLOCK 64u

/* Offset of code byte b of token t in a blocked code array. */
static inline size_t pmpd_pq_code_offset(const pmpd_pq_layout *layout, size_t t, uint32_t b)
{
    return (t / PMPD_PQ_BLOCK * layout->code_bytes + b) * PMPD_PQ_BLOCK + t % PMPD_PQ_BLOCK;
}

/* The code of subspace s of token t in a blocked code array. */
static inline uint32_t pmpd_pq_code(const pmpd_pq_layout *layout, const uint8_t *codes, size_t t, uint32_t s)
{
    if (layout->packed)
        return (uint32_t)(codes[pmpd_pq_code_offset(layout, t, s >> 1)] >> ((s & 1u) * 4u)) & 15u;
    return codes[pmpd_pq_code_offset(layout, t, s)];
}

typedef struct pmpd_pq_codebook {
    pmpd_pq_layout layout;
    const float *centroids; /* [n_sub][n_centroids][sub_dim] */
} pmpd_pq_codebook;

/* Fills *out for vectors of dim floats, sub_dim floats per subspace and
 * bits per code.  PMPD_ERR_INVALID_ARGUMENT unless sub_dim is 2 or 4,
 * dim a positive multiple of sub_dim and 1 <= bits <= 8. */
PMPD_INTERNAL pmpd_status pmpd_pq_layout_init(pmpd_pq_layout *out, uint32_t dim, uint32_t sub_dim,
                                              uint32_t bits);

/* Floats in one codebook of this layout. */
PMPD_INTERNAL size_t pmpd_pq_codebook_floats(const pmpd_pq_layout *layout);

/* The codes of token first + i in the blocked array codes give for each
 * subspace s the centroid nearest (squared Euclidean distance, lowest index
 * on ties) to subspace s of vectors[i*stride ..], i < count.
 * The decode path never calls this per token: the cache encodes its
 * recent window as one batch. */
PMPD_INTERNAL void pmpd_pq_encode(const pmpd_pq_codebook *book, const float *vectors, size_t stride,
                                  size_t count, size_t first, uint8_t *codes);

/* The vector token t's codes stand for (dim floats).  Attention never
 * needs it; the learned precision scheduler reads its prompt features so. */
PMPD_INTERNAL void pmpd_pq_decode(const pmpd_pq_codebook *book, const uint8_t *codes, size_t t, float *vector);

#endif
