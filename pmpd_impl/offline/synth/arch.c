/* The architecture variants of the synthetic GGUF: llama or qwen2, a head
 * width other than dim / n_heads, rope base, norm epsilon, weight spread,
 * and Llama 3.1's rope frequency factors.  Kept apart from the shape and
 * type code so each variant is one place. */
#include "pmpd_impl/offline/synth/synth.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pmpd_impl/core/error.h"
#include "pmpd_impl/format/container.h"

#define SYNTH_ROPE_BASE 10000.0f
#define SYNTH_RMS_EPS 1e-5f

PMPD_INTERNAL const char *pmpd_synth_arch(const pmpd_synth_options *o)
{
    return o->arch ? o->arch : "llama";
}

PMPD_INTERNAL uint32_t pmpd_synth_head_dim(const pmpd_synth_options *o)
{
    return o->head_dim ? o->head_dim : o->dim / o->n_heads;
}

PMPD_INTERNAL float pmpd_synth_rope_theta(const pmpd_synth_options *o)
{
    return o->rope_theta > 0.0f ? o->rope_theta : SYNTH_ROPE_BASE;
}

PMPD_INTERNAL float pmpd_synth_norm_eps(const pmpd_synth_options *o)
{
    return o->norm_eps > 0.0f ? o->norm_eps : SYNTH_RMS_EPS;
}

PMPD_INTERNAL float pmpd_synth_std(const pmpd_synth_options *o)
{
    return o->weight_std > 0.0f ? o->weight_std : PMPD_SYNTH_STD;
}

PMPD_INTERNAL int pmpd_synth_has_biases(const pmpd_synth_options *o)
{
    return strcmp(pmpd_synth_arch(o), "qwen2") == 0;
}

PMPD_INTERNAL pmpd_status pmpd_synth_arch_check(const pmpd_synth_options *o, pmpd_error *err)
{
    const char *arch = pmpd_synth_arch(o);
    uint32_t head_dim;
    if (strcmp(arch, "llama") != 0 && strcmp(arch, "qwen2") != 0)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                              "architecture \"%s\" is not llama or qwen2", arch);
    if (o->rope_freqs && strcmp(arch, "llama") != 0)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                              "rope frequency factors are a llama feature (llama.cpp ignores them for %s)", arch);
    if (o->n_heads == 0)
        return PMPD_OK; /* the shape check names it */
    head_dim = pmpd_synth_head_dim(o);
    if (o->head_dim != 0 && (o->head_dim % 2 != 0 || (uint64_t)o->head_dim * o->n_heads > PMPD_MAX_HPARAM))
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                              "head-dim %u must be even with heads x head-dim up to %u", (unsigned)o->head_dim,
                              PMPD_MAX_HPARAM);
    if (o->head_dim != 0 && o->head_dim * o->n_heads != o->dim && strcmp(arch, "llama") != 0)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                              "%s needs heads x head-dim = dim (llama.cpp's %s output projection is dim x dim)",
                              arch, arch);
    if ((uint64_t)head_dim * o->n_heads % pmpd_ggml_block_size(o->type) != 0)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                              "heads x head-dim %llu is not a whole number of %u-weight blocks",
                              (unsigned long long)head_dim * o->n_heads, (unsigned)pmpd_ggml_block_size(o->type));
    if (!(pmpd_synth_rope_theta(o) > 1.0f) || !(pmpd_synth_rope_theta(o) < 1e30f))
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET, "rope theta %g is not in (1, 1e30)",
                              (double)o->rope_theta);
    if (!(pmpd_synth_norm_eps(o) < 1.0f))
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET, "norm eps %g is not in (0, 1)",
                              (double)o->norm_eps);
    if (!(pmpd_synth_std(o) < 1e6f))
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET, "std %g is not in (0, 1e6)",
                              (double)o->weight_std);
    return PMPD_OK;
}

PMPD_INTERNAL void pmpd_synth_arch_metadata(pmpd_gguf_out *out, const pmpd_synth_options *o)
{
    char key[96];
    const char *arch = pmpd_synth_arch(o);
    uint32_t head_dim = pmpd_synth_head_dim(o);
    if (o->head_dim != 0 && (uint64_t)o->head_dim * o->n_heads != o->dim) {
        snprintf(key, sizeof key, "%s.attention.key_length", arch);
        pmpd_gguf_kv_u32(out, key, head_dim);
        snprintf(key, sizeof key, "%s.attention.value_length", arch);
        pmpd_gguf_kv_u32(out, key, head_dim);
    }
    snprintf(key, sizeof key, "%s.rope.dimension_count", arch);
    pmpd_gguf_kv_u32(out, key, head_dim);
    snprintf(key, sizeof key, "%s.rope.freq_base", arch);
    pmpd_gguf_kv_f32(out, key, pmpd_synth_rope_theta(o));
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch);
    pmpd_gguf_kv_f32(out, key, pmpd_synth_norm_eps(o));
}

PMPD_INTERNAL void pmpd_synth_rope_factors(const pmpd_synth_options *o, float *out)
{
    /* Llama 3.1's published rope_scaling (factor 8, low_freq_factor 1,
     * high_freq_factor 4, original context 8192), turned into per-pair
     * divisors the way llama.cpp's converter does: long wavelengths are
     * slowed by the factor, short ones kept, the band between blended. */
    const double pi = 3.14159265358979323846, factor = 8.0, low = 1.0, high = 4.0, old_context = 8192.0;
    double base = pmpd_synth_rope_theta(o);
    uint32_t i, head_dim = pmpd_synth_head_dim(o);
    for (i = 0; i < head_dim / 2; i++) {
        double freq = 1.0 / pow(base, (double)(2 * i) / (double)head_dim), wavelength = 2.0 * pi / freq;
        if (wavelength < old_context / high) {
            out[i] = 1.0f;
        } else if (wavelength > old_context / low) {
            out[i] = (float)factor;
        } else {
            double smooth = (old_context / wavelength - low) / (high - low);
            out[i] = (float)(1.0 / ((1.0 - smooth) / factor + smooth));
        }
    }
}

#undef SYNTH_ROPE_BASE
#undef SYNTH_RMS_EPS
