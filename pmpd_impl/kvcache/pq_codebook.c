/* Product-quantization layout and the batch encoder (nearest centroid). */
#include "pmpd_impl/kvcache/pq_codebook.h"

#include "pmpd_impl/kvcache/attention_kernels.h"

pmpd_status pmpd_pq_layout_init(pmpd_pq_layout *out, uint32_t dim, uint32_t sub_dim, uint32_t bits)
{
    if (!out || (sub_dim != 2 && sub_dim != 4) || dim == 0 || dim % sub_dim != 0 || bits < 1 || bits > 8)
        return PMPD_ERR_INVALID_ARGUMENT;
    out->dim = dim;
    out->sub_dim = sub_dim;
    out->n_sub = dim / sub_dim;
    out->n_centroids = 1u << bits;
    out->packed = bits <= 4;
    out->code_bytes = out->packed ? (out->n_sub + 1) / 2 : out->n_sub;
    return PMPD_OK;
}

size_t pmpd_pq_codebook_floats(const pmpd_pq_layout *layout)
{
    /* dim * n_centroids <= UINT32_MAX * 256: fits a 64-bit size_t; on 32-bit
     * hosts head dimensions are far below the limit. */
    return (size_t)layout->dim * layout->n_centroids;
}

void pmpd_pq_encode(const pmpd_pq_codebook *book, const float *vectors, size_t stride, size_t count,
                    size_t first, uint8_t *codes)
{
    const pmpd_pq_layout *lay = &book->layout;
    /* One subspace's codebook at a time, transposed so the SIMD search
     * reads several centroids per load; 4 x 256 floats at most. */
    float columns[4 * 256];
    size_t i;
    uint32_t s, c, j;
    if (lay->packed)
        for (i = 0; i < count; i++)
            for (s = 0; s < lay->code_bytes; s++)
                codes[pmpd_pq_code_offset(lay, first + i, s)] = 0;
    for (s = 0; s < lay->n_sub; s++) {
        const float *sub_book = book->centroids + (size_t)s * lay->n_centroids * lay->sub_dim;
        for (c = 0; c < lay->n_centroids; c++)
            for (j = 0; j < lay->sub_dim; j++)
                columns[j * lay->n_centroids + c] = sub_book[c * lay->sub_dim + j];
        for (i = 0; i < count; i++) {
            uint32_t code = PMPD_PQ_NEAREST_KERNEL(columns, lay->n_centroids, lay->sub_dim,
                                                            vectors + i * stride + (size_t)s * lay->sub_dim);
            if (lay->packed)
                codes[pmpd_pq_code_offset(lay, first + i, s / 2)] |= (uint8_t)(code << (s % 2 * 4));
            else
                codes[pmpd_pq_code_offset(lay, first + i, s)] = (uint8_t)code;
        }
    }
}

PMPD_INTERNAL void pmpd_pq_decode(const pmpd_pq_codebook *book, const uint8_t *codes, size_t t, float *vector)
{
    const pmpd_pq_layout *lay = &book->layout;
    uint32_t s, j;
    for (s = 0; s < lay->n_sub; s++) {
        const float *centroid =
            book->centroids + ((size_t)s * lay->n_centroids + pmpd_pq_code(lay, codes, t, s)) * lay->sub_dim;
        for (j = 0; j < lay->sub_dim; j++)
            vector[s * lay->sub_dim + j] = centroid[j];
    }
}
