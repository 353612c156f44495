/* Encoders of ggml's 256-weight super-blocks (Q4_K, Q5_K, Q6_K, IQ4_XS),
 * laid out as ggml's decoders read them (see import/ggml_types.c for the
 * layouts).  The scales come from each group's range, not from llama.cpp's
 * error-minimising search: the point is a file llama.cpp reads as meant,
 * not the best quantization.  Every weight is rounded to the nearest level
 * of the scales as stored (f16 super-scales, integer group scales), so
 * the error stays within a step of the group, which the tests check. */
#include "pmpd_impl/offline/synth/synth.h"

#include <math.h>
#include <string.h>

#define KBLOCK_WEIGHTS 256

/* Stores group g's 6-bit scale and min where ggml's Q4_K/Q5_K decoder
 * looks: groups 0-3 in the low 6 bits of bytes g and g + 4; groups 4-7 in
 * the nibbles of byte g + 4 with their high two bits on top of bytes g - 4
 * (scale) and g (min). */
static void kblock_put_scale_min(unsigned char *s, int g, unsigned scale, unsigned min)
{
    if (g < 4) {
        s[g] = (unsigned char)(s[g] | scale);
        s[g + 4] = (unsigned char)(s[g + 4] | min);
    } else {
        s[g + 4] = (unsigned char)((scale & 0x0F) | (min & 0x0F) << 4);
        s[g - 4] = (unsigned char)(s[g - 4] | (scale >> 4) << 6);
        s[g] = (unsigned char)(s[g] | (min >> 4) << 6);
    }
}

/* Q4_K (levels 15) and Q5_K (31): weight = (d scale) q - (dmin min) per
 * 32-weight group, the group's minimum (at most 0) at q = 0. */
static void kblock_affine(const float *x, int levels, unsigned char *out)
{
    float ranges[8], mins[8], max_range = 0.0f, max_min = 0.0f, d, dmin;
    unsigned char *scales = out + 4, *high = levels == 31 ? out + 16 : NULL;
    unsigned char *nibbles = levels == 31 ? out + 48 : out + 16;
    int g, l;
    for (g = 0; g < 8; g++) {
        float lo = 0.0f, hi = x[32 * g];
        for (l = 0; l < 32; l++) {
            lo = x[32 * g + l] < lo ? x[32 * g + l] : lo;
            hi = x[32 * g + l] > hi ? x[32 * g + l] : hi;
        }
        ranges[g] = (hi - lo) / (float)levels;
        mins[g] = -lo;
        max_range = ranges[g] > max_range ? ranges[g] : max_range;
        max_min = mins[g] > max_min ? mins[g] : max_min;
    }
    memset(out + 4, 0, (size_t)(levels == 31 ? 176 : 144) - 4);
    d = pmpd_ggml_put_half(out, max_range / 63.0f);
    dmin = pmpd_ggml_put_half(out + 2, max_min / 63.0f);
    for (g = 0; g < 8; g++) {
        int scale = pmpd_ggml_level(ranges[g], d, 0, 63), min = pmpd_ggml_level(mins[g], dmin, 0, 63);
        float group_d = d * (float)scale, group_m = dmin * (float)min;
        kblock_put_scale_min(scales, g, (unsigned)scale, (unsigned)min);
        for (l = 0; l < 32; l++) {
            int q = pmpd_ggml_level(x[32 * g + l] + group_m, group_d, 0, levels);
            unsigned char *byte = &nibbles[32 * (g / 2) + l];
            *byte = (unsigned char)(*byte | (g % 2 ? (q & 0x0F) << 4 : q & 0x0F));
            if (high && q > 15)
                high[l] = (unsigned char)(high[l] | 1u << g);
        }
    }
}

PMPD_INTERNAL void pmpd_ggml_q4_k_block(const float *x, unsigned char *out)
{
    kblock_affine(x, 15, out);
}

PMPD_INTERNAL void pmpd_ggml_q5_k_block(const float *x, unsigned char *out)
{
    kblock_affine(x, 31, out);
}

/* Q6_K: per 16 weights an int8 scale of d, levels -32..31 stored as q + 32
 * (the group's signed maximum at -32). */
PMPD_INTERNAL void pmpd_ggml_q6_k_block(const float *x, unsigned char *out)
{
    float group_scale[16], max = 0.0f, d;
    int s, i;
    for (s = 0; s < 16; s++) {
        group_scale[s] = pmpd_ggml_signed_max(x + 16 * s, 16) / -32.0f;
        max = fabsf(group_scale[s]) > max ? fabsf(group_scale[s]) : max;
    }
    memset(out, 0, 208);
    d = pmpd_ggml_put_half(out + 208, max / 127.0f);
    for (s = 0; s < 16; s++)
        out[192 + s] = (unsigned char)(int8_t)pmpd_ggml_level(group_scale[s], d, -128, 127);
    for (i = 0; i < KBLOCK_WEIGHTS; i++) {
        int half = i / 128, k = i % 128 / 32, l = i % 32;
        float group_d = d * (float)(int8_t)out[192 + i / 16];
        int q = pmpd_ggml_level(x[i], group_d, -32, 31) + 32;
        unsigned char *low = &out[64 * half + l + 32 * (k % 2)];
        *low = (unsigned char)(*low | (k < 2 ? q & 0x0F : (q & 0x0F) << 4));
        out[128 + 32 * half + l] = (unsigned char)(out[128 + 32 * half + l] | (q >> 4) << (2 * k));
    }
}

/* IQ4_XS: IQ4_NL's table per 32 weights under a 6-bit signed group scale
 * (stored + 32) of the f16 d. */
PMPD_INTERNAL void pmpd_ggml_iq4_xs_block(const float *x, unsigned char *out)
{
    float group_scale[8], max = 0.0f, d;
    unsigned scales_high = 0;
    int g, j;
    for (g = 0; g < 8; g++) {
        group_scale[g] = pmpd_ggml_signed_max(x + 32 * g, 32) / -127.0f;
        max = fabsf(group_scale[g]) > max ? fabsf(group_scale[g]) : max;
    }
    memset(out + 2, 0, 134);
    d = pmpd_ggml_put_half(out, max / 31.0f);
    for (g = 0; g < 8; g++) {
        int stored = pmpd_ggml_level(group_scale[g], d, -32, 31) + 32;
        float group_d = d * (float)(stored - 32);
        unsigned char *q = out + 8 + 16 * g;
        out[4 + g / 2] = (unsigned char)(out[4 + g / 2] | (stored & 0x0F) << (4 * (g % 2)));
        scales_high |= (unsigned)(stored >> 4) << (2 * g);
        for (j = 0; j < 16; j++) {
            int lo = pmpd_ggml_nearest_iq4(group_d != 0.0f ? x[32 * g + j] / group_d : 0.0f);
            int hi = pmpd_ggml_nearest_iq4(group_d != 0.0f ? x[32 * g + j + 16] / group_d : 0.0f);
            q[j] = (unsigned char)(lo | hi << 4);
        }
    }
    out[2] = (unsigned char)scales_high;
    out[3] = (unsigned char)(scales_high >> 8);
}

#undef KBLOCK_WEIGHTS
