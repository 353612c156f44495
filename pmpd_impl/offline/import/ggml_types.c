/* ggml's block formats and their decoding to floats.
 *
 * Each decoder gives the floats ggml's reference dequantization gives, bit
 * for bit: the f16 fields widen exactly, integers become floats before
 * they meet a scale, and products and sums are formed in ggml's order,
 * one rounding each.  A product and the sum after it are written as two
 * statements so no compiler fuses them into one fused multiply-add (C
 * allows that within one expression; ggml's reference rounds twice).
 *
 * Layouts (all little-endian; "d" an f16 scale, 256-weight super-blocks
 * for the K and XS types):
 *   Q4_0   d, 16 bytes: byte j = weight j (low nibble), j + 16 (high); w = d (q - 8)
 *   Q4_1   d, m, the same nibbles;                               w = d q + m
 *   Q5_0   d, u32 of fifth bits (bit j of weight j), nibbles as Q4_0; w = d (q - 16)
 *   Q5_1   d, m, fifth bits, nibbles;                            w = d q + m
 *   Q8_0   d, 32 int8;                                           w = d q
 *   IQ4_NL d, nibbles as Q4_0 indexing a 16-entry table;         w = d table[q]
 *   Q4_K   d, dmin, 12 bytes of eight 6-bit (scale, min) pairs, 128 bytes of
 *          nibbles: 64 weights per 32 bytes, low nibbles first;
 *          w = (d scale) q - (dmin min) per 32 weights
 *   Q5_K   as Q4_K plus 32 bytes of fifth bits: weight l of the s-th
 *          32-weight group has bit s of byte l
 *   Q6_K   128 bytes of low nibbles, 64 bytes of high bit pairs, 16 int8
 *          scales (one per 16 weights), d; w = (d scale) (q - 32)
 *   IQ4_XS d, u16 of high scale bits (2 per 32 weights), 4 bytes of low
 *          scale nibbles, then per 32 weights 16 bytes of nibbles as IQ4_NL;
 *          w = (d (scale - 32)) table[q]
 *   BF16   the top 16 bits of an f32.
 *
 * No scale field needs checking: every bit pattern of the K-quant and
 * IQ4_XS scale fields (6-bit scales and mins, int8 Q6_K scales, 6-bit
 * IQ4_XS scales) is a valid scale, and the table index is 4 bits wide.
 * Only the f16 super-block scales can be infinite or NaN; those reach the
 * builder as non-finite floats like any other tensor value. */
#include "pmpd_impl/offline/import/ggml_types.h"

#include <string.h>

#include "pmpd.h"
#include "pmpd_impl/format/le.h"
#include "pmpd_impl/offline/format/half.h"

#define GGML_SUPER 256

/* The 16 values IQ4_NL and IQ4_XS index: a non-uniform 4-bit grid. */
static const int8_t ggml_iq4_grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static float ggml_half_at(const unsigned char *p)
{
    return pmpd_half_to_float(pmpd_le_u16(p));
}

static void ggml_decode_f32(const unsigned char *b, float *out)
{
    out[0] = pmpd_le_f32(b);
}

static void ggml_decode_f16(const unsigned char *b, float *out)
{
    out[0] = ggml_half_at(b);
}

static void ggml_decode_bf16(const unsigned char *b, float *out)
{
    uint32_t bits = (uint32_t)pmpd_le_u16(b) << 16;
    memcpy(out, &bits, sizeof bits);
}

