/* Fusable groups of a Llama layer for the bit allocation (seed 002): the
 * matrices that read one input share a format, so the runtime converts
 * that input once for all of them (model/linear.c's prepare/rows pairs):
 * {q, k, v}, {gate, up}, then the output projection and the down
 * projection on their own.  Every group gets one format. */
#ifndef PMPD_OFFLINE_PALETTE_GROUPS_H
#define PMPD_OFFLINE_PALETTE_GROUPS_H

#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/offline/format/builder.h"

#if PMPD_OFFLINE

#define PMPD_PALETTE_GROUP_QKV 0u     /* attn_q, attn_k, attn_v */
#define PMPD_PALETTE_GROUP_OUTPUT 1u  /* attn_output */
#define PMPD_PALETTE_GROUP_GATE_UP 2u /* ffn_gate, ffn_up */
#define PMPD_PALETTE_GROUP_DOWN 3u    /* ffn_down */
#define PMPD_PALETTE_GROUP_KINDS 4u
#define PMPD_PALETTE_GROUP_MAX_TENSORS 3u

typedef struct pmpd_palette_group {
    uint32_t layer, kind;
    uint32_t n_tensors;
    uint32_t tensors[PMPD_PALETTE_GROUP_MAX_TENSORS]; /* indices into the model's tensors */
    uint64_t weights;                                 /* elements of those matrices */
} pmpd_palette_group;

/* "qkv", "attn_output", "gate_up", "down". */
PMPD_INTERNAL const char *pmpd_palette_group_name(uint32_t kind);

/* The groups of b, layer by layer in the order above (a malloc'ed array in
 * *groups, *n_groups of them).  Every matrix of a group must be a 2-D f32
 * tensor; a layer's matrix that is missing leaves its group smaller (a
 * group with none is left out).  Errors: PMPD_ERR_FORMAT_MISSING (no
 * group at all: not a Llama layer layout), PMPD_ERR_INVALID_ARGUMENT (a
 * matrix that is not f32), PMPD_ERR_OUT_OF_MEMORY. */
PMPD_INTERNAL pmpd_status pmpd_palette_groups(const pmpd_build_model *b, pmpd_palette_group **groups,
                                              uint32_t *n_groups);

#endif
#endif
