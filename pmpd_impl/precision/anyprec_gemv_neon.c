/* AArch64 NEON any-precision kernels for widths up to 4, the same scheme
 * as the AVX2 ones: each plane's word of a 32-column group, broadcast, is
 * spread to one byte per column by one bit test (the layout puts column j's
 * bit at a fixed place in lane j), the top k planes fold into
 * codes, and TBL looks the codes up in the row's 16-entry int8 table.  The
 * GEMV multiplies int8 weights with int8 activations (SDOT when the target
 * has it, widening multiplies otherwise); the GEMM widens the weights to
 * float once per group and reuses them for a tile of input vectors. */
#include "pmpd_impl/precision/anyprec.h"

#if PMPD_ANYPREC_USE_NEON
#include <arm_neon.h>
#include <string.h>

#define ANYPREC_NEON_TOKEN_TILE 4
#if defined(__GNUC__)
#define ANYPREC_NEON_INLINE static inline __attribute__((always_inline))
#else
#define ANYPREC_NEON_INLINE static inline
#endif

typedef struct anyprec_neon_weights {
    int8x16_t lo, hi; /* columns 0..15 and 16..31 of a group */
} anyprec_neon_weights;

ANYPREC_NEON_INLINE anyprec_neon_weights anyprec_neon_group_weights(const unsigned char *group,
                                                                    size_t plane_stride, unsigned bits,
                                                                    int8x16_t table)
{
    /* Lane j of a broadcast word holds column j at bit j/4 of byte j%4. */
    static const uint8_t lane_bit_lo[16] = {1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 4, 8, 8, 8, 8};
    static const uint8_t lane_bit_hi[16] = {16, 16, 16, 16, 32, 32, 32, 32, 64, 64, 64, 64, 128, 128, 128, 128};
    const uint8x16_t bit_lo = vld1q_u8(lane_bit_lo), bit_hi = vld1q_u8(lane_bit_hi);
    uint8x16_t codes_lo = vdupq_n_u8(0), codes_hi = vdupq_n_u8(0);
    anyprec_neon_weights out;
    unsigned p;
    for (p = 0; p < bits; p++) {
        uint32_t word;
        uint8x16_t bytes;
        memcpy(&word, group + p * plane_stride, sizeof word);
        bytes = vreinterpretq_u8_u32(vdupq_n_u32(word));
        /* codes = 2*codes + (bit set ? 1 : 0); vtst gives 0xFF (= -1) where set. */
        codes_lo = vsubq_u8(vaddq_u8(codes_lo, codes_lo), vtstq_u8(bytes, bit_lo));
        codes_hi = vsubq_u8(vaddq_u8(codes_hi, codes_hi), vtstq_u8(bytes, bit_hi));
    }
    out.lo = vqtbl1q_s8(table, codes_lo);
    out.hi = vqtbl1q_s8(table, codes_hi);
    return out;
}

static int8x16_t anyprec_neon_row_table(const pmpd_anyprec_matrix *m, unsigned bits, uint32_t r)
{
    /* Tables of fewer than 16 entries are copied so no read runs past them. */
    int8_t entries[16] = {0};
    memcpy(entries, m->tables[bits] + ((size_t)r << bits), (size_t)1 << bits);
    return vld1q_s8(entries);
}

static int32x4_t anyprec_neon_dot(int32x4_t acc, int8x16_t w, int8x16_t x)
{
#if PMPD_USE_DOTPROD
    return vdotq_s32(acc, w, x);
#else
    /* Two products of at most 127*127 fit an int16 lane. */
    int16x8_t pairs = vmlal_high_s8(vmull_s8(vget_low_s8(w), vget_low_s8(x)), w, x);
    return vpadalq_s16(acc, pairs);
#endif
}

