/*
 * The PMPD_SECTION_KV_CODEBOOKS section of a model file: the K and V
 * codebooks of the PQ KV cache, either one pair shared by every layer or
 * one pair per layer.  Version 1 layout, little-endian:
 *
 *   u32 head_dim, u32 key_sub_dim, u32 value_sub_dim, u32 bits,
 *   u32 n_books (1 = shared, or n_layers), u32 reserved[3] (zero),
 *   then n_books times { K centroids, V centroids }, each
 *   [head_dim / sub_dim][2^bits][sub_dim] f32 (pq_codebook.h).
 *
 * The centroids are used in place (zero-copy): the section data must be
 * 4-byte aligned, as the container's 64-byte alignment guarantees.
 */
#ifndef PMPD_KVCACHE_PQ_CODEBOOK_SET_H
#define PMPD_KVCACHE_PQ_CODEBOOK_SET_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/kvcache/pq_codebook.h"

#define PMPD_PQ_SECTION_VERSION 1
#define PMPD_PQ_SECTION_HEADER_BYTES 32

typedef struct pmpd_pq_codebook_set {
    pmpd_pq_layout keys;
    pmpd_pq_layout values;
    uint32_t n_books;        /* 1 (shared) or one per layer */
    const float *centroids;  /* n_books x { K book, V book } */
} pmpd_pq_codebook_set;

/* Validates a section for a model with n_layers layers of head_dim and
 * fills *out.  Errors (with err naming the field and byte offset):
 * PMPD_ERR_FORMAT_TRUNCATED, PMPD_ERR_FORMAT_VALUE (sub dims, bits,
 * reserved fields, book count), PMPD_ERR_FORMAT_SHAPE (head_dim differs from
 * the model's, or size disagrees with the header), PMPD_ERR_FORMAT_ALIGNMENT,
 * PMPD_ERR_FORMAT_NONFINITE, PMPD_ERR_INVALID_ARGUMENT. */
PMPD_INTERNAL pmpd_status pmpd_pq_codebook_set_parse(const void *data, uint64_t size, uint32_t head_dim,
                                                     uint32_t n_layers, pmpd_pq_codebook_set *out,
                                                     pmpd_error *err);

/* The K and V codebooks layer uses. */
PMPD_INTERNAL void pmpd_pq_codebook_set_layer(const pmpd_pq_codebook_set *set, uint32_t layer,
                                              pmpd_pq_codebook *keys, pmpd_pq_codebook *values);

#endif
