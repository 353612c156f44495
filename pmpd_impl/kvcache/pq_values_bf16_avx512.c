/* AVX-512 (VBMI, BF16) value side over bfloat16 planes (pq_values_bf16.h).
 * A quad of lanes and a tile of tokens at a time: the tile's weights are
 * converted to bfloat16 once, lane by lane in the order the centroid
 * values come out of the lookups; then for each (subspace, dimension) the
 * plane's eight registers stay loaded while every block of the tile is
 * looked up (two VPERMI2B and a blend per byte plane), its bytes joined
 * into bfloat16 values (UNPCKLBW / UNPCKHBW) and multiplied into four
 * accumulators (two VDPBF16PS per lane). */
#include "pmpd_impl/kvcache/pq_values_bf16.h"

#if PMPD_PQ_USE_VALUES_BF16
#include <immintrin.h>
#include <string.h>

/* One plane's bytes for the block's 64 codes (upper: the codes' top bits). */
static inline __m512i bf16_lookup(const __m512i p[4], __m512i code, __mmask64 upper)
{
    return _mm512_mask_blend_epi8(upper, _mm512_permutex2var_epi8(p[0], code, p[1]),
                                  _mm512_permutex2var_epi8(p[2], code, p[3]));
}

/* Four tokens' weights of lanes [l, l + 4) as 16 floats. */
static inline __m512 bf16_weights4(const float *w, size_t lanes)
{
    if (lanes == 4)
        return _mm512_loadu_ps(w);
    return _mm512_insertf32x4(
        _mm512_insertf32x4(_mm512_insertf32x4(_mm512_castps128_ps512(_mm_loadu_ps(w)), _mm_loadu_ps(w + lanes), 1),
                           _mm_loadu_ps(w + 2 * lanes), 2),
        _mm_loadu_ps(w + 3 * lanes), 3);
}

/* A block's weights (64 tokens from w, lanes [l, l + 4); count < 64 pads
 * with zeros) as bfloat16, out[2k] and out[2k + 1] for lane k: the order
 * of UNPCKLBW and UNPCKHBW, whose 128-bit chunk c holds tokens 16c..16c+7
 * and 16c+8..16c+15.  z[i] holds tokens 8i..8i+7 as [token][lane] words. */
static void bf16_block_weights(const float *w, size_t lanes, size_t count, __m512i *out)
{
    float part[PMPD_PQ_BLOCK * 4];
    __m512i z[8];
    size_t i, stride = lanes;
    int k;
    if (count < PMPD_PQ_BLOCK) {
        memset(part, 0, sizeof part);
        for (i = 0; i < count; i++)
            memcpy(part + i * 4, w + i * lanes, 4 * sizeof(float));
        w = part;
        stride = 4;
    }
    for (i = 0; i < 8; i++)
        z[i] = (__m512i)_mm512_cvtne2ps_pbh(bf16_weights4(w + (8 * i + 4) * stride, stride),
                                            bf16_weights4(w + 8 * i * stride, stride));
    for (k = 0; k < 4; k++) {
        /* Words 0..7: lane k of the first source's eight tokens, 8..15: of
         * the second's (indices from 32); words 16..31 unused. */
        static const uint16_t pick[32] = {0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60,
                                          0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60};
        const __m512i two = _mm512_add_epi16(_mm512_loadu_si512(pick), _mm512_set1_epi16((short)k));
        int h;
        for (h = 0; h < 2; h++) {
            __m512i a = _mm512_permutex2var_epi16(z[h], two, z[h + 2]);
            __m512i b = _mm512_permutex2var_epi16(z[h + 4], two, z[h + 6]);
            out[2 * k + h] = _mm512_shuffle_i64x2(a, b, 0x44);
        }
    }
}

/* The tile's scratch has float alignment only. */
static inline __m512bh bf16_at(const __m512i *p)
{
    return (__m512bh)_mm512_loadu_si512(p);
}

void pmpd_pq_values_bf16_avx512(const float *weights, uint32_t lanes, const pmpd_pq_layout *layout,
                                const uint8_t *planes, const uint8_t *codes, size_t n, float *scratch, float *acc)
{
    const size_t n_sub = layout->n_sub, sub_dim = layout->sub_dim, block_bytes = n_sub * PMPD_PQ_BLOCK;
    __m512i *tile = (__m512i *)(void *)scratch;
    size_t l, t0, b, s, j;
    int k;
    for (l = 0; l < lanes; l += 4)
        for (t0 = 0; t0 < n; t0 += PMPD_PQ_BF16_TILE) {
            size_t t1 = n - t0 < PMPD_PQ_BF16_TILE ? n : t0 + PMPD_PQ_BF16_TILE;
            size_t blocks = (t1 - t0 + PMPD_PQ_BLOCK - 1) / PMPD_PQ_BLOCK;
            const uint8_t *first = codes + t0 / PMPD_PQ_BLOCK * block_bytes;
            __m512i w[8];
            for (b = 0; b < blocks; b++) {
                size_t t = t0 + b * PMPD_PQ_BLOCK;
                bf16_block_weights(weights + t * lanes + l, lanes, t1 - t < PMPD_PQ_BLOCK ? t1 - t : PMPD_PQ_BLOCK,
                                   w);
                for (k = 0; k < 8; k++)
                    _mm512_storeu_si512(tile + b * 8 + k, w[k]);
            }
            for (s = 0; s < n_sub; s++)
                for (j = 0; j < sub_dim; j++) {
                    const uint8_t *plane = planes + (s * sub_dim + j) * 512;
                    __m512i lo[4], hi[4];
                    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
                    for (k = 0; k < 4; k++) {
                        lo[k] = _mm512_loadu_si512(plane + 64 * k);
                        hi[k] = _mm512_loadu_si512(plane + 256 + 64 * k);
                    }
                    for (b = 0; b < blocks; b++) {
                        const __m512i *wb = tile + b * 8;
                        __m512i code = _mm512_loadu_si512(first + b * block_bytes + s * PMPD_PQ_BLOCK);
                        __mmask64 upper = _mm512_movepi8_mask(code);
                        __m512i low = bf16_lookup(lo, code, upper), high = bf16_lookup(hi, code, upper);
                        __m512bh va = (__m512bh)_mm512_unpacklo_epi8(low, high);
                        __m512bh vb = (__m512bh)_mm512_unpackhi_epi8(low, high);
                        a0 = _mm512_dpbf16_ps(_mm512_dpbf16_ps(a0, bf16_at(wb + 0), va), bf16_at(wb + 1), vb);
                        a1 = _mm512_dpbf16_ps(_mm512_dpbf16_ps(a1, bf16_at(wb + 2), va), bf16_at(wb + 3), vb);
                        a2 = _mm512_dpbf16_ps(_mm512_dpbf16_ps(a2, bf16_at(wb + 4), va), bf16_at(wb + 5), vb);
                        a3 = _mm512_dpbf16_ps(_mm512_dpbf16_ps(a3, bf16_at(wb + 6), va), bf16_at(wb + 7), vb);
                    }
                    {
                        float *out = acc + (s * sub_dim + j) * lanes + l;
                        out[0] += _mm512_reduce_add_ps(a0);
                        out[1] += _mm512_reduce_add_ps(a1);
                        out[2] += _mm512_reduce_add_ps(a2);
                        out[3] += _mm512_reduce_add_ps(a3);
                    }
                }
        }
}

#else
typedef int pq_values_bf16_avx512_not_compiled;
#endif
