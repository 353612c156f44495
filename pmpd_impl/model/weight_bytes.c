/* Weight bytes one decode step streams: the machine-independent half of a
 * decode speed figure (bytes per token x tokens per second = the bandwidth
 * the weights were read at, comparable with a measured memory bandwidth). */
#include "pmpd.h"
#include "pmpd_impl/model/linear.h"
#include "pmpd_impl/model/model.h"

pmpd_status pmpd_model_weight_bytes_per_token(const pmpd_model *model, unsigned bits, uint64_t *bytes)
{
    uint64_t total, embedding_row;
    uint32_t l;
    if (!model || !bytes)
        return PMPD_ERR_INVALID_ARGUMENT;
    /* The embedding lookup reads one row; a shared classifier reads it all. */
    embedding_row = model->tok_embedding->size / model->tok_embedding->dims[0];
    total = embedding_row + pmpd_linear_bytes_read(model->classifier, bits);
    for (l = 0; l < model->info.n_layers; l++) {
        const pmpd_layer_weights *lw = &model->layers[l];
        total += lw->attn_norm->size + lw->ffn_norm->size;
        total += pmpd_linear_bytes_read(lw->wq, bits) + pmpd_linear_bytes_read(lw->wk, bits) +
                 pmpd_linear_bytes_read(lw->wv, bits) + pmpd_linear_bytes_read(lw->wo, bits);
        total += pmpd_linear_bytes_read(lw->w_gate, bits) + pmpd_linear_bytes_read(lw->w_up, bits) +
                 pmpd_linear_bytes_read(lw->w_down, bits);
        if (lw->bq)
            total += lw->bq->size + lw->bk->size + lw->bv->size;
    }
    if (model->rope_freqs)
        total += model->rope_freqs->size;
    *bytes = total + model->final_norm->size;
    return PMPD_OK;
}
