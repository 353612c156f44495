/* Converting a model under construction to nested any-precision weights. */
#ifndef PMPD_OFFLINE_PRECISION_ANYPREC_BUILD_H
#define PMPD_OFFLINE_PRECISION_ANYPREC_BUILD_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/offline/format/builder.h"
#include "pmpd_impl/offline/precision/importance.h"

#if PMPD_OFFLINE

/* Whether a vocabulary matrix (token embedding, classifier) of rows x cols
 * can be nested with profit: where a product at parent_bits reads fewer
 * bytes than q8 (columns are padded to 256, so not for stories260K's 64). */
PMPD_INTERNAL int pmpd_anyprec_build_nests_vocabulary(uint64_t rows, uint64_t cols, unsigned parent_bits);

/* Replaces every 2-D f32 tensor of b except the token embedding and the
 * classifier (left to the caller: q8 by default, or
 * pmpd_anyprec_build_convert_vocabulary) by a PMPD_TENSOR_ANYPREC tensor
 * quantized from seed_bits up to parent_bits,
 * its columns weighed by importance where it has the tensor (NULL, or a
 * tensor it lacks: equally), on threads threads (0: one per core; the
 * bytes are the same for any count).  progress (may be NULL) is called
 * from the calling thread with rows done and total rows, every 64 rows
 * that thread quantizes and after every tensor.
 * Errors: those of pmpd_anyprec_quantize, PMPD_ERR_THREAD. */
PMPD_INTERNAL pmpd_status pmpd_anyprec_build_convert(pmpd_build_model *b, unsigned seed_bits, unsigned parent_bits,
                                                     const pmpd_anyprec_importance *importance, unsigned threads,
                                                     void (*progress)(void *context, uint64_t done, uint64_t total),
                                                     void *context);

/* Nests the f32 token embedding and classifier of b that
 * pmpd_anyprec_build_nests_vocabulary allows, columns weighed equally, so
 * that the classifier's bytes per decoded token fall with the width as the
 * layers' do (pmpd_convert_options.anyprec_vocabulary = PMPD_TENSOR_ANYPREC).
 * Errors: as pmpd_anyprec_build_convert. */
PMPD_INTERNAL pmpd_status pmpd_anyprec_build_convert_vocabulary(pmpd_build_model *b, unsigned seed_bits,
                                                                unsigned parent_bits, unsigned threads);

/* One rows x cols matrix w quantized into out (out_size bytes,
 * pmpd_anyprec_size, zero-filled) on threads threads (0: one per core),
 * columns weighed by importance (may be NULL): the bytes
 * pmpd_anyprec_build_convert stores for it.  For converters that write one
 * tensor at a time.  Errors: those of pmpd_anyprec_quantize,
 * PMPD_ERR_THREAD. */
PMPD_INTERNAL pmpd_status pmpd_anyprec_build_matrix(const float *w, uint64_t rows, uint64_t cols,
                                                    const float *importance, unsigned seed_bits,
                                                    unsigned parent_bits, unsigned threads, unsigned char *out,
                                                    size_t out_size);

/* Adds a rows x cols PMPD_TENSOR_ANYPREC tensor whose bytes (a valid
 * header and layout, checked here) were made elsewhere, e.g. synthetic
 * weights for speed measurements.  Errors: those of pmpd_anyprec_view,
 * PMPD_ERR_OUT_OF_MEMORY. */
PMPD_INTERNAL pmpd_status pmpd_anyprec_build_add(pmpd_build_model *b, const char *name, uint64_t rows, uint64_t cols,
                                                 const void *bytes, uint64_t size);

#endif
#endif
