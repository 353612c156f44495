/* Byte layout of VQ tensors (vq.h): sizes, offsets, and the checks of
 * untrusted tensor bytes. */
#include <string.h>

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/core/hadamard.h"
#include "pmpd_impl/format/le.h"
#include "pmpd_impl/weights/vq/vq.h"

PMPD_INTERNAL pmpd_status pmpd_vq_compute_layout(uint64_t rows, uint64_t cols, uint64_t pair_bits,
                                                 pmpd_vq_layout *out)
{
    if (rows == 0 || cols == 0 || rows > PMPD_ROTATED_MAX_ROWS || cols > PMPD_HADAMARD_MAX ||
        pair_bits < PMPD_VQ_MIN_PAIR_BITS || pair_bits > PMPD_VQ_MAX_PAIR_BITS)
        return PMPD_ERR_INVALID_ARGUMENT;
    return pmpd_rotated_compute_layout(rows, cols, 2 * (size_t)pair_bits, out);
}

PMPD_INTERNAL void pmpd_vq_bind(const void *data, uint64_t rows, uint64_t cols, pmpd_vq_matrix *m)
{
    const unsigned char *p = (const unsigned char *)data;
    pmpd_vq_layout layout;
    uint32_t pair_bits = pmpd_le_u32(p + 16);
    /* Accepted by pmpd_vq_view before: the layout cannot fail. */
    memset(&layout, 0, sizeof layout);
    pmpd_rotated_layout_at(rows, pmpd_le_u32(p + 20), 2 * (size_t)pair_bits, &layout);
    m->rows = (uint32_t)rows;
    m->cols = (uint32_t)cols;
    m->pair_bits = pair_bits;
    m->rotation = (uint32_t)layout.rotation;
    m->padded = (uint32_t)layout.padded;
    m->row_bytes = (uint32_t)layout.row_bytes;
    m->seed = pmpd_le_u64(p + 24);
    m->scale = (const float *)(const void *)(p + PMPD_VQ_HEADER_BYTES);
    m->index = (const uint8_t *)(p + layout.index_offset);
}

/* The byte offset in a row of the first pair beyond the rotation whose
 * index is not 0, or -1. */
static long vq_stray_index(const uint8_t *row, const pmpd_vq_layout *layout, unsigned pair_bits)
{
    size_t j;
    for (j = (layout->rotation + 1) / 2; j < layout->padded / 2; j++)
        if (pmpd_vq_get(row, j, pair_bits))
            return (long)(j / 16 * 2 * pair_bits);
    return -1;
}

/* The header's fields against the tensor entry's shape, the scales. */
static pmpd_status vq_check_header(const unsigned char *p, uint64_t size, uint64_t rows, uint64_t cols,
                                   uint64_t base_offset, pmpd_vq_layout *layout, pmpd_error *err)
{
    uint32_t pair_bits;
    pmpd_status status = pmpd_rotated_check_header(p, size, rows, cols, "VQ2W", PMPD_VQ_VERSION, base_offset, "vq", err);
    if (status != PMPD_OK)
        return status;
    pair_bits = pmpd_le_u32(p + 16);
    if (pair_bits < PMPD_VQ_MIN_PAIR_BITS || pair_bits > PMPD_VQ_MAX_PAIR_BITS)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, base_offset + 16,
                              "vq index width %u is not 4 to 8 bits per pair", (unsigned)pair_bits);
    return pmpd_rotated_check_layout(p, size, rows, cols, pmpd_vq_compute_layout(rows, cols, pair_bits, layout),
                                     layout, base_offset, "vq", err);
}

PMPD_INTERNAL pmpd_status pmpd_vq_view(const void *data, uint64_t size, uint64_t rows, uint64_t cols,
                                       uint64_t base_offset, pmpd_vq_matrix *m, pmpd_error *err)
{
    const unsigned char *p = (const unsigned char *)data;
    pmpd_vq_layout layout;
    pmpd_status status = vq_check_header(p, size, rows, cols, base_offset, &layout, err);
    unsigned pair_bits;
    if (status != PMPD_OK)
        return status;
    pair_bits = pmpd_le_u32(p + 16);
    status = pmpd_rotated_check_padding(p, rows, &layout, vq_stray_index, pair_bits, base_offset, "vq", err);
    if (status != PMPD_OK)
        return status;
    pmpd_vq_bind(data, rows, cols, m);
    return PMPD_OK;
}

