/* Product-quantization layout and the batch encoder (nearest centroid). */
#include "pmpd_impl/kvcache/pq_codebook.h"

pmpd_status pmpd_pq_layout_init(pmpd_pq_layout *out, uint32_t dim, uint32_t sub_dim, uint32_t bits)
{
    if (!out || (sub_dim != 2 && sub_dim != 4) || dim == 0 || dim % sub_dim != 0 || bits < 1 || bits > 8)
        return PMPD_ERR_INVALID_ARGUMENT;
    out->dim = dim;
    out->sub_dim = sub_dim;
    out->n_sub = dim / sub_dim;
    out->n_centroids = 1u << bits;
    return PMPD_OK;
}

size_t pmpd_pq_codebook_floats(const pmpd_pq_layout *layout)
{
    /* dim * n_centroids <= UINT32_MAX * 256: fits a 64-bit size_t; on 32-bit
     * hosts head dimensions are far below the limit. */
    return (size_t)layout->dim * layout->n_centroids;
}

/* Nearest centroid of one subspace; ties go to the lowest index so the
 * result does not depend on evaluation order. */
static uint8_t pq_encode_nearest(const float *centroids, uint32_t n_centroids, uint32_t sub_dim,
                                 const float *x)
{
    uint32_t c, j, best = 0;
    float best_distance = 0.0f;
    for (c = 0; c < n_centroids; c++) {
        const float *centroid = centroids + (size_t)c * sub_dim;
        float distance = 0.0f;
        for (j = 0; j < sub_dim; j++) {
            float diff = x[j] - centroid[j];
            distance += diff * diff;
        }
        if (c == 0 || distance < best_distance) {
            best = c;
            best_distance = distance;
        }
    }
    return (uint8_t)best;
}

void pmpd_pq_encode(const pmpd_pq_codebook *book, const float *vectors, size_t stride, size_t count,
                    uint8_t *codes)
{
    const pmpd_pq_layout *lay = &book->layout;
    size_t i;
    uint32_t s;
    for (i = 0; i < count; i++)
        for (s = 0; s < lay->n_sub; s++)
            codes[i * lay->n_sub + s] =
                pq_encode_nearest(book->centroids + (size_t)s * lay->n_centroids * lay->sub_dim,
                                  lay->n_centroids, lay->sub_dim, vectors + i * stride + (size_t)s * lay->sub_dim);
}
