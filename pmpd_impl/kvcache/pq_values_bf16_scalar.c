/* The bfloat16 value planes and the scalar reference of the bfloat16 value
 * side (pq_values_bf16.h). */
#include <string.h>

#include "pmpd_impl/kvcache/pq_values_bf16.h"

uint16_t pmpd_pq_bf16(float x)
{
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    /* Adding 0x7fff, plus one when the kept part is odd, rounds to nearest even. */
    return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

static float pq_bf16_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float x;
    memcpy(&x, &bits, sizeof x);
    return x;
}

void pmpd_pq_bf16_planes(const pmpd_pq_codebook *book, uint8_t *planes)
{
    const pmpd_pq_layout *lay = &book->layout;
    uint32_t s, j, c;
    memset(planes, 0, pmpd_pq_bf16_plane_bytes(lay));
    for (s = 0; s < lay->n_sub; s++)
        for (j = 0; j < lay->sub_dim; j++) {
            uint8_t *plane = planes + ((size_t)s * lay->sub_dim + j) * 512;
            for (c = 0; c < lay->n_centroids; c++) {
                uint16_t h = pmpd_pq_bf16(book->centroids[((size_t)s * lay->n_centroids + c) * lay->sub_dim + j]);
                plane[c] = (uint8_t)(h & 0xff);
                plane[256 + c] = (uint8_t)(h >> 8);
            }
        }
}

void pmpd_pq_values_bf16_scalar(const float *weights, uint32_t lanes, const pmpd_pq_layout *layout,
                                const uint8_t *planes, const uint8_t *codes, size_t n, float *scratch, float *acc)
{
    size_t t;
    uint32_t s, j, l;
    (void)scratch;
    for (s = 0; s < layout->n_sub; s++)
        for (j = 0; j < layout->sub_dim; j++) {
            const uint8_t *plane = planes + ((size_t)s * layout->sub_dim + j) * 512;
            for (l = 0; l < lanes; l++) {
                float sum = 0.0f;
                for (t = 0; t < n; t++) {
                    uint32_t c = pmpd_pq_code(layout, codes, t, s);
                    float v = pq_bf16_float((uint16_t)(plane[c] | plane[256 + c] << 8));
                    sum += pq_bf16_float(pmpd_pq_bf16(weights[t * lanes + l])) * v;
                }
                acc[(s * layout->sub_dim + j) * lanes + l] += sum;
            }
        }
}
