/* Which optional tensors of a GGUF Llama-family model pmpd applies, as
 * container feature bits: Q/K/V biases (Qwen2; llama.cpp also reads them in
 * llama files) and Llama 3.1's rope_freqs.weight.  A bias pmpd has no place
 * for (attention output, feed-forward, classifier) or a fused QKV matrix is
 * refused by name rather than dropped, which would change the outputs. */
#include "pmpd_impl/offline/import/import.h"

#include <stdio.h>
#include <string.h>

#include "pmpd_impl/core/error.h"

#if PMPD_OFFLINE

static const char *const arch_qkv[] = {"attn_q", "attn_k", "attn_v"};

/* 1 if name is blk.<n>.<one of arch_qkv>.bias. */
static int arch_is_qkv_bias(const char *name)
{
    unsigned layer;
    char part[16], rest[8];
    size_t i;
    if (sscanf(name, "blk.%u.%15[a-z_].%7s", &layer, part, rest) != 3 || strcmp(rest, "bias") != 0)
        return 0;
    for (i = 0; i < sizeof arch_qkv / sizeof arch_qkv[0]; i++)
        if (strcmp(part, arch_qkv[i]) == 0)
            return 1;
    return 0;
}

static int arch_ends_with(const char *name, const char *suffix)
{
    size_t n = strlen(name), k = strlen(suffix);
    return n >= k && strcmp(name + n - k, suffix) == 0;
}

PMPD_INTERNAL pmpd_status pmpd_import_gguf_features(pmpd_build_model *b, uint32_t rope_style, pmpd_error *err)
{
    uint32_t i, l, biases = 0;
    size_t k;
    for (i = 0; i < b->n_tensors; i++) {
        const char *name = b->tensors[i].name;
        if (arch_is_qkv_bias(name))
            biases++;
        else if (arch_ends_with(name, ".bias") || strstr(name, "attn_qkv") != NULL)
            return pmpd_error_set(err, PMPD_ERR_UNSUPPORTED, PMPD_NO_OFFSET,
                                  "GGUF tensor %s is not supported (pmpd applies only Q, K and V biases)", name);
    }
    if (pmpd_build_find(b, "rope_freqs.weight")) {
        /* llama.cpp applies the factors to llama only; taking them for a
         * NeoX-style model would make pmpd disagree with it. */
        if (rope_style != PMPD_ROPE_ADJACENT)
            return pmpd_error_set(err, PMPD_ERR_UNSUPPORTED, PMPD_NO_OFFSET,
                                  "GGUF rope_freqs.weight in a qwen2 model is not supported");
        b->info.features |= PMPD_MODEL_ROPE_FREQS;
    }
    if (biases == 0)
        return PMPD_OK;
    /* All three in every layer or none: the forward pass has no per-layer case. */
    for (l = 0; l < b->info.n_layers; l++) {
        for (k = 0; k < sizeof arch_qkv / sizeof arch_qkv[0]; k++) {
            char name[PMPD_TENSOR_NAME_MAX + 1];
            snprintf(name, sizeof name, "blk.%u.%s.bias", (unsigned)l, arch_qkv[k]);
            if (!pmpd_build_find(b, name))
                return pmpd_error_set(err, PMPD_ERR_FORMAT_MISSING, PMPD_NO_OFFSET,
                                      "GGUF has %u Q/K/V bias tensors but not %s: each layer needs all three",
                                      (unsigned)biases, name);
        }
    }
    if (biases != 3 * b->info.n_layers)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, PMPD_NO_OFFSET,
                              "GGUF has %u Q/K/V bias tensors for %u layers", (unsigned)biases,
                              (unsigned)b->info.n_layers);
    b->info.features |= PMPD_MODEL_QKV_BIAS;
    return PMPD_OK;
}

#endif /* PMPD_OFFLINE */
