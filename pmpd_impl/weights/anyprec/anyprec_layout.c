/* Byte layout of ANYPREC tensors: sizes, offsets and validation of
 * untrusted tensor bytes.  The layout itself is described in anyprec.h. */
#include <math.h>
#include <string.h>

#include "pmpd.h"
#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/core/error.h"
#include "pmpd_impl/weights/anyprec/anyprec.h"

#define ANYPREC_LAYOUT_ALIGN 64
#define ANYPREC_LAYOUT_MAX_DIM (UINT64_C(1) << 31)

static int anyprec_layout_add_block(size_t *cursor, size_t a, size_t b)
{
    size_t bytes;
    return pmpd_checked_mul(a, b, &bytes) && pmpd_checked_align_up(bytes, ANYPREC_LAYOUT_ALIGN, &bytes) &&
           pmpd_checked_add(*cursor, bytes, cursor);
}

/* Planes 0 and 1 share a 2-bit slice when every width reads both. */
static int anyprec_layout_paired(unsigned seed_bits)
{
    return seed_bits >= 2;
}

/* Where a version keeps the partial last superblock: log2 of the row
 * blocks sharing it (version 3 shares none). */
static unsigned anyprec_layout_tail_shift(uint64_t cols, unsigned version)
{
    return version == PMPD_ANYPREC_VERSION_UNSHARED ? 0 : pmpd_anyprec_tail_shift(cols);
}

PMPD_INTERNAL pmpd_status pmpd_anyprec_compute_layout(uint64_t rows, uint64_t cols, unsigned seed_bits,
                                                      unsigned parent_bits, unsigned version,
                                                      pmpd_anyprec_layout *out)
{
    size_t cursor = PMPD_ANYPREC_HEADER_BYTES, n_rows, n_cols, blocks, shares, per_share, rows4, bytes;
    int paired = anyprec_layout_paired(seed_bits);
    unsigned k, p, shift = anyprec_layout_tail_shift(cols, version);
    /* the last row block of a share reads its 32 bytes from byte offset
     * (share - 1) * span of the shared superblock's last row */
    const size_t slack = PMPD_ANYPREC_GROUP - (PMPD_ANYPREC_GROUP >> shift);
    if (!out || seed_bits < 1 || seed_bits > parent_bits || parent_bits > PMPD_ANYPREC_MAX_BITS || rows == 0 ||
        cols == 0 || rows > ANYPREC_LAYOUT_MAX_DIM || cols > ANYPREC_LAYOUT_MAX_DIM ||
        (version != PMPD_ANYPREC_VERSION && version != PMPD_ANYPREC_VERSION_UNSHARED))
        return PMPD_ERR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    if (!pmpd_checked_u64_to_size(rows, &n_rows) || !pmpd_checked_u64_to_size(cols, &n_cols))
        return PMPD_ERR_OVERFLOW;
    /* Row blocks of 4 in shares of 2^shift, each share its blocks' whole
     * 256-column superblocks and one partial one, each 4 rows' bytes; the
     * slack keeps the kernels' whole-superblock reads of a shared one
     * inside the slice (anyprec.h).  The dimensions are below 2^31, so the
     * sums of counts cannot wrap; the products are checked. */
    rows4 = (n_rows + PMPD_ANYPREC_ROW_BLOCK - 1) / PMPD_ANYPREC_ROW_BLOCK;
    shares = (rows4 + ((size_t)1 << shift) - 1) >> shift;
    per_share = ((n_cols / PMPD_ANYPREC_SUPER) << shift) + (n_cols % PMPD_ANYPREC_SUPER != 0);
    if (!pmpd_checked_mul3(shares, per_share, PMPD_ANYPREC_ROW_BLOCK, &blocks))
        return PMPD_ERR_OVERFLOW;
    for (p = 0; p < parent_bits; p++) {
        out->slice_offset[p] = cursor;
        if (paired && p == 0)
            continue; /* plane 1 lies in plane 0's slice */
        if (!pmpd_checked_mul(blocks, pmpd_anyprec_super_bytes(paired, p), &bytes) ||
            !pmpd_checked_add(bytes, slack, &bytes) || !anyprec_layout_add_block(&cursor, bytes, 1))
            return PMPD_ERR_OVERFLOW;
    }
    for (k = seed_bits; k <= parent_bits; k++) {
        out->width_offset[k] = cursor;
        if (!anyprec_layout_add_block(&cursor, n_rows, sizeof(float)))
            return PMPD_ERR_OVERFLOW;
        out->offset_offset[k] = cursor;
        if (!anyprec_layout_add_block(&cursor, n_rows, sizeof(float)))
            return PMPD_ERR_OVERFLOW;
        out->table_offset[k] = cursor;
        if (!anyprec_layout_add_block(&cursor, n_rows, (size_t)1 << k))
            return PMPD_ERR_OVERFLOW;
    }
    out->total = cursor;
    return PMPD_OK;
}

