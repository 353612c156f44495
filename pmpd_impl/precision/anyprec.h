/*
 * Nested ("any-precision") weights: one stored copy of a matrix serves every
 * width from the seed width up to the parent width.  The byte layout is
 * documented in README.md ("ANYPREC tensors"); in short:
 *
 *   64-byte header: "ANYP", seed_bits, parent_bits, 0, 0, rows (u32), cols (u32)
 *   parent_bits bit-planes, most significant plane first; each plane holds
 *     every row, row_bytes = 4*ceil(cols/32) per row: one 4-byte word per
 *     group of 32 columns, column g*32+j at byte g*4 + j%4, bit j/4 (a 4x8
 *     transpose: a word broadcast to 32 byte lanes puts column j's bit in
 *     lane j, so SIMD kernels need no shuffle to spread bits); plane stride
 *     rounded up to 64 bytes
 *   for every width k = seed..parent: rows f32 scales (block rounded up to
 *     64 bytes), then rows tables of 2^k int8 centroids (rounded up to 64)
 *
 * The k-bit code of a weight is its top k plane bits; its value is
 * scales[k][row] * tables[k][row][code].  A k-bit product therefore reads
 * only planes 0..k-1 plus the width-k table: switching width changes a
 * number and a pointer, nothing is copied or re-laid out.
 */
#ifndef PMPD_PRECISION_ANYPREC_H
#define PMPD_PRECISION_ANYPREC_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"

#define PMPD_ANYPREC_HEADER_BYTES 64
#define PMPD_ANYPREC_GROUP 32 /* columns per plane word and per activation scale */

/* The NEON kernels use AArch64-only table lookups and reductions. */
#if PMPD_USE_NEON && defined(__aarch64__)
#define PMPD_ANYPREC_USE_NEON 1
#else
#define PMPD_ANYPREC_USE_NEON 0
#endif

typedef struct pmpd_anyprec_matrix {
    uint32_t rows;
    uint32_t cols;
    uint32_t seed_bits;
    uint32_t parent_bits;
    size_t row_bytes;    /* bytes of one row in one plane */
    size_t plane_stride; /* bytes from one plane to the next */
    const unsigned char *planes;
    const float *scales[PMPD_ANYPREC_MAX_BITS + 1];  /* [k][row]; NULL outside seed..parent */
    const int8_t *tables[PMPD_ANYPREC_MAX_BITS + 1]; /* [k][row * 2^k + code] */
} pmpd_anyprec_matrix;

/* Where each part of a tensor lies, from the shape alone (checked sizes). */
typedef struct pmpd_anyprec_layout {
    size_t row_bytes;
    size_t plane_stride;
    size_t width_offset[PMPD_ANYPREC_MAX_BITS + 1]; /* scales of width k; its table follows */
    size_t table_offset[PMPD_ANYPREC_MAX_BITS + 1];
    size_t total;
} pmpd_anyprec_layout;

PMPD_INTERNAL pmpd_status pmpd_anyprec_compute_layout(uint64_t rows, uint64_t cols, unsigned seed_bits,
                                                      unsigned parent_bits, pmpd_anyprec_layout *out);

/* Checks a tensor's bytes (header, shape, size, finite scales) and fills m
 * with pointers into data.  rows and cols come from the tensor directory;
 * error offsets are reported as base_offset + offset inside the tensor. */
PMPD_INTERNAL pmpd_status pmpd_anyprec_view(const void *data, uint64_t size, uint64_t rows, uint64_t cols,
                                            uint64_t base_offset, pmpd_anyprec_matrix *m, pmpd_error *err);

/* The same pointers for a tensor pmpd_anyprec_view has accepted before
 * (the loader checks every tensor once): no checks, no scan of the scales. */
PMPD_INTERNAL void pmpd_anyprec_bind(const void *data, uint64_t rows, uint64_t cols, pmpd_anyprec_matrix *m);

/* The width a product with this matrix runs at when asked for bits: bits
 * clamped into seed_bits..parent_bits, 0 meaning parent_bits. */
static inline unsigned pmpd_anyprec_width(const pmpd_anyprec_matrix *m, unsigned bits)
{
    if (bits == 0 || bits > m->parent_bits)
        return m->parent_bits;
    return bits < m->seed_bits ? m->seed_bits : bits;
}

/* Row r decoded at width bits into out[cols] (the embedding lookup). */
PMPD_INTERNAL void pmpd_anyprec_row(const pmpd_anyprec_matrix *m, unsigned bits, uint32_t r, float *out);

/* Activations for the integer GEMV: int8 values in groups of
 * PMPD_ANYPREC_GROUP with one float scale each, zero-padded to a whole group.
 * xq holds padded_cols bytes, xscale padded_cols / 32 floats. */
PMPD_INTERNAL void pmpd_anyprec_quantize_input(const float *x, uint32_t cols, int8_t *xq, float *xscale);

/* y[r] = sum_c W_bits[r][c] x[c] for rows [row_begin, row_end), with the
 * activations as given by pmpd_anyprec_quantize_input.  bits must lie in
 * seed_bits..parent_bits.  The dispatcher picks the compiled SIMD kernel;
 * the _scalar one is the reference. */
PMPD_INTERNAL void pmpd_anyprec_gemv(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                     const float *xscale, float *y, uint32_t row_begin, uint32_t row_end);
PMPD_INTERNAL void pmpd_anyprec_gemv_scalar(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                            const float *xscale, float *y, uint32_t row_begin,
                                            uint32_t row_end);

/* Prefill: y[t*y_stride + r] = sum_c W_bits[r][c] x[t*x_stride + c] for the
 * n input vectors, in float (weights dequantized through the table, inputs
 * not quantized).  x rows need only cols valid floats. */
PMPD_INTERNAL void pmpd_anyprec_gemm(const pmpd_anyprec_matrix *m, unsigned bits, const float *x, size_t n,
                                     size_t x_stride, float *y, size_t y_stride, uint32_t row_begin,
                                     uint32_t row_end);
PMPD_INTERNAL void pmpd_anyprec_gemm_scalar(const pmpd_anyprec_matrix *m, unsigned bits, const float *x,
                                            size_t n, size_t x_stride, float *y, size_t y_stride,
                                            uint32_t row_begin, uint32_t row_end);

#if PMPD_USE_AVX2
PMPD_INTERNAL void pmpd_anyprec_gemv_avx2(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                          const float *xscale, float *y, uint32_t row_begin, uint32_t row_end);
PMPD_INTERNAL void pmpd_anyprec_gemm_avx2(const pmpd_anyprec_matrix *m, unsigned bits, const float *x,
                                          size_t n, size_t x_stride, float *y, size_t y_stride,
                                          uint32_t row_begin, uint32_t row_end);
#endif
#if PMPD_ANYPREC_USE_NEON
PMPD_INTERNAL void pmpd_anyprec_gemv_neon(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                          const float *xscale, float *y, uint32_t row_begin, uint32_t row_end);
PMPD_INTERNAL void pmpd_anyprec_gemm_neon(const pmpd_anyprec_matrix *m, unsigned bits, const float *x,
                                          size_t n, size_t x_stride, float *y, size_t y_stride,
                                          uint32_t row_begin, uint32_t row_end);
#endif

/* Padded column count (a whole number of groups). */
static inline uint32_t pmpd_anyprec_padded_cols(uint32_t cols)
{
    return (cols + PMPD_ANYPREC_GROUP - 1) / PMPD_ANYPREC_GROUP * PMPD_ANYPREC_GROUP;
}

#endif