static void ggml_decode_q4_0(const unsigned char *b, float *out)
{
    float d = ggml_half_at(b);
    int j;
    for (j = 0; j < 16; j++) {
        out[j] = (float)((b[2 + j] & 0x0F) - 8) * d;
        out[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
    }
}

static void ggml_decode_q4_1(const unsigned char *b, float *out)
{
    float d = ggml_half_at(b), m = ggml_half_at(b + 2);
    int j;
    for (j = 0; j < 16; j++) {
        float low = (float)(b[4 + j] & 0x0F) * d, high = (float)(b[4 + j] >> 4) * d;
        out[j] = low + m;
        out[j + 16] = high + m;
    }
}

/* The 5-bit value of weight j (0..31) of a Q5 block: a nibble and a bit of qh. */
static int ggml_q5_value(const unsigned char *nibbles, uint32_t qh, int j)
{
    int nibble = j < 16 ? nibbles[j] & 0x0F : nibbles[j - 16] >> 4;
    return nibble | (int)((qh >> j) & 1u) << 4;
}

static void ggml_decode_q5_0(const unsigned char *b, float *out)
{
    float d = ggml_half_at(b);
    uint32_t qh = pmpd_le_u32(b + 2);
    int j;
    for (j = 0; j < 32; j++)
        out[j] = (float)(ggml_q5_value(b + 6, qh, j) - 16) * d;
}

static void ggml_decode_q5_1(const unsigned char *b, float *out)
{
    float d = ggml_half_at(b), m = ggml_half_at(b + 2);
    uint32_t qh = pmpd_le_u32(b + 4);
    int j;
    for (j = 0; j < 32; j++) {
        float scaled = (float)ggml_q5_value(b + 8, qh, j) * d;
        out[j] = scaled + m;
    }
}

static void ggml_decode_q8_0(const unsigned char *b, float *out)
{
    float d = ggml_half_at(b);
    int j;
    for (j = 0; j < 32; j++)
        out[j] = (float)(int8_t)b[2 + j] * d;
}

static void ggml_decode_iq4_nl(const unsigned char *b, float *out)
{
    float d = ggml_half_at(b);
    int j;
    for (j = 0; j < 16; j++) {
        out[j] = d * (float)ggml_iq4_grid[b[2 + j] & 0x0F];
        out[j + 16] = d * (float)ggml_iq4_grid[b[2 + j] >> 4];
    }
}

/* Scale and min of 32-weight group g (0..7) of a Q4_K/Q5_K block: groups
 * 0-3 keep theirs in the low 6 bits of bytes g and g + 4; groups 4-7 in
 * the nibbles of byte g + 4, topped by the two high bits of bytes g - 4
 * (scale) and g (min). */
static void ggml_k_scale_min(const unsigned char *s, int g, unsigned *scale, unsigned *min)
{
    if (g < 4) {
        *scale = s[g] & 63u;
        *min = s[g + 4] & 63u;
    } else {
        *scale = (s[g + 4] & 0x0Fu) | (unsigned)(s[g - 4] >> 6) << 4;
        *min = (unsigned)(s[g + 4] >> 4) | (unsigned)(s[g] >> 6) << 4;
    }
}

/* Q4_K (high_bits NULL) and Q5_K share everything but the fifth bit. */
static void ggml_decode_k4_k5(float d, float dmin, const unsigned char *scales, const unsigned char *high_bits,
                              const unsigned char *nibbles, float *out)
{
    int g, l;
    for (g = 0; g < 8; g++) {
        const unsigned char *q = nibbles + 32 * (g / 2);
        unsigned scale, min;
        float group_d, group_m;
        ggml_k_scale_min(scales, g, &scale, &min);
        group_d = d * (float)scale;
        group_m = dmin * (float)min;
        for (l = 0; l < 32; l++) {
            int value = g % 2 ? q[l] >> 4 : q[l] & 0x0F;
            float scaled;
            if (high_bits && (high_bits[l] >> g & 1))
                value += 16;
            scaled = group_d * (float)value;
            out[32 * g + l] = scaled - group_m;
        }
    }
}

static void ggml_decode_q4_k(const unsigned char *b, float *out)
{
    ggml_decode_k4_k5(ggml_half_at(b), ggml_half_at(b + 2), b + 4, NULL, b + 16, out);
}

static void ggml_decode_q5_k(const unsigned char *b, float *out)
{
    ggml_decode_k4_k5(ggml_half_at(b), ggml_half_at(b + 2), b + 4, b + 16, b + 48, out);
}

/* Q6_K: per 128 weights, 64 bytes of low nibbles and 32 of high bit pairs.
 * Weight 32 k + l (k < 4, l < 32) of a half takes a nibble of low byte
 * l + 32 (k % 2) (the low nibble for k < 2), bits 2k..2k+1 of high byte l,
 * and int8 scale l / 16 + 2 k of the half's eight. */
static void ggml_decode_q6_k(const unsigned char *b, float *out)
{
    const unsigned char *low = b, *high = b + 128;
    const int8_t *scales;
    float d = ggml_half_at(b + 208);
    int half, l, k;
    for (half = 0; half < 2; half++) {
        scales = (const int8_t *)(b + 192 + 8 * half);
        for (l = 0; l < 32; l++) {
            for (k = 0; k < 4; k++) {
                unsigned char byte = low[l + 32 * (k % 2)];
                int nibble = k < 2 ? byte & 0x0F : byte >> 4;
                int q = (nibble | ((high[l] >> (2 * k)) & 3) << 4) - 32;
                float group_d = d * (float)scales[l / 16 + 2 * k];
                out[128 * half + 32 * k + l] = group_d * (float)q;
            }
        }
        low += 64;
        high += 32;
    }
}

static void ggml_decode_iq4_xs(const unsigned char *b, float *out)
{
    float d = ggml_half_at(b);
    unsigned scales_high = pmpd_le_u16(b + 2);
    const unsigned char *q = b + 8;
    int g, j;
    for (g = 0; g < 8; g++, q += 16) {
        int scale = (int)((b[4 + g / 2] >> (4 * (g % 2))) & 0x0F) | (int)((scales_high >> (2 * g)) & 3) << 4;
        float group_d = d * (float)(scale - 32);
        for (j = 0; j < 16; j++) {
            out[32 * g + j] = group_d * (float)ggml_iq4_grid[q[j] & 0x0F];
            out[32 * g + j + 16] = group_d * (float)ggml_iq4_grid[q[j] >> 4];
        }
    }
}

/* Every type ggml's GGUF files may name (ids 4, 5, 31-33, 36-38 were
 * removed from the format and are unknown here, as in ggml).  The last
 * column is --type keep-closest's choice (docs/models.md, --type keep-closest): the pmpd
 * format nearest the type's bits per weight without going below them
 * where one is near (5- to 8-bit types to q8, the 4-bit ones and 3-bit to
 * q4, 2-bit and below to q2cb); F16 stays f16, BF16 becomes f32 (f16 would
 * clip BF16's exponent range; f32 holds every BF16 value exactly). */
static const pmpd_ggml_type_info ggml_types[] = {
    {0, "F32", 1, 4, ggml_decode_f32, PMPD_TENSOR_F32},
    {1, "F16", 1, 2, ggml_decode_f16, PMPD_TENSOR_F16},
    {2, "Q4_0", 32, 18, ggml_decode_q4_0, PMPD_TENSOR_Q4},
    {3, "Q4_1", 32, 20, ggml_decode_q4_1, PMPD_TENSOR_Q4},
    {6, "Q5_0", 32, 22, ggml_decode_q5_0, PMPD_TENSOR_Q8},
    {7, "Q5_1", 32, 24, ggml_decode_q5_1, PMPD_TENSOR_Q8},
    {8, "Q8_0", 32, 34, ggml_decode_q8_0, PMPD_TENSOR_Q8},
    {9, "Q8_1", 32, 36, NULL, PMPD_TENSOR_Q8},
    {10, "Q2_K", GGML_SUPER, 84, NULL, PMPD_TENSOR_Q2CB},
    {11, "Q3_K", GGML_SUPER, 110, NULL, PMPD_TENSOR_Q4},
    {12, "Q4_K", GGML_SUPER, 144, ggml_decode_q4_k, PMPD_TENSOR_Q4},
    {13, "Q5_K", GGML_SUPER, 176, ggml_decode_q5_k, PMPD_TENSOR_Q8},
    {14, "Q6_K", GGML_SUPER, 210, ggml_decode_q6_k, PMPD_TENSOR_Q8},
    {15, "Q8_K", GGML_SUPER, 292, NULL, PMPD_TENSOR_Q8},
    {16, "IQ2_XXS", GGML_SUPER, 66, NULL, PMPD_TENSOR_Q2CB},
    {17, "IQ2_XS", GGML_SUPER, 74, NULL, PMPD_TENSOR_Q2CB},
    {18, "IQ3_XXS", GGML_SUPER, 98, NULL, PMPD_TENSOR_Q4},
    {19, "IQ1_S", GGML_SUPER, 50, NULL, PMPD_TENSOR_Q2CB},
    {20, "IQ4_NL", 32, 18, ggml_decode_iq4_nl, PMPD_TENSOR_Q4},
    {21, "IQ3_S", GGML_SUPER, 110, NULL, PMPD_TENSOR_Q4},
    {22, "IQ2_S", GGML_SUPER, 82, NULL, PMPD_TENSOR_Q2CB},
    {23, "IQ4_XS", GGML_SUPER, 136, ggml_decode_iq4_xs, PMPD_TENSOR_Q4},
    {24, "I8", 1, 1, NULL, PMPD_TENSOR_Q8},
    {25, "I16", 1, 2, NULL, PMPD_TENSOR_F32},
    {26, "I32", 1, 4, NULL, PMPD_TENSOR_F32},
    {27, "I64", 1, 8, NULL, PMPD_TENSOR_F32},
    {28, "F64", 1, 8, NULL, PMPD_TENSOR_F32},
    {29, "IQ1_M", GGML_SUPER, 56, NULL, PMPD_TENSOR_Q2CB},
    {30, "BF16", 1, 2, ggml_decode_bf16, PMPD_TENSOR_F32},
    {34, "TQ1_0", GGML_SUPER, 54, NULL, PMPD_TENSOR_Q2CB},
    {35, "TQ2_0", GGML_SUPER, 66, NULL, PMPD_TENSOR_Q2CB},
    {39, "MXFP4", 32, 17, NULL, PMPD_TENSOR_Q4},
    {40, "NVFP4", 64, 36, NULL, PMPD_TENSOR_Q4},
    {41, "Q1_0", 128, 18, NULL, PMPD_TENSOR_Q2CB},
    {42, "Q2_0", 64, 18, NULL, PMPD_TENSOR_Q2CB},
};

PMPD_INTERNAL const pmpd_ggml_type_info *pmpd_ggml_type_find(uint32_t id)
{
    size_t i;
    for (i = 0; i < sizeof ggml_types / sizeof ggml_types[0]; i++)
        if (ggml_types[i].id == id)
            return &ggml_types[i];
    return NULL;
}

#undef GGML_SUPER