pmpd_status pmpd_anyprec_size(uint64_t rows, uint64_t cols, unsigned seed_bits, unsigned parent_bits,
                              uint64_t *bytes)
{
    pmpd_anyprec_layout layout;
    pmpd_status status;
    if (!bytes)
        return PMPD_ERR_INVALID_ARGUMENT;
    status = pmpd_anyprec_compute_layout(rows, cols, seed_bits, parent_bits, PMPD_ANYPREC_VERSION, &layout);
    if (status == PMPD_OK)
        *bytes = layout.total;
    return status;
}

static uint32_t anyprec_layout_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void anyprec_layout_point(const unsigned char *bytes, const pmpd_anyprec_layout *layout, uint32_t rows,
                                 uint32_t cols, unsigned seed, unsigned parent, unsigned version,
                                 pmpd_anyprec_matrix *m)
{
    unsigned k;
    memset(m, 0, sizeof *m);
    m->rows = rows;
    m->cols = cols;
    m->seed_bits = seed;
    m->parent_bits = parent;
    m->superblocks = (cols + PMPD_ANYPREC_SUPER - 1) / PMPD_ANYPREC_SUPER;
    m->full = cols / PMPD_ANYPREC_SUPER;
    m->tail_shift = anyprec_layout_tail_shift(cols, version);
    m->tail_span = PMPD_ANYPREC_GROUP >> m->tail_shift;
    m->paired = anyprec_layout_paired(seed);
    for (k = 0; k < parent; k++)
        m->slice[k] = bytes + layout->slice_offset[k];
    for (k = seed; k <= parent; k++) {
        /* Offsets are multiples of 64 from a 64-aligned tensor start. */
        m->scales[k] = (const float *)(const void *)(bytes + layout->width_offset[k]);
        m->offsets[k] = (const float *)(const void *)(bytes + layout->offset_offset[k]);
        m->tables[k] = bytes + layout->table_offset[k];
    }
}

PMPD_INTERNAL void pmpd_anyprec_bind(const void *data, uint64_t rows, uint64_t cols, pmpd_anyprec_matrix *m)
{
    const unsigned char *bytes = (const unsigned char *)data;
    pmpd_anyprec_layout layout;
    pmpd_anyprec_compute_layout(rows, cols, bytes[4], bytes[5], bytes[6], &layout);
    anyprec_layout_point(bytes, &layout, (uint32_t)rows, (uint32_t)cols, bytes[4], bytes[5], bytes[6], m);
}

