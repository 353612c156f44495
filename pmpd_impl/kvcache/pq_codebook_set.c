/* Validation of the KV-codebook section (untrusted model bytes). */
#include <math.h>
#include <string.h>

#include "pmpd_impl/kvcache/pq_codebook_set.h"

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/core/error.h"
#include "pmpd_impl/format/le.h"

pmpd_status pmpd_pq_codebook_set_parse(const void *data, uint64_t size, uint32_t head_dim, uint32_t n_layers,
                                       pmpd_pq_codebook_set *out, pmpd_error *err)
{
    const unsigned char *p = (const unsigned char *)data;
    uint32_t field[8], i;
    uint64_t pair_floats, total_floats = 0, expected = 0;
    size_t count, k;
    const float *centroids;
    pmpd_pq_codebook_set set;
    if (!data || !out || head_dim == 0 || n_layers == 0)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET, "NULL section or empty model shape");
    if (size < PMPD_PQ_SECTION_HEADER_BYTES)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_TRUNCATED, size, "KV codebook section shorter than its header");
    for (i = 0; i < 8; i++)
        field[i] = pmpd_le_u32(p + 4 * i);
    if (field[0] != head_dim)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, 0, "KV codebook head_dim %u differs from the model's %u",
                              (unsigned)field[0], (unsigned)head_dim);
    if (pmpd_pq_layout_init(&set.keys, field[0], field[1], field[3]) != PMPD_OK)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, 4, "KV codebook key_sub_dim %u or bits %u invalid",
                              (unsigned)field[1], (unsigned)field[3]);
    if (pmpd_pq_layout_init(&set.values, field[0], field[2], field[3]) != PMPD_OK)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, 8, "KV codebook value_sub_dim %u invalid",
                              (unsigned)field[2]);
    if (field[4] != 1 && field[4] != n_layers)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, 16, "KV codebook n_books %u is neither 1 nor n_layers %u",
                              (unsigned)field[4], (unsigned)n_layers);
    for (i = 5; i < 8; i++)
        if (field[i] != 0)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, 4 * i, "KV codebook reserved field is not zero");
    set.n_books = field[4];
    pair_floats = (uint64_t)pmpd_pq_codebook_floats(&set.keys) + pmpd_pq_codebook_floats(&set.values);
    if (!pmpd_checked_mul_u64(pair_floats, set.n_books, &total_floats) ||
        !pmpd_checked_mul_u64(total_floats, sizeof(float), &expected) ||
        !pmpd_checked_add_u64(expected, PMPD_PQ_SECTION_HEADER_BYTES, &expected) || expected != size ||
        !pmpd_checked_u64_to_size(total_floats, &count))
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, 16, "KV codebook section is %llu bytes, its header needs %llu",
                              (unsigned long long)size, (unsigned long long)expected);
    if ((uintptr_t)(p + PMPD_PQ_SECTION_HEADER_BYTES) % sizeof(float) != 0)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_ALIGNMENT, PMPD_PQ_SECTION_HEADER_BYTES,
                              "KV codebook centroids are not 4-byte aligned");
    centroids = (const float *)(const void *)(p + PMPD_PQ_SECTION_HEADER_BYTES);
    for (k = 0; k < count; k++)
        if (!isfinite(pmpd_le_f32(p + PMPD_PQ_SECTION_HEADER_BYTES + 4 * k)))
            return pmpd_error_set(err, PMPD_ERR_FORMAT_NONFINITE, PMPD_PQ_SECTION_HEADER_BYTES + 4 * (uint64_t)k,
                                  "KV codebook centroid %llu is not finite", (unsigned long long)k);
    set.centroids = centroids;
    *out = set;
    pmpd_error_clear(err);
    return PMPD_OK;
}

void pmpd_pq_codebook_set_layer(const pmpd_pq_codebook_set *set, uint32_t layer, pmpd_pq_codebook *keys,
                                pmpd_pq_codebook *values)
{
    size_t key_floats = pmpd_pq_codebook_floats(&set->keys);
    size_t book = set->n_books == 1 ? 0 : layer;
    keys->layout = set->keys;
    values->layout = set->values;
    keys->centroids = set->centroids + book * (key_floats + pmpd_pq_codebook_floats(&set->values));
    values->centroids = keys->centroids + key_floats;
}
