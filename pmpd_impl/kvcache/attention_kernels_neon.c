/* AArch64 NEON versions of the attention kernels (attention_kernels.h).
 * Lanes come in multiples of four, so each group of four query heads is
 * one float32x4_t. */
#include "pmpd_impl/kvcache/attention_kernels.h"

#if PMPD_KV_USE_NEON
#include <arm_neon.h>
#include <math.h>

#include "pmpd_impl/core/vexp.h"

void pmpd_kv_row_scores_neon(const float *qt, uint32_t lanes, uint32_t dim, const float *rows, size_t stride,
                             size_t n, float *scores, float *max)
{
    size_t t;
    uint32_t d, l;
    for (t = 0; t < n; t++) {
        const float *row = rows + t * stride;
        for (l = 0; l < lanes; l += 4) {
            float32x4_t a0 = vdupq_n_f32(0.0f), a1 = vdupq_n_f32(0.0f), s;
            for (d = 0; d + 1 < dim; d += 2) {
                a0 = vfmaq_n_f32(a0, vld1q_f32(qt + d * lanes + l), row[d]);
                a1 = vfmaq_n_f32(a1, vld1q_f32(qt + (d + 1) * lanes + l), row[d + 1]);
            }
            if (d < dim)
                a0 = vfmaq_n_f32(a0, vld1q_f32(qt + d * lanes + l), row[d]);
            s = vaddq_f32(a0, a1);
            vst1q_f32(scores + t * lanes + l, s);
            vst1q_f32(max + l, vmaxq_f32(vld1q_f32(max + l), s));
        }
    }
}

/* Eight rows per pass over the accumulator (see the AVX2 version). */
#define PQ_NEON_ROW_BLOCK 8

void pmpd_kv_row_accumulate_neon(const float *weights, uint32_t lanes, uint32_t dim, const float *rows,
                                 size_t stride, size_t n, float *acc)
{
    size_t first, t;
    uint32_t d, l;
    for (first = 0; first < n; first += PQ_NEON_ROW_BLOCK) {
        size_t count = n - first < PQ_NEON_ROW_BLOCK ? n - first : PQ_NEON_ROW_BLOCK;
        const float *block = rows + first * stride;
        for (l = 0; l < lanes; l += 4) {
            float32x4_t w[PQ_NEON_ROW_BLOCK];
            for (t = 0; t < count; t++)
                w[t] = vld1q_f32(weights + (first + t) * lanes + l);
            for (d = 0; d < dim; d++) {
                float32x4_t a = vld1q_f32(acc + d * lanes + l);
                for (t = 0; t < count; t++)
                    a = vfmaq_n_f32(a, w[t], block[t * stride + d]);
                vst1q_f32(acc + d * lanes + l, a);
            }
        }
    }
}

#undef PQ_NEON_ROW_BLOCK

/* Binary16 value rows: each row widened (fcvtl) into a buffer and passed
 * to the f32 kernel above; rows longer than the buffer take the scalar
 * path.  (Binary16 keys are in blocks: pmpd_kv_block_scores_f16_neon.) */
#define KV_NEON_WIDEN_MAX 256

static void kv_neon_widen(const uint16_t *src, uint32_t dim, float *dst)
{
    uint32_t d;
    for (d = 0; d + 4 <= dim; d += 4)
        vst1q_f32(dst + d, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(src + d))));
    for (; d < dim; d++)
        pmpd_kv_f16_to_f32_scalar(src + d, 1, dst + d);
}

/* Four binary16 keys as floats. */
static inline float32x4_t kv_neon_half4(const uint16_t *p)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

/* Lane l's four vectors of a key block's sixteen positions: a##l##j +=
 * lane l of the query column times positions 4 j .. 4 j + 3 of one
 * dimension. */
#define KV_NEON_BLOCK_LANE(l)                                                                      \
    do {                                                                                           \
        a##l##0 = vfmaq_laneq_f32(a##l##0, k0, q, l);                                              \
        a##l##1 = vfmaq_laneq_f32(a##l##1, k1, q, l);                                              \
        a##l##2 = vfmaq_laneq_f32(a##l##2, k2, q, l);                                              \
        a##l##3 = vfmaq_laneq_f32(a##l##3, k3, q, l);                                              \
    } while (0)

