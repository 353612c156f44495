#include "pmpd_impl/offline/palette/groups.h"

#include <stdio.h>
#include <stdlib.h>

/* The GGUF names the importers give a layer's matrices, by group. */
static const char *const palette_members[PMPD_PALETTE_GROUP_KINDS][PMPD_PALETTE_GROUP_MAX_TENSORS] = {
    {"attn_q", "attn_k", "attn_v"},
    {"attn_output", NULL, NULL},
    {"ffn_gate", "ffn_up", NULL},
    {"ffn_down", NULL, NULL},
};

PMPD_INTERNAL const char *pmpd_palette_group_name(uint32_t kind)
{
    static const char *const names[PMPD_PALETTE_GROUP_KINDS] = {"qkv", "attn_output", "gate_up", "down"};
    return kind < PMPD_PALETTE_GROUP_KINDS ? names[kind] : "?";
}

PMPD_INTERNAL pmpd_status pmpd_palette_groups(const pmpd_build_model *b, pmpd_palette_group **groups,
                                              uint32_t *n_groups)
{
    uint32_t layer, kind, m, n = 0;
    pmpd_palette_group *out;
    *groups = NULL;
    *n_groups = 0;
    out = (pmpd_palette_group *)calloc((size_t)b->info.n_layers * PMPD_PALETTE_GROUP_KINDS + 1, sizeof *out);
    if (!out)
        return PMPD_ERR_OUT_OF_MEMORY;
    for (layer = 0; layer < b->info.n_layers; layer++) {
        for (kind = 0; kind < PMPD_PALETTE_GROUP_KINDS; kind++) {
            pmpd_palette_group *g = &out[n];
            g->layer = layer;
            g->kind = kind;
            for (m = 0; m < PMPD_PALETTE_GROUP_MAX_TENSORS && palette_members[kind][m]; m++) {
                char name[PMPD_TENSOR_NAME_MAX + 1];
                const pmpd_build_tensor *t;
                snprintf(name, sizeof name, "blk.%u.%s.weight", (unsigned)layer, palette_members[kind][m]);
                t = pmpd_build_find(b, name);
                if (!t)
                    continue;
                if (t->n_dims != 2 || t->type != PMPD_TENSOR_F32) {
                    free(out);
                    return PMPD_ERR_INVALID_ARGUMENT;
                }
                g->tensors[g->n_tensors++] = (uint32_t)(t - b->tensors);
                g->weights += t->dims[0] * t->dims[1];
            }
            n += g->n_tensors > 0;
        }
    }
    if (n == 0) {
        free(out);
        return PMPD_ERR_FORMAT_MISSING;
    }
    *groups = out;
    *n_groups = n;
    return PMPD_OK;
}
