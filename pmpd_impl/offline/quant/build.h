/* Converting a model under construction to group-quantized weights. */
#ifndef PMPD_OFFLINE_QUANT_BUILD_H
#define PMPD_OFFLINE_QUANT_BUILD_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/offline/format/builder.h"

#if PMPD_OFFLINE

/* 1 for the token embedding and the classifier (token_embd.weight,
 * output.weight): q8 in every group-quantized model, see below. */
PMPD_INTERNAL int pmpd_quant_build_is_vocabulary(const pmpd_build_tensor *t);

/* Replaces every 2-D f32 tensor of b by a tensor of type (q8, q4 or q2cb),
 * except the token embedding and the classifier, which become q8: they are
 * looked up row by row and their errors reach every logit, and q8 keeps
 * them nearly exact at a quarter of f32.  threads: as pmpd_quant_matrix's
 * (q2cb quantizes on that many; 0 one per core).  progress (may be NULL) is
 * called with tensors done and total.  Errors: PMPD_ERR_INVALID_ARGUMENT
 * (type), PMPD_ERR_OVERFLOW, PMPD_ERR_OUT_OF_MEMORY. */
PMPD_INTERNAL pmpd_status pmpd_quant_build_convert(pmpd_build_model *b, uint32_t type, unsigned threads,
                                                   void (*progress)(void *context, uint64_t done, uint64_t total),
                                                   void *context);

/* The same where only the token embedding and classifier are left in f32
 * (the layers already in another format): they become type (q8 or q4). */
PMPD_INTERNAL pmpd_status pmpd_quant_build_convert_vocabulary(pmpd_build_model *b, uint32_t type);

#endif

#endif
