/* Which ggml type each matrix of a synthetic model gets: the requested one
 * throughout, or, for the Q4_K_M mix, llama.cpp's rule for Llama models
 * (llama-quant.cpp): Q6_K where a few more bits pay most -- the classifier,
 * and attn_v and ffn_down in the first and last eighth of the layers and
 * every third layer between -- Q4_K elsewhere.  (llama.cpp also bumps attn_v
 * for 70B and eight-expert models; no synthetic shape is either.) */
#include "pmpd_impl/offline/synth/synth.h"

#include <string.h>

#include "pmpd_impl/offline/import/ggml_types.h"

/* llama.cpp's "use more bits" layers. */
static int synth_more_bits(uint32_t layer, uint32_t n_layers)
{
    return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || ((int)layer - (int)(n_layers / 8)) % 3 == 2;
}

static int synth_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

PMPD_INTERNAL pmpd_ggml_type pmpd_synth_matrix_type(pmpd_ggml_type requested, const char *name, uint32_t layer,
                                                    uint32_t n_layers, int tied)
{
    if (requested != PMPD_GGML_MIX_Q4_K_M)
        return requested;
    if (strcmp(name, "output.weight") == 0 || (tied && strcmp(name, "token_embd.weight") == 0))
        return PMPD_GGML_Q6_K;
    if ((synth_ends_with(name, ".attn_v.weight") || synth_ends_with(name, ".ffn_down.weight")) &&
        synth_more_bits(layer, n_layers))
        return PMPD_GGML_Q6_K;
    return PMPD_GGML_Q4_K;
}

PMPD_INTERNAL const char *pmpd_synth_type_name(pmpd_ggml_type type)
{
    static const pmpd_ggml_type writable[] = {
        PMPD_GGML_F32,  PMPD_GGML_F16,  PMPD_GGML_BF16, PMPD_GGML_Q4_0,   PMPD_GGML_Q4_1,
        PMPD_GGML_Q5_0, PMPD_GGML_Q5_1, PMPD_GGML_Q8_0, PMPD_GGML_Q4_K,   PMPD_GGML_Q5_K,
        PMPD_GGML_Q6_K, PMPD_GGML_IQ4_NL, PMPD_GGML_IQ4_XS,
    };
    size_t i;
    if (type == PMPD_GGML_MIX_Q4_K_M)
        return "Q4_K_M";
    for (i = 0; i < sizeof writable / sizeof writable[0]; i++)
        if (writable[i] == type)
            return pmpd_ggml_type_find((uint32_t)type)->name;
    return NULL;
}
