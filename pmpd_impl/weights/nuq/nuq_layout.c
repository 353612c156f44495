/* Byte layout of NUQ tensors (nuq.h): sizes, offsets, and the checks of
 * untrusted tensor bytes. */
#include <string.h>

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/core/hadamard.h"
#include "pmpd_impl/format/le.h"
#include "pmpd_impl/weights/nuq/nuq.h"

PMPD_INTERNAL pmpd_status pmpd_nuq_compute_layout(uint64_t rows, uint64_t cols, uint64_t bits,
                                                  pmpd_nuq_layout *out)
{
    if (rows == 0 || cols == 0 || rows > PMPD_ROTATED_MAX_ROWS || cols > PMPD_HADAMARD_MAX || bits < PMPD_NUQ_MIN_BITS ||
        bits > PMPD_NUQ_MAX_BITS)
        return PMPD_ERR_INVALID_ARGUMENT;
    return pmpd_rotated_compute_layout(rows, cols, 4 * (size_t)bits, out);
}

PMPD_INTERNAL void pmpd_nuq_bind(const void *data, uint64_t rows, uint64_t cols, pmpd_nuq_matrix *m)
{
    const unsigned char *p = (const unsigned char *)data;
    pmpd_nuq_layout layout;
    uint32_t bits = pmpd_le_u32(p + 16);
    /* Accepted by pmpd_nuq_view before: the layout cannot fail. */
    memset(&layout, 0, sizeof layout);
    pmpd_rotated_layout_at(rows, pmpd_le_u32(p + 20), 4 * (size_t)bits, &layout);
    m->rows = (uint32_t)rows;
    m->cols = (uint32_t)cols;
    m->bits = bits;
    m->rotation = (uint32_t)layout.rotation;
    m->padded = (uint32_t)layout.padded;
    m->row_bytes = (uint32_t)layout.row_bytes;
    m->seed = pmpd_le_u64(p + 24);
    m->scale = (const float *)(const void *)(p + PMPD_NUQ_HEADER_BYTES);
    m->index = (const uint8_t *)(p + layout.index_offset);
}

/* The first nonzero index bit of a row beyond the rotation, as a byte
 * offset in the row, or -1. */
static long nuq_stray_bits(const uint8_t *row, const pmpd_nuq_layout *layout, unsigned bits)
{
    size_t c;
    for (c = layout->rotation; c < layout->padded; c++)
        if (pmpd_nuq_get(row, c, bits))
            return (long)(c / PMPD_NUQ_BLOCK * 4 * bits);
    return -1;
}

PMPD_INTERNAL pmpd_status pmpd_nuq_view(const void *data, uint64_t size, uint64_t rows, uint64_t cols,
                                        uint64_t base_offset, pmpd_nuq_matrix *m, pmpd_error *err)
{
    const unsigned char *p = (const unsigned char *)data;
    pmpd_nuq_layout layout;
    pmpd_status status;
    uint32_t bits;
    status = pmpd_rotated_check_header(p, size, rows, cols, "NUQW", PMPD_NUQ_VERSION, base_offset, "nuq", err);
    if (status != PMPD_OK)
        return status;
    bits = pmpd_le_u32(p + 16);
    if (bits < PMPD_NUQ_MIN_BITS || bits > PMPD_NUQ_MAX_BITS)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, base_offset + 16, "nuq width %u is not 2, 3 or 4 bits",
                              (unsigned)bits);
    status = pmpd_rotated_check_layout(p, size, rows, cols, pmpd_nuq_compute_layout(rows, cols, bits, &layout),
                                       &layout, base_offset, "nuq", err);
    if (status != PMPD_OK)
        return status;
    status = pmpd_rotated_check_padding(p, rows, &layout, nuq_stray_bits, bits, base_offset, "nuq", err);
    if (status != PMPD_OK)
        return status;
    pmpd_nuq_bind(data, rows, cols, m);
    return PMPD_OK;
}

