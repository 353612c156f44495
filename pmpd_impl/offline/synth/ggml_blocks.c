/* ggml's row encodings, byte for byte as llama.cpp's reference quantizers
 * lay them out, so llama.cpp reads the weights this generator meant.
 *
 * Q8_0: per 32 weights an f16 scale d = amax / 127, then 32 int8 q with
 * q = round(x / d).  Q4_0: per 32 weights an f16 scale d = max / -8, where
 * max is the weight of largest magnitude with its sign (the first, on ties),
 * then 16 bytes: byte j holds q of weight j in its low nibble and of weight
 * j + 16 in its high one, q = min(15, (int)(x / d + 8.5)).  As in llama.cpp,
 * the division uses the f32 scale and the block stores it rounded to f16. */
#include "pmpd_impl/offline/synth/synth.h"

#include <math.h>

#include "pmpd_impl/format/le.h"
#include "pmpd_impl/offline/format/half.h"

#define GGML_QK 32

PMPD_INTERNAL uint32_t pmpd_ggml_block_size(pmpd_ggml_type type)
{
    return type == PMPD_GGML_Q4_0 || type == PMPD_GGML_Q8_0 ? GGML_QK : 1;
}

PMPD_INTERNAL uint64_t pmpd_ggml_row_bytes(pmpd_ggml_type type, uint64_t n)
{
    switch (type) {
    case PMPD_GGML_F16: return 2 * n;
    case PMPD_GGML_Q8_0: return n / GGML_QK * (2 + GGML_QK);
    case PMPD_GGML_Q4_0: return n / GGML_QK * (2 + GGML_QK / 2);
    default: return 4 * n;
    }
}

static void ggml_put_half(unsigned char *p, float f)
{
    uint16_t h = pmpd_float_to_half(f);
    p[0] = (unsigned char)h;
    p[1] = (unsigned char)(h >> 8);
}

static void ggml_q8_0_block(const float *x, unsigned char *out)
{
    float amax = 0.0f, d, inverse;
    int j;
    for (j = 0; j < GGML_QK; j++)
        amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    d = amax / 127.0f;
    inverse = d != 0.0f ? 1.0f / d : 0.0f;
    ggml_put_half(out, d);
    for (j = 0; j < GGML_QK; j++)
        out[2 + j] = (unsigned char)(int8_t)roundf(x[j] * inverse);
}

static void ggml_q4_0_block(const float *x, unsigned char *out)
{
    float amax = 0.0f, max = 0.0f, d, inverse;
    int j;
    for (j = 0; j < GGML_QK; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    d = max / -8.0f;
    inverse = d != 0.0f ? 1.0f / d : 0.0f;
    ggml_put_half(out, d);
    for (j = 0; j < GGML_QK / 2; j++) {
        int lo = (int)(x[j] * inverse + 8.5f), hi = (int)(x[j + GGML_QK / 2] * inverse + 8.5f);
        out[2 + j] = (unsigned char)((lo < 15 ? lo : 15) | ((hi < 15 ? hi : 15) << 4));
    }
}

PMPD_INTERNAL void pmpd_ggml_encode_row(pmpd_ggml_type type, const float *x, size_t n, unsigned char *out)
{
    size_t i;
    switch (type) {
    case PMPD_GGML_F16:
        for (i = 0; i < n; i++)
            ggml_put_half(out + 2 * i, x[i]);
        break;
    case PMPD_GGML_Q8_0:
        for (i = 0; i < n; i += GGML_QK)
            ggml_q8_0_block(x + i, out + i / GGML_QK * (2 + GGML_QK));
        break;
    case PMPD_GGML_Q4_0:
        for (i = 0; i < n; i += GGML_QK)
            ggml_q4_0_block(x + i, out + i / GGML_QK * (2 + GGML_QK / 2));
        break;
    default:
        for (i = 0; i < n; i++)
            pmpd_le_put_f32(out + 4 * i, x[i]);
        break;
    }
}

#undef GGML_QK
