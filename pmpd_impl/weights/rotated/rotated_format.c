/* What the rotated formats' rows in the table of weight formats share
 * (rotated.h): NUQ's and VQ's byte layout, the working memory of the
 * two-step product, its prepare step, and the checks of the row scales
 * every such tensor stores. */
#include <math.h>
#include <string.h>

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/core/hadamard.h"
#include "pmpd_impl/format/le.h"
#include "pmpd_impl/weights/rotated/rotated.h"

PMPD_INTERNAL pmpd_status pmpd_rotated_compute_layout(uint64_t rows, uint64_t cols, size_t block_bytes,
                                                      pmpd_rotated_layout *out)
{
    return pmpd_rotated_layout_at(rows, pmpd_hadamard_size((size_t)cols), block_bytes, out);
}

PMPD_INTERNAL int pmpd_rotated_rotation_fits(uint64_t cols, uint64_t rotation)
{
    return rotation >= cols && rotation < 2 * cols && pmpd_hadamard_order((size_t)rotation) != 0;
}

PMPD_INTERNAL pmpd_status pmpd_rotated_layout_at(uint64_t rows, size_t rotation, size_t block_bytes,
                                                 pmpd_rotated_layout *out)
{
    size_t scale_bytes, index_bytes;
    out->rotation = rotation;
    out->padded = (out->rotation + PMPD_ROTATED_BLOCK - 1) / PMPD_ROTATED_BLOCK * PMPD_ROTATED_BLOCK;
    out->row_bytes = out->padded / PMPD_ROTATED_BLOCK * block_bytes;
    if (!pmpd_checked_mul((size_t)rows, sizeof(float), &scale_bytes) ||
        !pmpd_checked_align_up(scale_bytes, 64, &scale_bytes) ||
        !pmpd_checked_add(PMPD_ROTATED_HEADER_BYTES, scale_bytes, &out->index_offset) ||
        !pmpd_checked_mul((size_t)rows, out->row_bytes, &index_bytes) ||
        !pmpd_checked_add(out->index_offset, index_bytes, &out->total))
        return PMPD_ERR_OVERFLOW;
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_rotated_scratch_bytes(size_t padded, size_t n_tokens, unsigned n_threads,
                                                     size_t *bytes)
{
    size_t act, work;
    /* Per token the int8 steps, a float per block and the token's sum
     * (pmpd_rotated_act_bytes), then per thread one rotated token in
     * floats. */
    if (!pmpd_checked_mul(n_tokens, padded + (padded / PMPD_ROTATED_BLOCK + 1) * sizeof(float), &act) ||
        !pmpd_checked_mul3(n_threads ? n_threads : 1, padded, sizeof(float), &work) ||
        !pmpd_checked_add(act, work, bytes))
        return PMPD_ERR_OVERFLOW;
    return PMPD_OK;
}

PMPD_INTERNAL void pmpd_rotated_prepare_scratch(const pmpd_rotated *r, const float *x, size_t n_tokens,
                                                void *scratch, size_t begin, size_t end, unsigned worker)
{
    /* Per thread one rotated token, after the prepared input, 4-byte
     * aligned. */
    float *work = (float *)(void *)((unsigned char *)scratch + pmpd_rotated_act_bytes(r, n_tokens));
    pmpd_rotated_prepare_tokens(r, x, begin, end, n_tokens, scratch, work + (size_t)worker * r->padded);
}

PMPD_INTERNAL pmpd_status pmpd_rotated_check_scales(const unsigned char *p, size_t rows, size_t at, size_t end,
                                                    uint64_t base_offset, const char *format, pmpd_error *err)
{
    size_t i;
    for (i = 0; i < rows; i++) {
        float s;
        memcpy(&s, p + at + 4 * i, sizeof s);
        if (!isfinite(s))
            return pmpd_error_set(err, PMPD_ERR_FORMAT_NONFINITE, base_offset + at + 4 * i,
                                  "%s row %zu scale is not finite", format, i);
        if (s < 0.0f)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, base_offset + at + 4 * i,
                                  "%s row %zu scale %g is negative", format, i, (double)s);
    }
    for (i = at + 4 * rows; i < end; i++)
        if (p[i] != 0)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, base_offset + i,
                                  "%s padding byte %zu after the scales is not zero", format, i);
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_rotated_check_header(const unsigned char *p, uint64_t size, uint64_t rows,
                                                    uint64_t cols, const char *magic, uint32_t version,
                                                    uint64_t base_offset, const char *format, pmpd_error *err)
{
    if (size < PMPD_ROTATED_HEADER_BYTES)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, base_offset, "%s tensor of %llu bytes has no header",
                              format, (unsigned long long)size);
    if (memcmp(p, magic, 4) != 0)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_MAGIC, base_offset, "%s tensor lacks its %.4s magic", format,
                              magic);
    if (pmpd_le_u32(p + 4) != version)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VERSION, base_offset + 4,
                              "%s tensor version %u is not %u (convert the model again)", format,
                              (unsigned)pmpd_le_u32(p + 4), (unsigned)version);
    if (pmpd_le_u32(p + 8) != rows || pmpd_le_u32(p + 12) != cols)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, base_offset + 8,
                              "%s header says %ux%u, the tensor entry %llux%llu", format, (unsigned)pmpd_le_u32(p + 8),
                              (unsigned)pmpd_le_u32(p + 12), (unsigned long long)rows, (unsigned long long)cols);
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_rotated_check_layout(const unsigned char *p, uint64_t size, uint64_t rows,
                                                    uint64_t cols, pmpd_status layout_status,
                                                    pmpd_rotated_layout *layout, uint64_t base_offset,
                                                    const char *format, pmpd_error *err)
{
    const uint32_t rotation = pmpd_le_u32(p + 20);
    size_t i;
    if (layout_status != PMPD_OK)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, base_offset + 8,
                              "%s shape %llux%llu is too large (at most 2^31 rows and 2^17 columns)", format,
                              (unsigned long long)rows, (unsigned long long)cols);
    if (!pmpd_rotated_rotation_fits(cols, rotation))
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, base_offset + 20,
                              "%s rotation size %u is not a Hadamard size from %llu up to twice that", format,
                              (unsigned)rotation, (unsigned long long)cols);
    if (rotation != layout->rotation &&
        pmpd_rotated_layout_at(rows, rotation, layout->row_bytes / (layout->padded / PMPD_ROTATED_BLOCK), layout) !=
            PMPD_OK)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, base_offset + 20, "%s rotation size %u is too large",
                              format, (unsigned)rotation);
    for (i = 32; i < PMPD_ROTATED_HEADER_BYTES; i++)
        if (p[i] != 0)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, base_offset + i, "%s header byte %zu is not zero",
                                  format, i);
    if (size != layout->total)
        return pmpd_error_set(err, size < layout->total ? PMPD_ERR_FORMAT_TRUNCATED : PMPD_ERR_FORMAT_SHAPE,
                              base_offset, "%s tensor is %llu bytes, its shape and width need %zu", format,
                              (unsigned long long)size, layout->total);
    return pmpd_rotated_check_scales(p, (size_t)rows, PMPD_ROTATED_HEADER_BYTES, layout->index_offset, base_offset,
                                     format, err);
}

