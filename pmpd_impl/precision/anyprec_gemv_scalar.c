/* Reference any-precision kernels: plain C, one weight at a time.  Every
 * SIMD kernel is tested against these and against a brute-force oracle. */
#include "pmpd_impl/precision/anyprec.h"

/* Codes of the 32 columns of one group: the top `bits` plane bits. */
static void anyprec_scalar_group_codes(const unsigned char *group, size_t plane_stride, unsigned bits,
                                       unsigned char codes[PMPD_ANYPREC_GROUP])
{
    unsigned p, j;
    for (j = 0; j < PMPD_ANYPREC_GROUP; j++)
        codes[j] = 0;
    for (p = 0; p < bits; p++) {
        const unsigned char *plane = group + p * plane_stride;
        for (j = 0; j < PMPD_ANYPREC_GROUP; j++)
            codes[j] = (unsigned char)(codes[j] << 1 | ((plane[j % 4] >> (j / 4)) & 1u));
    }
}

PMPD_INTERNAL void pmpd_anyprec_gemv_scalar(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                            const float *xscale, float *y, uint32_t row_begin,
                                            uint32_t row_end)
{
    uint32_t r, g, groups = pmpd_anyprec_padded_cols(m->cols) / PMPD_ANYPREC_GROUP;
    unsigned char codes[PMPD_ANYPREC_GROUP];
    unsigned j;
    for (r = row_begin; r < row_end; r++) {
        const int8_t *table = m->tables[bits] + ((size_t)r << bits);
        const unsigned char *row = m->planes + (size_t)r * m->row_bytes;
        float acc = 0.0f;
        for (g = 0; g < groups; g++) {
            int32_t dot = 0;
            anyprec_scalar_group_codes(row + (size_t)g * (PMPD_ANYPREC_GROUP / 8), m->plane_stride, bits, codes);
            for (j = 0; j < PMPD_ANYPREC_GROUP; j++)
                dot += (int32_t)table[codes[j]] * xq[g * PMPD_ANYPREC_GROUP + j];
            acc += (float)dot * xscale[g];
        }
        y[r] = acc * m->scales[bits][r];
    }
}

PMPD_INTERNAL void pmpd_anyprec_gemm_scalar(const pmpd_anyprec_matrix *m, unsigned bits, const float *x,
                                            size_t n, size_t x_stride, float *y, size_t y_stride,
                                            uint32_t row_begin, uint32_t row_end)
{
    uint32_t r, c0, j, cols = m->cols;
    unsigned char codes[PMPD_ANYPREC_GROUP];
    float w[PMPD_ANYPREC_GROUP];
    size_t t;
    for (r = row_begin; r < row_end; r++) {
        const int8_t *table = m->tables[bits] + ((size_t)r << bits);
        const unsigned char *row = m->planes + (size_t)r * m->row_bytes;
        float scale = m->scales[bits][r];
        for (t = 0; t < n; t++)
            y[t * y_stride + r] = 0.0f;
        for (c0 = 0; c0 < cols; c0 += PMPD_ANYPREC_GROUP) {
            uint32_t width = cols - c0 < PMPD_ANYPREC_GROUP ? cols - c0 : PMPD_ANYPREC_GROUP;
            anyprec_scalar_group_codes(row + c0 / 8, m->plane_stride, bits, codes);
            for (j = 0; j < width; j++)
                w[j] = scale * (float)table[codes[j]];
            for (t = 0; t < n; t++) {
                const float *xt = x + t * x_stride + c0;
                float acc = 0.0f;
                for (j = 0; j < width; j++)
                    acc += w[j] * xt[j];
                y[t * y_stride + r] += acc;
            }
        }
    }
}

PMPD_INTERNAL void pmpd_anyprec_row(const pmpd_anyprec_matrix *m, unsigned bits, uint32_t r, float *out)
{
    const int8_t *table = m->tables[bits] + ((size_t)r << bits);
    const unsigned char *row = m->planes + (size_t)r * m->row_bytes;
    unsigned char codes[PMPD_ANYPREC_GROUP];
    uint32_t c0, j;
    for (c0 = 0; c0 < m->cols; c0 += PMPD_ANYPREC_GROUP) {
        anyprec_scalar_group_codes(row + c0 / 8, m->plane_stride, bits, codes);
        for (j = 0; j < PMPD_ANYPREC_GROUP && c0 + j < m->cols; j++)
            out[c0 + j] = m->scales[bits][r] * (float)table[codes[j]];
    }
}