PMPD_INTERNAL pmpd_status pmpd_anyprec_view(const void *data, uint64_t size, uint64_t rows, uint64_t cols,
                                            uint64_t base_offset, pmpd_anyprec_matrix *m, pmpd_error *err)
{
    const unsigned char *bytes = (const unsigned char *)data;
    pmpd_anyprec_layout layout;
    unsigned seed, parent, k, i;
    size_t e;
    uint32_t r;
    if (!data || !m)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET, "anyprec: NULL argument");
    if ((uintptr_t)data % sizeof(float) != 0)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_ALIGNMENT, base_offset, "anyprec: tensor data not 4-byte aligned");
    if (size < PMPD_ANYPREC_HEADER_BYTES)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_TRUNCATED, base_offset,
                              "anyprec: tensor of %llu bytes has no header", (unsigned long long)size);
    if (memcmp(bytes, "ANYP", 4) != 0)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_MAGIC, base_offset, "anyprec: header magic is not ANYP");
    seed = bytes[4];
    parent = bytes[5];
    if (seed < 1 || seed > parent || parent > PMPD_ANYPREC_MAX_BITS)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, base_offset + 4,
                              "anyprec: seed_bits %u / parent_bits %u invalid", seed, parent);
    if (bytes[6] != PMPD_ANYPREC_VERSION && bytes[6] != PMPD_ANYPREC_VERSION_UNSHARED)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VERSION, base_offset + 6,
                              "anyprec: tensor layout version %u, this build reads versions %u and %u only "
                              "(re-convert the model with pmpd-convert --type anyprec)",
                              bytes[6], PMPD_ANYPREC_VERSION_UNSHARED, PMPD_ANYPREC_VERSION);
    for (i = 7; i < PMPD_ANYPREC_HEADER_BYTES; i++)
        if ((i < 8 || i >= 16) && bytes[i] != 0)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, base_offset + i,
                                  "anyprec: reserved header byte %u not zero", i);
    if (anyprec_layout_u32(bytes + 8) != rows || anyprec_layout_u32(bytes + 12) != cols)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, base_offset + 8,
                              "anyprec: header shape %lux%lu disagrees with tensor shape %llux%llu",
                              (unsigned long)anyprec_layout_u32(bytes + 8),
                              (unsigned long)anyprec_layout_u32(bytes + 12), (unsigned long long)rows,
                              (unsigned long long)cols);
    if (pmpd_anyprec_compute_layout(rows, cols, seed, parent, bytes[6], &layout) != PMPD_OK)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, base_offset + 8, "anyprec: shape %llux%llu unsupported",
                              (unsigned long long)rows, (unsigned long long)cols);
    if (size != layout.total)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, base_offset,
                              "anyprec: tensor has %llu bytes, its header needs %llu", (unsigned long long)size,
                              (unsigned long long)layout.total);
    anyprec_layout_point(bytes, &layout, (uint32_t)rows, (uint32_t)cols, seed, parent, bytes[6], m);
    for (k = seed; k <= parent; k++)
        for (r = 0; r < m->rows; r++) {
            if (!isfinite(m->scales[k][r]) || m->scales[k][r] < 0.0f)
                return pmpd_error_set(err, PMPD_ERR_FORMAT_NONFINITE,
                                      base_offset + layout.width_offset[k] + (uint64_t)r * sizeof(float),
                                      "anyprec: scale of row %lu at width %u is not a finite non-negative number",
                                      (unsigned long)r, k);
            if (!isfinite(m->offsets[k][r]))
                return pmpd_error_set(err, PMPD_ERR_FORMAT_NONFINITE,
                                      base_offset + layout.offset_offset[k] + (uint64_t)r * sizeof(float),
                                      "anyprec: offset of row %lu at width %u is not finite", (unsigned long)r, k);
        }
    /* Larger entries would overflow the kernels' int16 pair sums. */
    for (k = seed; k <= parent; k++)
        for (e = 0; e < ((size_t)m->rows << k); e++)
            if (m->tables[k][e] > pmpd_anyprec_table_max(k))
                return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, base_offset + layout.table_offset[k] + e,
                                      "anyprec: table entry %u above %u at width %u", m->tables[k][e],
                                      pmpd_anyprec_table_max(k), k);
    pmpd_error_clear(err);
    return PMPD_OK;
}

#undef ANYPREC_LAYOUT_ALIGN
#undef ANYPREC_LAYOUT_MAX_DIM