PMPD_INTERNAL pmpd_status pmpd_rotated_check_padding(const unsigned char *p, uint64_t rows,
                                                     const pmpd_rotated_layout *layout, pmpd_rotated_stray stray,
                                                     unsigned width, uint64_t base_offset, const char *format,
                                                     pmpd_error *err)
{
    size_t i;
    if (layout->padded == layout->rotation)
        return PMPD_OK;
    for (i = 0; i < rows; i++) {
        const uint8_t *row = p + layout->index_offset + i * layout->row_bytes;
        long at = stray(row, layout, width);
        if (at >= 0)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, base_offset + (uint64_t)(row - p) + (uint64_t)at,
                                  "%s row %zu has a nonzero index beyond its %zu rotated columns", format, i,
                                  layout->rotation);
    }
    return PMPD_OK;
}

PMPD_INTERNAL int pmpd_rotated_shares(const pmpd_tensor *a, const pmpd_tensor *b, pmpd_rotated_of rotated_of)
{
    const pmpd_rotated ra = rotated_of(a), rb = rotated_of(b);
    return ra.cols == rb.cols && ra.rotation == rb.rotation && ra.seed == rb.seed;
}

PMPD_INTERNAL pmpd_status pmpd_rotated_check_matrix(uint32_t n_dims, uint64_t offset, const char *format,
                                                    const char *name, uint32_t name_length, pmpd_error *err)
{
    if (n_dims != 2)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, offset, "%s tensor %.*s is not a matrix", format,
                              (int)name_length, name);
    return PMPD_OK;
}