/* Blocked binary16 keys (attention_kernels.h): per group of four lanes, a
 * block at a time in sixteen accumulators (lane l, positions 4 j ..
 * 4 j + 3), one query column load, four widenings and sixteen FMAs by
 * element per dimension; VST4 stores them position-major. */
void pmpd_kv_block_scores_f16_neon(const float *qt, uint32_t lanes, uint32_t dim, const uint16_t *blocks, size_t n,
                                   float *scores, float *max)
{
    const size_t block_halves = (size_t)PMPD_KV_KEY_BLOCK * dim;
    float out[PMPD_KV_KEY_BLOCK * 4];
    uint32_t l0, d;
    size_t t0, t;
    for (l0 = 0; l0 < lanes; l0 += 4) {
        float32x4_t m = vld1q_f32(max + l0);
        for (t0 = 0; t0 < n; t0 += PMPD_KV_KEY_BLOCK) {
            const uint16_t *x = blocks + t0 / PMPD_KV_KEY_BLOCK * block_halves;
            const size_t count = n - t0 < PMPD_KV_KEY_BLOCK ? n - t0 : PMPD_KV_KEY_BLOCK;
            float32x4_t a00 = vdupq_n_f32(0.0f), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00;
            float32x4_t a13 = a00, a20 = a00, a21 = a00, a22 = a00, a23 = a00, a30 = a00, a31 = a00, a32 = a00;
            float32x4_t a33 = a00;
            float32x4x4_t p;
            for (d = 0; d < dim; d++) {
                const float32x4_t q = vld1q_f32(qt + (size_t)d * lanes + l0);
                const float32x4_t k0 = kv_neon_half4(x + 16 * d), k1 = kv_neon_half4(x + 16 * d + 4);
                const float32x4_t k2 = kv_neon_half4(x + 16 * d + 8), k3 = kv_neon_half4(x + 16 * d + 12);
                KV_NEON_BLOCK_LANE(0);
                KV_NEON_BLOCK_LANE(1);
                KV_NEON_BLOCK_LANE(2);
                KV_NEON_BLOCK_LANE(3);
            }
            p.val[0] = a00, p.val[1] = a10, p.val[2] = a20, p.val[3] = a30;
            vst4q_f32(out, p);
            p.val[0] = a01, p.val[1] = a11, p.val[2] = a21, p.val[3] = a31;
            vst4q_f32(out + 16, p);
            p.val[0] = a02, p.val[1] = a12, p.val[2] = a22, p.val[3] = a32;
            vst4q_f32(out + 32, p);
            p.val[0] = a03, p.val[1] = a13, p.val[2] = a23, p.val[3] = a33;
            vst4q_f32(out + 48, p);
            pmpd_kv_put_block_scores(out, count, lanes, l0, scores + t0 * lanes);
            for (t = 0; t < count; t++)
                m = vmaxq_f32(m, vld1q_f32(out + 4 * t));
        }
        vst1q_f32(max + l0, m);
    }
}
#undef KV_NEON_BLOCK_LANE

void pmpd_kv_row_accumulate_f16_neon(const float *weights, uint32_t lanes, uint32_t dim, const uint16_t *rows,
                                     size_t stride, size_t n, float *acc)
{
    float row[KV_NEON_WIDEN_MAX];
    size_t t;
    if (dim > KV_NEON_WIDEN_MAX) {
        pmpd_kv_row_accumulate_f16_scalar(weights, lanes, dim, rows, stride, n, acc);
        return;
    }
    for (t = 0; t < n; t++) {
        kv_neon_widen(rows + t * stride, dim, row);
        pmpd_kv_row_accumulate_neon(weights + t * lanes, lanes, dim, row, dim, 1, acc);
    }
}

#undef KV_NEON_WIDEN_MAX