/* One row's contribution of one column group, added to acc. */
ANYPREC_NEON_INLINE float32x4_t anyprec_neon_gemv_step(float32x4_t acc, const unsigned char *group,
                                                       size_t plane_stride, const unsigned bits, int8x16_t table,
                                                       int8x16_t x_lo, int8x16_t x_hi, float xs)
{
    anyprec_neon_weights w = anyprec_neon_group_weights(group, plane_stride, bits, table);
    int32x4_t dot = anyprec_neon_dot(anyprec_neon_dot(vdupq_n_s32(0), w.lo, x_lo), w.hi, x_hi);
    return vfmaq_n_f32(acc, vcvtq_f32_s32(dot), xs);
}

/* Four rows at once: shared activation loads, four independent chains
 * (in-order cores stall on one). */
ANYPREC_NEON_INLINE void anyprec_neon_gemv_four_rows(const pmpd_anyprec_matrix *m, const int8_t *xq,
                                                     const float *xscale, float *y, uint32_t r, const unsigned bits)
{
    const uint32_t groups = pmpd_anyprec_padded_cols(m->cols) / PMPD_ANYPREC_GROUP;
    const size_t stride = m->plane_stride, rb = m->row_bytes;
    const unsigned char *row = m->planes + (size_t)r * rb;
    const int8x16_t t0 = anyprec_neon_row_table(m, bits, r), t1 = anyprec_neon_row_table(m, bits, r + 1);
    const int8x16_t t2 = anyprec_neon_row_table(m, bits, r + 2), t3 = anyprec_neon_row_table(m, bits, r + 3);
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
    uint32_t g;
    for (g = 0; g < groups; g++, row += 4) {
        const int8_t *x = xq + (size_t)g * PMPD_ANYPREC_GROUP;
        const int8x16_t x_lo = vld1q_s8(x), x_hi = vld1q_s8(x + 16);
        a0 = anyprec_neon_gemv_step(a0, row, stride, bits, t0, x_lo, x_hi, xscale[g]);
        a1 = anyprec_neon_gemv_step(a1, row + rb, stride, bits, t1, x_lo, x_hi, xscale[g]);
        a2 = anyprec_neon_gemv_step(a2, row + 2 * rb, stride, bits, t2, x_lo, x_hi, xscale[g]);
        a3 = anyprec_neon_gemv_step(a3, row + 3 * rb, stride, bits, t3, x_lo, x_hi, xscale[g]);
    }
    y[r] = vaddvq_f32(a0) * m->scales[bits][r];
    y[r + 1] = vaddvq_f32(a1) * m->scales[bits][r + 1];
    y[r + 2] = vaddvq_f32(a2) * m->scales[bits][r + 2];
    y[r + 3] = vaddvq_f32(a3) * m->scales[bits][r + 3];
}

ANYPREC_NEON_INLINE void anyprec_neon_gemv_one_row(const pmpd_anyprec_matrix *m, const int8_t *xq,
                                                   const float *xscale, float *y, uint32_t r, const unsigned bits)
{
    const uint32_t groups = pmpd_anyprec_padded_cols(m->cols) / PMPD_ANYPREC_GROUP;
    const unsigned char *row = m->planes + (size_t)r * m->row_bytes;
    const int8x16_t table = anyprec_neon_row_table(m, bits, r);
    float32x4_t acc = vdupq_n_f32(0.0f);
    uint32_t g;
    for (g = 0; g < groups; g++, row += 4) {
        const int8_t *x = xq + (size_t)g * PMPD_ANYPREC_GROUP;
        acc = anyprec_neon_gemv_step(acc, row, m->plane_stride, bits, table, vld1q_s8(x), vld1q_s8(x + 16),
                                     xscale[g]);
    }
    y[r] = vaddvq_f32(acc) * m->scales[bits][r];
}

