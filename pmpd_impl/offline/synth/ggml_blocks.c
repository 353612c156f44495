/* ggml's row encodings, byte for byte as ggml lays them out, so llama.cpp
 * reads the weights this generator meant.  Sizes come from the importer's
 * table of ggml types (import/ggml_types.c); the 256-weight super-block
 * encoders are in ggml_kblocks.c.
 *
 * Q8_0: per 32 weights an f16 scale d = amax / 127, then 32 int8 q with
 * q = round(x / d).  Q4_0: per 32 weights an f16 scale d = max / -8, where
 * max is the weight of largest magnitude with its sign (the first, on ties),
 * then 16 bytes: byte j holds q of weight j in its low nibble and of weight
 * j + 16 in its high one, q = min(15, (int)(x / d + 8.5)).  As in llama.cpp,
 * the division uses the f32 scale and the block stores it rounded to f16.
 *
 * The other encoders are this generator's own, chosen for simplicity, not
 * for quality (llama.cpp's search for the best scales is not reproduced):
 * each derives its levels from the block's range and rounds every weight to
 * the nearest level the stored (f16-rounded) scale gives.  Q5_0 is Q4_0
 * with 32 levels (d = max / -16); Q4_1 and Q5_1 spread 16 or 32 levels
 * from the minimum to the maximum; IQ4_NL maps the signed maximum to the
 * table's -127 and takes the nearest table entry.  BF16 rounds to nearest,
 * ties to even. */
#include "pmpd_impl/offline/synth/synth.h"

#include <math.h>
#include <string.h>

#include "pmpd_impl/format/le.h"
#include "pmpd_impl/offline/format/half.h"
#include "pmpd_impl/offline/import/ggml_types.h"

#define GGML_QK 32

/* IQ4_NL's fixed table of levels (ggml's kvalues_iq4nl). */
static const int8_t synth_iq4_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

PMPD_INTERNAL uint32_t pmpd_ggml_block_size(pmpd_ggml_type type)
{
    const pmpd_ggml_type_info *info = pmpd_ggml_type_find((uint32_t)type);
    return info ? info->block_elements : 1;
}

PMPD_INTERNAL uint64_t pmpd_ggml_row_bytes(pmpd_ggml_type type, uint64_t n)
{
    const pmpd_ggml_type_info *info = pmpd_ggml_type_find((uint32_t)type);
    return info ? n / info->block_elements * info->block_bytes : 4 * n;
}

/* Stores f as f16 and returns the value stored, which decoding will use. */
PMPD_INTERNAL float pmpd_ggml_put_half(unsigned char *p, float f)
{
    uint16_t h = pmpd_float_to_half(f);
    p[0] = (unsigned char)h;
    p[1] = (unsigned char)(h >> 8);
    return pmpd_half_to_float(h);
}

PMPD_INTERNAL int pmpd_ggml_nearest_iq4(float x)
{
    int best = 0, k;
    for (k = 1; k < 16; k++)
        if (fabsf(x - (float)synth_iq4_levels[k]) < fabsf(x - (float)synth_iq4_levels[best]))
            best = k;
    return best;
}

