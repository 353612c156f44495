/* Byte layout of TCQ tensors (tcq.h): sizes, offsets, and the checks of
 * untrusted tensor bytes. */
#include <string.h>

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/core/hadamard.h"
#include "pmpd_impl/format/le.h"
#include "pmpd_impl/weights/tcq/tcq.h"

#define TCQ_MAX_ROWS (UINT64_C(1) << 31)

/* The layout at a rotation size: the encoders' (pmpd_hadamard_size) or a
 * stored one (pmpd_rotated_rotation_fits). */
static pmpd_status tcq_layout_at(uint64_t rows, size_t rotation, uint64_t s1, uint64_t s2, pmpd_tcq_layout *out)
{
    size_t scale_bytes, bits_bytes;
    out->rotation = rotation;
    out->padded = (out->rotation + PMPD_TCQ_SHORT - 1) / PMPD_TCQ_SHORT * PMPD_TCQ_SHORT;
    out->sequences = (out->padded + PMPD_TCQ_SEQUENCE - 1) / PMPD_TCQ_SEQUENCE;
    out->first_half = out->sequences / 2;
    out->last_steps = (out->padded - (out->sequences - 1) * PMPD_TCQ_SEQUENCE) / 2;
    {
        unsigned shift, steps;
        const size_t last = pmpd_tcq_place(out->sequences - 1, out->sequences, out->first_half, out->last_steps,
                                           (unsigned)s1, (unsigned)s2, &shift, &steps);
        out->row_bytes = last + pmpd_tcq_bytes(steps, shift);
    }
    if (!pmpd_checked_mul((size_t)rows, sizeof(float), &scale_bytes) ||
        !pmpd_checked_align_up(scale_bytes, 64, &scale_bytes) ||
        !pmpd_checked_add(PMPD_TCQ_HEADER_BYTES, scale_bytes, &out->bits_offset) ||
        !pmpd_checked_mul((size_t)rows, out->row_bytes, &bits_bytes) ||
        !pmpd_checked_add(out->bits_offset, bits_bytes, &out->total))
        return PMPD_ERR_OVERFLOW;
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_tcq_compute_layout(uint64_t rows, uint64_t cols, uint64_t s1, uint64_t s2,
                                                  pmpd_tcq_layout *out)
{
    if (rows == 0 || cols == 0 || rows > TCQ_MAX_ROWS || cols > PMPD_HADAMARD_MAX || s1 < PMPD_TCQ_MIN_SHIFT ||
        s2 > PMPD_TCQ_MAX_SHIFT || (s2 != s1 && s2 != s1 + 1))
        return PMPD_ERR_INVALID_ARGUMENT;
    return tcq_layout_at(rows, pmpd_hadamard_size((size_t)cols), s1, s2, out);
}

PMPD_INTERNAL void pmpd_tcq_bind(const void *data, uint64_t rows, uint64_t cols, pmpd_tcq_matrix *m)
{
    const unsigned char *p = (const unsigned char *)data;
    pmpd_tcq_layout layout;
    /* Accepted by pmpd_tcq_view before: the layout cannot fail. */
    memset(&layout, 0, sizeof layout);
    m->shift[0] = pmpd_le_u32(p + 16);
    m->shift[1] = pmpd_le_u32(p + 20);
    tcq_layout_at(rows, pmpd_le_u32(p + 24), m->shift[0], m->shift[1], &layout);
    m->rows = (uint32_t)rows;
    m->cols = (uint32_t)cols;
    m->rotation = (uint32_t)layout.rotation;
    m->padded = (uint32_t)layout.padded;
    m->sequences = (uint32_t)layout.sequences;
    m->first_half = (uint32_t)layout.first_half;
    m->last_steps = (uint32_t)layout.last_steps;
    m->row_bytes = (uint32_t)layout.row_bytes;
    m->seed = pmpd_le_u64(p + 32);
    m->scale = (const float *)(const void *)(p + PMPD_TCQ_HEADER_BYTES);
    m->bits = (const uint8_t *)(p + layout.bits_offset);
}

/* The header fields before the size: magic, version, shape, shifts,
 * rotation, zeros. */
static pmpd_status tcq_check_header(const unsigned char *p, uint64_t rows, uint64_t cols, uint64_t base_offset,
                                    pmpd_tcq_layout *layout, pmpd_error *err)
{
    uint32_t s1, s2, rotation;
    size_t i;
    if (memcmp(p, "TCQW", 4) != 0)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_MAGIC, base_offset, "tcq tensor lacks its TCQW magic");
    if (pmpd_le_u32(p + 4) != PMPD_TCQ_VERSION)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VERSION, base_offset + 4,
                              "tcq tensor version %u is not %u (convert the model again)",
                              (unsigned)pmpd_le_u32(p + 4), (unsigned)PMPD_TCQ_VERSION);
    if (pmpd_le_u32(p + 8) != rows || pmpd_le_u32(p + 12) != cols)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, base_offset + 8,
                              "tcq header says %ux%u, the tensor entry %llux%llu", (unsigned)pmpd_le_u32(p + 8),
                              (unsigned)pmpd_le_u32(p + 12), (unsigned long long)rows, (unsigned long long)cols);
    s1 = pmpd_le_u32(p + 16);
    s2 = pmpd_le_u32(p + 20);
    if (s1 < PMPD_TCQ_MIN_SHIFT || s1 > PMPD_TCQ_MAX_SHIFT)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, base_offset + 16,
                              "tcq shift %u is not 3..8 bits per weight pair", (unsigned)s1);
    if ((s2 != s1 && s2 != s1 + 1) || s2 > PMPD_TCQ_MAX_SHIFT)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, base_offset + 20,
                              "tcq second shift %u is neither the first (%u) nor one more, up to 8", (unsigned)s2,
                              (unsigned)s1);
    if (pmpd_tcq_compute_layout(rows, cols, s1, s2, layout) != PMPD_OK)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, base_offset + 8,
                              "tcq shape %llux%llu is too large (at most 2^31 rows and 2^17 columns)",
                              (unsigned long long)rows, (unsigned long long)cols);
    rotation = pmpd_le_u32(p + 24);
    if (!pmpd_rotated_rotation_fits(cols, rotation))
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, base_offset + 24,
                              "tcq rotation size %u is not a Hadamard size from %llu up to twice that",
                              (unsigned)rotation, (unsigned long long)cols);
    if (rotation != layout->rotation && tcq_layout_at(rows, rotation, s1, s2, layout) != PMPD_OK)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, base_offset + 24, "tcq rotation size %u is too large",
                              (unsigned)rotation);
    for (i = 28; i < PMPD_TCQ_HEADER_BYTES; i++)
        if (i / 8 != 4 && p[i] != 0) /* bytes 32..39 are the seed */
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, base_offset + i, "tcq header byte %zu is not zero", i);
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_tcq_view(const void *data, uint64_t size, uint64_t rows, uint64_t cols,
                                        uint64_t base_offset, pmpd_tcq_matrix *m, pmpd_error *err)
{
    const unsigned char *p = (const unsigned char *)data;
    pmpd_tcq_layout layout;
    pmpd_status status;
    if (size < PMPD_TCQ_HEADER_BYTES)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, base_offset, "tcq tensor of %llu bytes has no header",
                              (unsigned long long)size);
    status = tcq_check_header(p, rows, cols, base_offset, &layout, err);
    if (status != PMPD_OK)
        return status;
    if (size != layout.total)
        return pmpd_error_set(err, size < layout.total ? PMPD_ERR_FORMAT_TRUNCATED : PMPD_ERR_FORMAT_SHAPE,
                              base_offset, "tcq tensor is %llu bytes, its shape and shifts need %zu",
                              (unsigned long long)size, layout.total);
    status = pmpd_rotated_check_scales(p, (size_t)rows, PMPD_TCQ_HEADER_BYTES, layout.bits_offset, base_offset, "tcq",
                                       err);
    if (status != PMPD_OK)
        return status;
    pmpd_tcq_bind(data, rows, cols, m);
    return PMPD_OK;
}

#undef TCQ_MAX_ROWS