ANYPREC_NEON_INLINE void anyprec_neon_gemv_rows(const pmpd_anyprec_matrix *m, const int8_t *xq, const float *xscale,
                                                float *y, uint32_t row_begin, uint32_t row_end, const unsigned bits)
{
    uint32_t r = row_begin;
    for (; r + 4 <= row_end; r += 4)
        anyprec_neon_gemv_four_rows(m, xq, xscale, y, r, bits);
    for (; r < row_end; r++)
        anyprec_neon_gemv_one_row(m, xq, xscale, y, r, bits);
}

PMPD_INTERNAL void pmpd_anyprec_gemv_neon(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                          const float *xscale, float *y, uint32_t row_begin, uint32_t row_end)
{
    switch (bits) {
    case 1: anyprec_neon_gemv_rows(m, xq, xscale, y, row_begin, row_end, 1); break;
    case 2: anyprec_neon_gemv_rows(m, xq, xscale, y, row_begin, row_end, 2); break;
    case 3: anyprec_neon_gemv_rows(m, xq, xscale, y, row_begin, row_end, 3); break;
    default: anyprec_neon_gemv_rows(m, xq, xscale, y, row_begin, row_end, 4); break;
    }
}

/* Four floats of input vector xt from column c, zero past cols. */
static float32x4_t anyprec_neon_load_input(const float *xt, uint32_t c, uint32_t cols)
{
    float tail[4] = {0};
    if (c + 4 <= cols)
        return vld1q_f32(xt + c);
    if (c < cols)
        memcpy(tail, xt + c, (cols - c) * sizeof(float));
    return vld1q_f32(tail);
}

static void anyprec_neon_widen(int8x16_t v, float32x4_t out[4])
{
    int16x8_t lo = vmovl_s8(vget_low_s8(v)), hi = vmovl_high_s8(v);
    out[0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo)));
    out[1] = vcvtq_f32_s32(vmovl_high_s16(lo));
    out[2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi)));
    out[3] = vcvtq_f32_s32(vmovl_high_s16(hi));
}

PMPD_INTERNAL void pmpd_anyprec_gemm_neon(const pmpd_anyprec_matrix *m, unsigned bits, const float *x,
                                          size_t n, size_t x_stride, float *y, size_t y_stride,
                                          uint32_t row_begin, uint32_t row_end)
{
    const uint32_t cols = m->cols;
    uint32_t r, c0, q;
    size_t t0, t;
    for (r = row_begin; r < row_end; r++) {
        const int8x16_t table = anyprec_neon_row_table(m, bits, r);
        const float scale = m->scales[bits][r];
        const unsigned char *row = m->planes + (size_t)r * m->row_bytes;
        for (t0 = 0; t0 < n; t0 += ANYPREC_NEON_TOKEN_TILE) {
            size_t tile = n - t0 < ANYPREC_NEON_TOKEN_TILE ? n - t0 : ANYPREC_NEON_TOKEN_TILE;
            float32x4_t acc[ANYPREC_NEON_TOKEN_TILE];
            for (t = 0; t < tile; t++)
                acc[t] = vdupq_n_f32(0.0f);
            for (c0 = 0; c0 < cols; c0 += PMPD_ANYPREC_GROUP) {
                anyprec_neon_weights w8 = anyprec_neon_group_weights(row + c0 / 8, m->plane_stride, bits, table);
                float32x4_t w[8];
                anyprec_neon_widen(w8.lo, w);
                anyprec_neon_widen(w8.hi, w + 4);
                for (t = 0; t < tile; t++) {
                    const float *xt = x + (t0 + t) * x_stride;
                    for (q = 0; q < 8; q++)
                        acc[t] = vfmaq_f32(acc[t], w[q], anyprec_neon_load_input(xt, c0 + 4 * q, cols));
                }
            }
            for (t = 0; t < tile; t++)
                y[(t0 + t) * y_stride + r] = vaddvq_f32(acc[t]) * scale;
        }
    }
}

#undef ANYPREC_NEON_TOKEN_TILE
#undef ANYPREC_NEON_INLINE
#endif
