/* Offline half of the table of weight formats (weights/format.h): for each
 * format, how the converter turns a float model's matrices into it.  One
 * row per format in encoders.c; the encoder itself lives with the other
 * offline code of its technique (offline/quant, offline/precision). */
#ifndef PMPD_OFFLINE_WEIGHTS_ENCODERS_H
#define PMPD_OFFLINE_WEIGHTS_ENCODERS_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/offline/format/builder.h"
#include "pmpd_impl/offline/ldlq/ldlq.h"

#if PMPD_OFFLINE

typedef struct pmpd_weight_encoder {
    pmpd_tensor_type type;
    /* Converts the float matrices of b (all of them f32 on entry) to the
     * format; options gives widths and progress.  Errors:
     * PMPD_ERR_OUT_OF_MEMORY, PMPD_ERR_OVERFLOW, PMPD_ERR_INVALID_ARGUMENT. */
    pmpd_status (*convert)(pmpd_build_model *b, const pmpd_convert_options *options);
    /* 1: each matrix is encoded on its own (pmpd_weight_encode_matrix), so
     * the converter streams (pmpd_build_write_stream); 0: the encoder needs
     * the whole model in memory (nested trees, activation ranges). */
    int streams;
} pmpd_weight_encoder;

/* The encoder of a type, or NULL for a type the converter cannot write. */
PMPD_INTERNAL const pmpd_weight_encoder *pmpd_weight_encoder_of(uint32_t type);

/* The type a streaming conversion stores f32 tensor t as: vectors stay
 * f32; with options->keep_closest a matrix takes its GGUF type's closest
 * pmpd type (import/ggml_types.c, f32 when it came from elsewhere);
 * otherwise options->type, except that with a group-quantized type the
 * token embedding and classifier become q8. */
PMPD_INTERNAL uint32_t pmpd_weight_stream_type(const pmpd_convert_options *options, const pmpd_build_tensor *t);

/* Encodes the rows x cols matrix values (host floats) as type f16, q8, q4,
 * q2cb, nested, nuq, vq or tcq (options' widths and threads; options may be
 * NULL for 2:4 nested on every core, 4-bit nuq and 2-bit vq; vq shares
 * NUQ's sign seed) into out (size bytes, pmpd_weight_stream_bytes of it).
 * ldlq (NULL: data-free) is the matrix input's LDLQ factor for nuq, vq and
 * tcq, at pmpd_weight_ldlq_block(type) (offline/ldlq/hessian.h).  Errors:
 * PMPD_ERR_INVALID_ARGUMENT (another type, a size that does not match, a
 * factor for a type without LDLQ or of another size), PMPD_ERR_OUT_OF_MEMORY,
 * PMPD_ERR_THREAD. */
PMPD_INTERNAL pmpd_status pmpd_weight_encode_matrix(const pmpd_convert_options *options, uint32_t type,
                                                    const pmpd_ldlq *ldlq, const float *values, uint64_t rows,
                                                    uint64_t cols, unsigned char *out, size_t size);

/* The columns type's encoder rounds together under LDLQ (nuq 1, vq 2, tcq
 * a 256-column trellis sequence); 0 for the types without LDLQ. */
PMPD_INTERNAL size_t pmpd_weight_ldlq_block(uint32_t type);

/* The stored bytes of an n_dims tensor of type: pmpd_weight_tensor_bytes,
 * or for nested weights (self-describing, no size of their own) the size
 * at options' widths.  Errors: PMPD_ERR_INVALID_ARGUMENT,
 * PMPD_ERR_OVERFLOW. */
PMPD_INTERNAL pmpd_status pmpd_weight_stream_bytes(const pmpd_convert_options *options, uint32_t type,
                                                   uint32_t n_dims, const uint64_t *dims, uint64_t *bytes);

/* Rows that pmpd_weight_encode_matrix's type lays out together (f16 1, q8
 * and q4 their interleaved block), so a matrix encodes as consecutive
 * chunks of that many rows; 0 for q2cb, whose codebooks are learned from
 * the whole matrix, and nested weights, whose planes span every row. */
PMPD_INTERNAL uint64_t pmpd_weight_row_block(uint32_t type);

#endif /* PMPD_OFFLINE */

#endif
