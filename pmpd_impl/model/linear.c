#include "pmpd_impl/model/linear.h"

#include "pmpd_impl/weights/format.h"

PMPD_INTERNAL pmpd_status pmpd_linear_scratch_bytes(const pmpd_tensor *w, size_t n_tokens, unsigned n_threads,
                                                    size_t *bytes)
{
    const pmpd_weight_format *f = pmpd_weight_format_of(w->type);
    if (!f || !f->linear)
        return PMPD_ERR_UNSUPPORTED;
    if (!f->scratch_bytes) {
        *bytes = 0;
        return PMPD_OK;
    }
    return f->scratch_bytes(w, n_tokens, n_threads, bytes);
}

PMPD_INTERNAL void pmpd_linear(const pmpd_tensor *w, const float *x, size_t n_tokens, float *y, void *scratch,
                               pmpd_pool *pool, unsigned bits)
{
    pmpd_weight_format_of(w->type)->linear(w, x, n_tokens, y, scratch, pool, bits);
}

PMPD_INTERNAL void pmpd_linear_row(const pmpd_tensor *w, size_t r, float *out)
{
    pmpd_weight_format_of(w->type)->row(w, r, out);
}

PMPD_INTERNAL uint64_t pmpd_linear_bytes_read(const pmpd_tensor *w, unsigned bits)
{
    const pmpd_weight_format *f = pmpd_weight_format_of(w->type);
    return f->bytes_read ? f->bytes_read(w, bits) : w->size;
}
