/* Byte layout of W8A8 tensors (w8a8.h): sizes, offsets, and the checks of
 * untrusted tensor bytes. */
#include <math.h>
#include <string.h>

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/format/le.h"
#include "pmpd_impl/weights/w8a8/w8a8.h"

/* An int32 row sum of |q| <= 127 times |w| <= 128 stays below 2^31 up to
 * this many columns. */
#define W8A8_MAX_COLS (UINT64_C(1) << 17)
#define W8A8_MAX_ROWS (UINT64_C(1) << 31)

PMPD_INTERNAL pmpd_status pmpd_w8a8_compute_layout(uint64_t rows, uint64_t cols, pmpd_w8a8_layout *out)
{
    size_t scale_bytes, weight_bytes;
    if (rows == 0 || cols == 0 || rows > W8A8_MAX_ROWS || cols > W8A8_MAX_COLS)
        return PMPD_ERR_INVALID_ARGUMENT;
    out->padded_rows = (size_t)((rows + PMPD_W8A8_ROW_BLOCK - 1) / PMPD_W8A8_ROW_BLOCK * PMPD_W8A8_ROW_BLOCK);
    out->padded_cols = (size_t)((cols + PMPD_W8A8_COL_ALIGN - 1) / PMPD_W8A8_COL_ALIGN * PMPD_W8A8_COL_ALIGN);
    out->scale_offset = PMPD_W8A8_HEADER_BYTES;
    if (!pmpd_checked_mul(out->padded_rows, sizeof(float), &scale_bytes) ||
        !pmpd_checked_align_up(scale_bytes, 64, &scale_bytes) ||
        !pmpd_checked_add(out->scale_offset, scale_bytes, &out->weight_offset) ||
        !pmpd_checked_mul(out->padded_rows, out->padded_cols, &weight_bytes) ||
        !pmpd_checked_add(out->weight_offset, weight_bytes, &out->total))
        return PMPD_ERR_OVERFLOW;
    return PMPD_OK;
}

PMPD_INTERNAL void pmpd_w8a8_bind(const void *data, uint64_t rows, uint64_t cols, pmpd_w8a8_matrix *m)
{
    const unsigned char *p = (const unsigned char *)data;
    pmpd_w8a8_layout layout;
    float scale;
    /* Accepted by pmpd_w8a8_view before: the layout cannot fail. */
    memset(&layout, 0, sizeof layout);
    pmpd_w8a8_compute_layout(rows, cols, &layout);
    memcpy(&scale, p + 20, sizeof scale);
    m->rows = (uint32_t)rows;
    m->cols = (uint32_t)cols;
    m->padded_cols = (uint32_t)layout.padded_cols;
    m->activation_scale = scale;
    m->row_scale = (const float *)(const void *)(p + layout.scale_offset);
    m->weights = (const int8_t *)(const void *)(p + layout.weight_offset);
}

PMPD_INTERNAL pmpd_status pmpd_w8a8_view(const void *data, uint64_t size, uint64_t rows, uint64_t cols,
                                         uint64_t base_offset, pmpd_w8a8_matrix *m, pmpd_error *err)
{
    const unsigned char *p = (const unsigned char *)data;
    pmpd_w8a8_layout layout;
    float scale;
    size_t i;
    if (size < PMPD_W8A8_HEADER_BYTES)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, base_offset, "w8a8 tensor of %llu bytes has no header",
                              (unsigned long long)size);
    if (memcmp(p, "W8A8", 4) != 0)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_MAGIC, base_offset, "w8a8 tensor lacks its W8A8 magic");
    if (pmpd_le_u32(p + 4) != PMPD_W8A8_VERSION)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VERSION, base_offset + 4,
                              "w8a8 tensor version %u is not %u (convert the model again)",
                              (unsigned)pmpd_le_u32(p + 4), (unsigned)PMPD_W8A8_VERSION);
    if (pmpd_le_u32(p + 8) != rows || pmpd_le_u32(p + 12) != cols)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, base_offset + 8,
                              "w8a8 header says %ux%u, the tensor entry %llux%llu", (unsigned)pmpd_le_u32(p + 8),
                              (unsigned)pmpd_le_u32(p + 12), (unsigned long long)rows, (unsigned long long)cols);
    if (pmpd_w8a8_compute_layout(rows, cols, &layout) != PMPD_OK)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, base_offset + 8,
                              "w8a8 shape %llux%llu is too large (at most 2^17 columns)", (unsigned long long)rows,
                              (unsigned long long)cols);
    if (pmpd_le_u32(p + 16) != layout.padded_cols)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, base_offset + 16,
                              "w8a8 padded_cols %u is not %zu", (unsigned)pmpd_le_u32(p + 16), layout.padded_cols);
    memcpy(&scale, p + 20, sizeof scale);
    if (!(scale > 0.0f) || !isfinite(scale))
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, base_offset + 20,
                              "w8a8 activation scale %g is not a finite positive number", (double)scale);
    for (i = 24; i < PMPD_W8A8_HEADER_BYTES; i++)
        if (p[i] != 0)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, base_offset + i, "w8a8 header byte %zu is not zero",
                                  i);
    if (size != layout.total)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, base_offset,
                              "w8a8 tensor is %llu bytes, its shape needs %zu", (unsigned long long)size,
                              layout.total);
    for (i = 0; i < layout.padded_rows; i++) {
        float s;
        memcpy(&s, p + layout.scale_offset + 4 * i, sizeof s);
        if (!(s >= 0.0f) || !isfinite(s) || (i >= rows && s != 0.0f))
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, base_offset + layout.scale_offset + 4 * i,
                                  "w8a8 row %zu scale %g is not finite and >= 0 (0 in padding rows)", i,
                                  (double)s);
    }
    pmpd_w8a8_bind(data, rows, cols, m);
    return PMPD_OK;
}

#undef W8A8_MAX_COLS
#undef W8A8_MAX_ROWS
