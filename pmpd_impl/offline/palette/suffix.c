#include "pmpd_impl/offline/palette/suffix.h"

#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/model/session.h"

PMPD_INTERNAL pmpd_status pmpd_palette_suffix_open(const pmpd_model *model, uint32_t first, uint32_t count,
                                                   uint32_t length, unsigned threads, pmpd_palette_suffix *s)
{
    const size_t dim = model->info.dim;
    uint32_t t;
    pmpd_status st;
    memset(s, 0, sizeof *s);
    if (first + count > model->info.n_layers || count == 0 || length == 0)
        return PMPD_ERR_INVALID_ARGUMENT;
    if (length > model->info.vocab_size)
        return PMPD_ERR_UNSUPPORTED;
    s->first = first;
    s->length = length;
    s->view = *model;
    s->view.info.n_layers = count;
    s->view.layers = model->layers + first;
    s->table.name = "palette.suffix.hidden";
    s->table.name_length = (uint32_t)strlen(s->table.name);
    s->table.type = PMPD_TENSOR_F32;
    s->table.n_dims = 2;
    s->table.dims[0] = length;
    s->table.dims[1] = dim;
    s->table.size = (uint64_t)length * dim * sizeof(float);
    s->view.tok_embedding = &s->table;
    s->positions = (int32_t *)malloc(length * sizeof *s->positions);
    if (!s->positions)
        return PMPD_ERR_OUT_OF_MEMORY;
    for (t = 0; t < length; t++)
        s->positions[t] = (int32_t)t;
    st = pmpd_calibration_session_open_threads(&s->view, length, threads, &s->cs);
    if (st == PMPD_OK && s->cs.session->config.prefill_batch < length)
        st = PMPD_ERR_UNSUPPORTED;
    return st;
}

PMPD_INTERNAL pmpd_status pmpd_palette_suffix_run(pmpd_palette_suffix *s, const float *hidden, float *logits,
                                                  float *out)
{
    const float *unused;
    pmpd_status st;
    s->table.data = hidden;
    st = pmpd_session_reset(s->cs.session);
    if (st != PMPD_OK)
        return st;
    if (logits)
        return pmpd_session_prefill_all(s->cs.session, s->positions, s->length, logits);
    /* One batch (checked at open): the session's residual rows are the
     * stream after the last layer; the classifier sees only the last. */
    st = pmpd_session_prefill(s->cs.session, s->positions, s->length, &unused);
    if (st == PMPD_OK)
        memcpy(out, s->cs.session->x, (size_t)s->length * s->view.info.dim * sizeof(float));
    return st;
}

PMPD_INTERNAL void pmpd_palette_suffix_close(pmpd_palette_suffix *s)
{
    pmpd_calibration_session_close(&s->cs);
    free(s->positions);
    memset(s, 0, sizeof *s);
}