/* The weight of largest magnitude, with its sign (the first, on ties). */
PMPD_INTERNAL float pmpd_ggml_signed_max(const float *x, int n)
{
    float amax = 0.0f, max = 0.0f;
    int j;
    for (j = 0; j < n; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

/* round(x / step) clamped to lo..hi; a zero step gives 0 clamped, a NaN
 * quotient lo (never a float-to-int conversion out of range). */
PMPD_INTERNAL int pmpd_ggml_level(float x, float step, int lo, int hi)
{
    float q = step != 0.0f ? roundf(x / step) : 0.0f;
    return q > (float)hi ? hi : q >= (float)lo ? (int)q : lo;
}

static void ggml_q8_0_block(const float *x, unsigned char *out)
{
    float amax = 0.0f, d, inverse;
    int j;
    for (j = 0; j < GGML_QK; j++)
        amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    d = amax / 127.0f;
    inverse = d != 0.0f ? 1.0f / d : 0.0f;
    pmpd_ggml_put_half(out, d);
    for (j = 0; j < GGML_QK; j++)
        out[2 + j] = (unsigned char)(int8_t)roundf(x[j] * inverse);
}

static void ggml_q4_0_block(const float *x, unsigned char *out)
{
    float d = pmpd_ggml_signed_max(x, GGML_QK) / -8.0f, inverse;
    int j;
    inverse = d != 0.0f ? 1.0f / d : 0.0f;
    pmpd_ggml_put_half(out, d);
    for (j = 0; j < GGML_QK / 2; j++) {
        int lo = (int)(x[j] * inverse + 8.5f), hi = (int)(x[j + GGML_QK / 2] * inverse + 8.5f);
        out[2 + j] = (unsigned char)((lo < 15 ? lo : 15) | ((hi < 15 ? hi : 15) << 4));
    }
}

/* Packs 32 values of 4 or 5 bits: nibbles at `nibbles` (weight j low, j + 16
 * high), fifth bits (if high_bits) as a little-endian u32, bit j for weight j. */
static void ggml_pack_32(const int *q, unsigned char *nibbles, unsigned char *high_bits)
{
    uint32_t bits = 0;
    int j;
    for (j = 0; j < GGML_QK / 2; j++)
        nibbles[j] = (unsigned char)((q[j] & 0x0F) | (q[j + 16] & 0x0F) << 4);
    for (j = 0; j < GGML_QK; j++)
        bits |= (uint32_t)((q[j] >> 4) & 1) << j;
    if (high_bits)
        pmpd_le_put_u32(high_bits, bits);
}

/* Q5_0: signed levels -16..15 of d = max / -16, stored as q + 16. */
static void ggml_q5_0_block(const float *x, unsigned char *out)
{
    int q[GGML_QK], j;
    float d = pmpd_ggml_put_half(out, pmpd_ggml_signed_max(x, GGML_QK) / -16.0f);
    for (j = 0; j < GGML_QK; j++)
        q[j] = pmpd_ggml_level(x[j], d, -16, 15) + 16;
    ggml_pack_32(q, out + 6, out + 2);
}

/* Q4_1 (levels 15) and Q5_1 (31): x = d q + m, m the block's minimum. */
static void ggml_affine_block(const float *x, int levels, unsigned char *out)
{
    float lo = x[0], hi = x[0], d, m;
    int q[GGML_QK], j;
    for (j = 1; j < GGML_QK; j++) {
        lo = x[j] < lo ? x[j] : lo;
        hi = x[j] > hi ? x[j] : hi;
    }
    d = pmpd_ggml_put_half(out, (hi - lo) / (float)levels);
    m = pmpd_ggml_put_half(out + 2, lo);
    for (j = 0; j < GGML_QK; j++)
        q[j] = pmpd_ggml_level(x[j] - m, d, 0, levels);
    if (levels == 15)
        ggml_pack_32(q, out + 4, NULL);
    else
        ggml_pack_32(q, out + 8, out + 4);
}

static void ggml_q4_1_block(const float *x, unsigned char *out)
{
    ggml_affine_block(x, 15, out);
}

static void ggml_q5_1_block(const float *x, unsigned char *out)
{
    ggml_affine_block(x, 31, out);
}

static void ggml_iq4_nl_block(const float *x, unsigned char *out)
{
    float d = pmpd_ggml_put_half(out, pmpd_ggml_signed_max(x, GGML_QK) / -127.0f);
    int q[GGML_QK], j;
    for (j = 0; j < GGML_QK; j++)
        q[j] = pmpd_ggml_nearest_iq4(d != 0.0f ? x[j] / d : 0.0f);
    ggml_pack_32(q, out + 2, NULL);
}

static void ggml_bf16(float x, unsigned char *out)
{
    uint32_t bits;
    uint16_t h;
    memcpy(&bits, &x, sizeof bits);
    if ((bits & 0x7FFFFFFFu) > 0x7F800000u)
        h = (uint16_t)((bits >> 16) | 0x40); /* NaN stays NaN (quiet) */
    else
        h = (uint16_t)((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
    out[0] = (unsigned char)h;
    out[1] = (unsigned char)(h >> 8);
}

typedef void (*ggml_encode_fn)(const float *x, unsigned char *out);

static ggml_encode_fn ggml_block_encoder(pmpd_ggml_type type)
{
    switch (type) {
    case PMPD_GGML_Q8_0: return ggml_q8_0_block;
    case PMPD_GGML_Q4_0: return ggml_q4_0_block;
    case PMPD_GGML_Q5_0: return ggml_q5_0_block;
    case PMPD_GGML_Q4_1: return ggml_q4_1_block;
    case PMPD_GGML_Q5_1: return ggml_q5_1_block;
    case PMPD_GGML_IQ4_NL: return ggml_iq4_nl_block;
    case PMPD_GGML_Q4_K: return pmpd_ggml_q4_k_block;
    case PMPD_GGML_Q5_K: return pmpd_ggml_q5_k_block;
    case PMPD_GGML_Q6_K: return pmpd_ggml_q6_k_block;
    case PMPD_GGML_IQ4_XS: return pmpd_ggml_iq4_xs_block;
    default: return NULL;
    }
}

PMPD_INTERNAL void pmpd_ggml_encode_row(pmpd_ggml_type type, const float *x, size_t n, unsigned char *out)
{
    ggml_encode_fn encode = ggml_block_encoder(type);
    size_t i, block = pmpd_ggml_block_size(type), bytes = (size_t)pmpd_ggml_row_bytes(type, block);
    if (encode) {
        for (i = 0; i < n; i += block)
            encode(x + i, out + i / block * bytes);
        return;
    }
    for (i = 0; i < n; i++) {
        if (type == PMPD_GGML_F16)
            pmpd_ggml_put_half(out + 2 * i, x[i]);
        else if (type == PMPD_GGML_BF16)
            ggml_bf16(x[i], out + 2 * i);
        else
            pmpd_le_put_f32(out + 4 * i, x[i]);
    }
}

#undef GGML_QK