void pmpd_kv_exp_neon(float *x, uint32_t lanes, size_t n, const float *max, float *sum)
{
    size_t t;
    uint32_t l;
    for (l = 0; l < lanes; l += 4) {
        float32x4_t m = vld1q_f32(max + l), s = vld1q_f32(sum + l);
        for (t = 0; t < n; t++) {
            float32x4_t e = pmpd_vexp_neon(vsubq_f32(vld1q_f32(x + t * lanes + l), m));
            vst1q_f32(x + t * lanes + l, e);
            s = vaddq_f32(s, e);
        }
        vst1q_f32(sum + l, s);
    }
}

void pmpd_kv_f16_to_f32_neon(const uint16_t *src, size_t n, float *dst)
{
    size_t i;
    for (i = 0; i + 4 <= n; i += 4)
        vst1q_f32(dst + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(src + i))));
    pmpd_kv_f16_to_f32_scalar(src + i, n - i, dst + i);
}

void pmpd_pq_lut_neon(const pmpd_pq_codebook *book, const float *qt, uint32_t lanes, float *lut)
{
    const pmpd_pq_layout *lay = &book->layout;
    uint32_t s, c, j, l;
    for (s = 0; s < lay->n_sub; s++) {
        const float *q_sub = qt + (size_t)s * lay->sub_dim * lanes;
        for (c = 0; c < lay->n_centroids; c++) {
            const float *centroid = book->centroids + ((size_t)s * lay->n_centroids + c) * lay->sub_dim;
            float *out = lut + ((size_t)s * lay->n_centroids + c) * lanes;
            for (l = 0; l < lanes; l += 4) {
                float32x4_t a = vmulq_n_f32(vld1q_f32(q_sub + l), centroid[0]);
                for (j = 1; j < lay->sub_dim; j++)
                    a = vfmaq_n_f32(a, vld1q_f32(q_sub + j * lanes + l), centroid[j]);
                vst1q_f32(out + l, a);
            }
        }
    }
}

void pmpd_pq_scores_neon(const float *lut, const pmpd_pq_layout *layout, uint32_t lanes, const uint8_t *codes,
                         size_t n, float *scores, float *max)
{
    size_t t, row = (size_t)layout->n_centroids * lanes;
    uint32_t s, l, n_sub = layout->n_sub;
    for (t = 0; t < n; t++) {
        /* Token t's first code byte; byte b is b blocks' runs further. */
        const uint8_t *code = codes + pmpd_pq_code_offset(layout, t, 0);
        for (l = 0; l < lanes; l += 4) {
            const float *table = lut + l;
            float32x4_t a0 = vdupq_n_f32(0.0f), a1 = vdupq_n_f32(0.0f), sum;
            for (s = 0; s + 1 < n_sub; s += 2) {
                /* A pair of subspaces: two bytes, or the two nibbles of one. */
                uint32_t c0 = layout->packed ? code[s / 2 * PMPD_PQ_BLOCK] & 15u : code[s * PMPD_PQ_BLOCK];
                uint32_t c1 = layout->packed ? (uint32_t)code[s / 2 * PMPD_PQ_BLOCK] >> 4 : code[(s + 1) * PMPD_PQ_BLOCK];
                a0 = vaddq_f32(a0, vld1q_f32(table + s * row + (size_t)c0 * lanes));
                a1 = vaddq_f32(a1, vld1q_f32(table + (s + 1) * row + (size_t)c1 * lanes));
            }
            if (s < n_sub)
                a0 = vaddq_f32(a0, vld1q_f32(table + s * row + (size_t)pmpd_pq_code(layout, codes, t, s) * lanes));
            sum = vaddq_f32(a0, a1);
            vst1q_f32(scores + t * lanes + l, sum);
            vst1q_f32(max + l, vmaxq_f32(vld1q_f32(max + l), sum));
        }
    }
}

void pmpd_pq_bins_neon(const float *weights, uint32_t lanes, const pmpd_pq_layout *layout, const uint8_t *codes,
                       size_t n, float *bins)
{
    size_t t, row = (size_t)layout->n_centroids * lanes;
    uint32_t s, l, n_sub = layout->n_sub;
    for (t = 0; t < n; t++) {
        for (l = 0; l < lanes; l += 4) {
            float32x4_t w = vld1q_f32(weights + t * lanes + l);
            for (s = 0; s < n_sub; s++) {
                float *bin = bins + s * row + (size_t)pmpd_pq_code(layout, codes, t, s) * lanes + l;
                vst1q_f32(bin, vaddq_f32(vld1q_f32(bin), w));
            }
        }
    }
}

