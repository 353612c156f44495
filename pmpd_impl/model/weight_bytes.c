/* Weight bytes one decode step streams: the machine-independent half of a
 * decode speed figure (bytes per token x tokens per second = the bandwidth
 * the weights were read at, comparable with a measured memory bandwidth). */
#include "pmpd.h"
#include "pmpd_impl/format/tensor_type.h"
#include "pmpd_impl/model/model.h"
#include "pmpd_impl/precision/anyprec.h"

/* Bytes a product with w reads: the whole tensor, except nested weights,
 * whose k-bit product reads k planes and the width-k scales and table. */
static uint64_t weight_bytes_read(const pmpd_tensor *w, unsigned bits)
{
    pmpd_anyprec_matrix m;
    unsigned k;
    if (w->type != PMPD_TENSOR_ANYPREC)
        return w->size;
    pmpd_anyprec_bind(w->data, w->dims[0], w->dims[1], &m);
    k = pmpd_anyprec_width(&m, bits);
    /* k bits of each padded 256-column superblock, then the row's scale,
     * offset and table of width k. */
    return (uint64_t)m.rows * ((uint64_t)m.superblocks * 32u * k + 2 * sizeof(float) + ((uint64_t)1 << k));
}

pmpd_status pmpd_model_weight_bytes_per_token(const pmpd_model *model, unsigned bits, uint64_t *bytes)
{
    uint64_t total, embedding_row;
    uint32_t l;
    if (!model || !bytes)
        return PMPD_ERR_INVALID_ARGUMENT;
    /* The embedding lookup reads one row; a shared classifier reads it all. */
    embedding_row = model->tok_embedding->size / model->tok_embedding->dims[0];
    total = embedding_row + weight_bytes_read(model->classifier, bits);
    for (l = 0; l < model->info.n_layers; l++) {
        const pmpd_layer_weights *lw = &model->layers[l];
        total += lw->attn_norm->size + lw->ffn_norm->size;
        total += weight_bytes_read(lw->wq, bits) + weight_bytes_read(lw->wk, bits) +
                 weight_bytes_read(lw->wv, bits) + weight_bytes_read(lw->wo, bits);
        total += weight_bytes_read(lw->w_gate, bits) + weight_bytes_read(lw->w_up, bits) +
                 weight_bytes_read(lw->w_down, bits);
        if (lw->bq)
            total += lw->bq->size + lw->bk->size + lw->bv->size;
    }
    if (model->rope_freqs)
        total += model->rope_freqs->size;
    *bytes = total + model->final_norm->size;
    return PMPD_OK;
}
