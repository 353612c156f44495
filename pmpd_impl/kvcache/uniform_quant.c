/* Per-row uniform min/max quantization (the int8/int4/int2 KV baseline). */
#include <math.h>
#include <string.h>

#include "pmpd_impl/kvcache/uniform_quant.h"

#define PQ_UNIFORM_HEADER_BYTES (2 * sizeof(float))

size_t pmpd_kv_uniform_row_bytes(uint32_t dim, uint32_t bits)
{
    uint32_t per_byte;
    if (bits != 2 && bits != 4 && bits != 8)
        return 0;
    per_byte = 8 / bits;
    return PQ_UNIFORM_HEADER_BYTES + ((size_t)dim + per_byte - 1) / per_byte;
}

void pmpd_kv_uniform_encode(const float *x, uint32_t dim, uint32_t bits, unsigned char *row)
{
    uint32_t i, per_byte = 8 / bits, top = (1u << bits) - 1;
    float lo = x[0], hi = x[0], scale, inv;
    unsigned char *codes = row + PQ_UNIFORM_HEADER_BYTES;
    for (i = 1; i < dim; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    scale = (hi - lo) / (float)top;
    inv = scale > 0.0f ? 1.0f / scale : 0.0f;
    memcpy(row, &scale, sizeof scale);
    memcpy(row + sizeof scale, &lo, sizeof lo);
    memset(codes, 0, (dim + per_byte - 1) / per_byte);
    for (i = 0; i < dim; i++) {
        float level = floorf((x[i] - lo) * inv + 0.5f);
        uint32_t code = level <= 0.0f ? 0u : level >= (float)top ? top : (uint32_t)level;
        codes[i / per_byte] |= (unsigned char)(code << (i % per_byte * bits));
    }
}

void pmpd_kv_uniform_decode(const unsigned char *row, uint32_t dim, uint32_t bits, float *x)
{
    uint32_t i, per_byte = 8 / bits, top = (1u << bits) - 1;
    float scale, lo;
    const unsigned char *codes = row + PQ_UNIFORM_HEADER_BYTES;
    memcpy(&scale, row, sizeof scale);
    memcpy(&lo, row + sizeof scale, sizeof lo);
    for (i = 0; i < dim; i++)
        x[i] = lo + scale * (float)((codes[i / per_byte] >> (i % per_byte * bits)) & top);
}

#undef PQ_UNIFORM_HEADER_BYTES