void pmpd_pq_bins_times_codebook_neon(const float *bins, const pmpd_pq_codebook *book, uint32_t lanes, float *acc)
{
    const pmpd_pq_layout *lay = &book->layout;
    uint32_t s, c, j, l;
    for (s = 0; s < lay->n_sub; s++)
        for (l = 0; l < lanes; l += 4) {
            float *out = acc + (size_t)s * lay->sub_dim * lanes + l;
            float32x4_t a[4];
            for (j = 0; j < lay->sub_dim; j++)
                a[j] = vld1q_f32(out + j * lanes);
            for (c = 0; c < lay->n_centroids; c++) {
                const float *centroid = book->centroids + ((size_t)s * lay->n_centroids + c) * lay->sub_dim;
                float32x4_t bin = vld1q_f32(bins + ((size_t)s * lay->n_centroids + c) * lanes + l);
                for (j = 0; j < lay->sub_dim; j++)
                    a[j] = vfmaq_n_f32(a[j], bin, centroid[j]);
            }
            for (j = 0; j < lay->sub_dim; j++)
                vst1q_f32(out + j * lanes, a[j]);
        }
}

/* The value side for byte codes, one quad of lanes, as on AVX2: every
 * token's weights times its centroid straight into registers (the bins'
 * read-modify-write stalls an in-order core on each store it reads back),
 * eight 2-dim or four 4-dim subspaces per pass, one accumulator per
 * (subspace, dimension) in the natural [j][lane] layout: two or four FMAs
 * by element per subspace and token, nothing to transpose. */
#define PQ_NEON_CENTROID(k) (book0 + ((size_t)(k) * nc + code[(k) * PMPD_PQ_BLOCK]) * sub_dim)
#define PQ_NEON_STEP2(k)                                                                           \
    do {                                                                                           \
        float32x2_t c = vld1_f32(PQ_NEON_CENTROID(k));                                             \
        a[2 * (k)] = vfmaq_lane_f32(a[2 * (k)], w, c, 0);                                          \
        a[2 * (k) + 1] = vfmaq_lane_f32(a[2 * (k) + 1], w, c, 1);                                  \
    } while (0)
#define PQ_NEON_STEP4(k)                                                                           \
    do {                                                                                           \
        float32x4_t c = vld1q_f32(PQ_NEON_CENTROID(k));                                            \
        a[4 * (k)] = vfmaq_laneq_f32(a[4 * (k)], w, c, 0);                                         \
        a[4 * (k) + 1] = vfmaq_laneq_f32(a[4 * (k) + 1], w, c, 1);                                 \
        a[4 * (k) + 2] = vfmaq_laneq_f32(a[4 * (k) + 2], w, c, 2);                                 \
        a[4 * (k) + 3] = vfmaq_laneq_f32(a[4 * (k) + 3], w, c, 3);                                 \
    } while (0)

/* Subspaces [s, s + count) (count 8 at 2 dims, 4 at 4 dims, or 1),
 * lanes l..l+3: 16 accumulators at most. */
static void pq_neon_values_pass(const float *weights, size_t lanes, size_t l, const pmpd_pq_codebook *book,
                                const uint8_t *codes, size_t n, size_t s, size_t count, float *acc)
{
    const size_t nc = book->layout.n_centroids, n_sub = book->layout.n_sub, sub_dim = book->layout.sub_dim;
    const float *book0 = book->centroids + s * nc * sub_dim;
    float32x4_t a[16];
    size_t b, t, i;
    for (i = 0; i < 16; i++)
        a[i] = vdupq_n_f32(0.0f);
    for (b = 0; b < n; b += PMPD_PQ_BLOCK) {
        for (t = b; t < n && t < b + PMPD_PQ_BLOCK; t++) {
            /* Token t's code of subspace s; s + k is k blocks' runs further. */
            const float32x4_t w = vld1q_f32(weights + t * lanes + l);
            const uint8_t *code = codes + (b / PMPD_PQ_BLOCK * n_sub + s) * PMPD_PQ_BLOCK + (t - b);
            if (sub_dim == 2 && count == 8) {
                PQ_NEON_STEP2(0);
                PQ_NEON_STEP2(1);
                PQ_NEON_STEP2(2);
                PQ_NEON_STEP2(3);
                PQ_NEON_STEP2(4);
                PQ_NEON_STEP2(5);
                PQ_NEON_STEP2(6);
                PQ_NEON_STEP2(7);
            } else if (sub_dim == 4 && count == 4) {
                PQ_NEON_STEP4(0);
                PQ_NEON_STEP4(1);
                PQ_NEON_STEP4(2);
                PQ_NEON_STEP4(3);
            } else if (sub_dim == 2) {
                PQ_NEON_STEP2(0);
            } else {
                PQ_NEON_STEP4(0);
            }
        }
    }
    for (i = 0; i < count * sub_dim; i++) {
        float *out = acc + (s * sub_dim + i) * lanes + l;
        vst1q_f32(out, vaddq_f32(vld1q_f32(out), a[i]));
    }
}
#undef PQ_NEON_CENTROID
#undef PQ_NEON_STEP2
#undef PQ_NEON_STEP4

void pmpd_pq_values_neon(const float *weights, uint32_t lanes, const pmpd_pq_codebook *book, const uint8_t *codes,
                         size_t n, float *bins, float *acc)
{
    const size_t n_sub = book->layout.n_sub, per_pass = book->layout.sub_dim == 2 ? 8 : 4;
    size_t l, s;
    if (book->layout.packed) {
        PMPD_PQ_VALUES_BY_BINS(neon, weights, lanes, book, codes, n, bins, acc);
        return;
    }
    for (l = 0; l < lanes; l += 4) {
        for (s = 0; s + per_pass <= n_sub; s += per_pass)
            pq_neon_values_pass(weights, lanes, l, book, codes, n, s, per_pass, acc);
        for (; s < n_sub; s++)
            pq_neon_values_pass(weights, lanes, l, book, codes, n, s, 1, acc);
    }
}

/* Four centroids per step, reduced as in the AVX2 version. */
uint32_t pmpd_pq_nearest_neon(const float *columns, uint32_t n_centroids, uint32_t sub_dim, const float *x)
{
    static const uint32_t first[4] = {0, 1, 2, 3};
    float32x4_t best = vdupq_n_f32(INFINITY);
    uint32x4_t best_index = vdupq_n_u32(0), index = vld1q_u32(first);
    float distance[4];
    uint32_t position[4], c, j, result;
    float result_distance;
    if (n_centroids % 4 != 0)
        return pmpd_pq_nearest_scalar(columns, n_centroids, sub_dim, x);
    for (c = 0; c < n_centroids; c += 4) {
        float32x4_t diff = vsubq_f32(vld1q_f32(columns + c), vdupq_n_f32(x[0]));
        float32x4_t d = vmulq_f32(diff, diff);
        uint32x4_t closer;
        for (j = 1; j < sub_dim; j++) {
            diff = vsubq_f32(vld1q_f32(columns + j * n_centroids + c), vdupq_n_f32(x[j]));
            d = vaddq_f32(d, vmulq_f32(diff, diff));
        }
        closer = vcltq_f32(d, best);
        best = vbslq_f32(closer, d, best);
        best_index = vbslq_u32(closer, index, best_index);
        index = vaddq_u32(index, vdupq_n_u32(4));
    }
    vst1q_f32(distance, best);
    vst1q_u32(position, best_index);
    result = position[0];
    result_distance = distance[0];
    for (j = 1; j < 4; j++)
        if (distance[j] < result_distance || (distance[j] == result_distance && position[j] < result)) {
            result = position[j];
            result_distance = distance[j];
        }
    return result;
}

#else
typedef int pq_attention_kernels_neon_not_compiled;
#endif
