/* The tensors of a Llama model as llama.cpp names and shapes them, and
 * where each one's data lies in the GGUF file.
 *
 * Shapes are ggml's: ne[0] is the row length, so token_embd.weight is
 * [dim, vocab] and ffn_down.weight [hidden, dim].  Every matrix takes the
 * requested type, token embedding and classifier included (llama.cpp's own
 * converter often keeps output.weight at a finer type; one type throughout
 * keeps the file simple to check), except under the Q4_K_M mix
 * (tensor_types.c says which matrix gets which).  Norm vectors are F32, as llama.cpp's
 * converter writes them. */
#include "pmpd_impl/offline/synth/synth.h"

#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/core/error.h"
#include "pmpd_impl/format/container.h"

static const char *const synth_layer_tensors[] = {
    "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down",
};
#define SYNTH_PER_LAYER (sizeof synth_layer_tensors / sizeof synth_layer_tensors[0])
#define SYNTH_MAX_WEIGHTS 1099511627776.0

static pmpd_status synth_check_shape(const pmpd_synth_options *o, pmpd_error *err)
{
    const char *type_name = pmpd_synth_type_name(o->type);
    /* The mix's block is its types' (Q4_K and Q6_K: 256). */
    uint32_t block = pmpd_ggml_block_size(o->type == PMPD_GGML_MIX_Q4_K_M ? PMPD_GGML_Q4_K : o->type);
    if (!type_name)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                              "type %d is not one this generator writes (f32 0, f16 1, q4_0 2, q4_1 3, q5_0 6, "
                              "q5_1 7, q8_0 8, q4_k 12, q5_k 13, q6_k 14, iq4_nl 20, iq4_xs 23, bf16 30, q4_k_m 1000)",
                              (int)o->type);
    if (!(o->weight_std >= 0.0f && o->weight_std <= 100.0f))
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                              "weight std %g is not in 0..100 (0: the default 0.02)", (double)o->weight_std);
    if (o->dim == 0 || o->hidden_dim == 0 || o->n_layers == 0 || o->n_heads == 0 || o->n_kv_heads == 0 ||
        o->seq_len == 0)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                              "dim, hidden, layers, heads, kv-heads and seq-len must all be positive");
    if (o->dim > PMPD_MAX_HPARAM || o->hidden_dim > PMPD_MAX_HPARAM || o->n_layers > 999 ||
        o->seq_len > PMPD_MAX_HPARAM)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                              "dim, hidden and seq-len must be at most %u and layers at most 999", PMPD_MAX_HPARAM);
    if (o->head_dim == 0 && (o->dim % o->n_heads != 0 || (o->dim / o->n_heads) % 2 != 0))
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                              "heads %u do not divide dim %u into heads of even size (rotary pairs)",
                              (unsigned)o->n_heads, (unsigned)o->dim);
    if (o->n_heads % o->n_kv_heads != 0)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET, "kv-heads %u do not divide heads %u",
                              (unsigned)o->n_kv_heads, (unsigned)o->n_heads);
    if (o->dim % block != 0 || o->hidden_dim % block != 0)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                              "%s rows are blocks of %u weights: dim %u and hidden %u must be multiples of %u",
                              type_name, (unsigned)block, (unsigned)o->dim,
                              (unsigned)o->hidden_dim, (unsigned)block);
    return PMPD_OK;
}

/* Appends one tensor of layer `layer` (any value outside the layers); a
 * second dimension of 0 makes it a vector. */
static void synth_add(pmpd_synth_plan *plan, const pmpd_synth_options *o, uint32_t layer, uint64_t ne0, uint64_t ne1,
                      const char *name)
{
    pmpd_ggml_type type = pmpd_synth_matrix_type(o->type, name, layer, o->n_layers, o->tied);
    pmpd_synth_tensor *t = &plan->tensors[plan->n_tensors++];
    uint64_t rows = ne1 ? ne1 : 1;
    strncpy(t->name, name, sizeof t->name - 1);
    t->name[sizeof t->name - 1] = '\0';
    t->n_dims = ne1 ? 2 : 1;
    t->ne[0] = ne0;
    t->ne[1] = rows;
    t->type = ne1 ? type : PMPD_GGML_F32;
    t->fill = ne1 ? PMPD_SYNTH_FILL_NORMAL : PMPD_SYNTH_FILL_ONES;
    t->offset = plan->data_bytes;
    /* The model was bounded to 2^40 weights: no sum here can wrap. */
    t->bytes = rows * pmpd_ggml_row_bytes(t->type, ne0);
    plan->data_bytes += (t->bytes + PMPD_SYNTH_ALIGNMENT - 1) / PMPD_SYNTH_ALIGNMENT * PMPD_SYNTH_ALIGNMENT;
    plan->parameters += ne0 * rows;
}

PMPD_INTERNAL pmpd_status pmpd_synth_plan_make(const pmpd_synth_options *o, uint32_t vocab_size, pmpd_synth_plan *plan,
                                               pmpd_error *err)
{
    uint64_t kv_dim, q_dim;
    double weights;
    uint32_t l, k, count;
    pmpd_status status;
    memset(plan, 0, sizeof *plan);
    if ((status = synth_check_shape(o, err)) != PMPD_OK || (status = pmpd_synth_arch_check(o, err)) != PMPD_OK)
        return status;
    kv_dim = (uint64_t)pmpd_synth_head_dim(o) * o->n_kv_heads;
    q_dim = (uint64_t)pmpd_synth_head_dim(o) * o->n_heads;
    /* Each factor is below 2^24, so the count is exact in double. */
    weights = 2.0 * vocab_size * o->dim +
              (double)o->n_layers * o->dim * (2.0 * (double)q_dim + 2.0 * (double)kv_dim + 3.0 * o->hidden_dim);
    if (weights > SYNTH_MAX_WEIGHTS)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                              "the shape asks for %.3g weights, more than 2^40", weights);
    count = 4 + (o->tied ? 0 : 1) + o->n_layers * (uint32_t)(SYNTH_PER_LAYER + 3);
    plan->tensors = (pmpd_synth_tensor *)calloc(count, sizeof *plan->tensors);
    if (!plan->tensors)
        return pmpd_error_set(err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory for %u tensors",
                              (unsigned)count);
    synth_add(plan, o, 0, o->dim, vocab_size, "token_embd.weight");
    for (l = 0; l < o->n_layers; l++) {
        /* Widths of each layer tensor, in synth_layer_tensors' order. */
        const uint64_t ne[SYNTH_PER_LAYER][2] = {
            {o->dim, 0}, {o->dim, q_dim}, {o->dim, kv_dim}, {o->dim, kv_dim}, {q_dim, o->dim},
            {o->dim, 0}, {o->dim, o->hidden_dim}, {o->dim, o->hidden_dim}, {o->hidden_dim, o->dim},
        };
        for (k = 0; k < SYNTH_PER_LAYER; k++) {
            char name[32];
            sprintf(name, "blk.%u.%s.weight", (unsigned)l, synth_layer_tensors[k]);
            synth_add(plan, o, l, ne[k][0], ne[k][1], name);
            /* qwen2's biases follow their matrices, as its converter writes them. */
            if (pmpd_synth_has_biases(o) && k >= 1 && k <= 3) {
                sprintf(name, "blk.%u.%s.bias", (unsigned)l, synth_layer_tensors[k]);
                synth_add(plan, o, l, ne[k][1], 0, name);
                plan->tensors[plan->n_tensors - 1].fill = PMPD_SYNTH_FILL_NORMAL;
            }
        }
    }
    synth_add(plan, o, 0, o->dim, 0, "output_norm.weight");
    if (!o->tied)
        synth_add(plan, o, 0, o->dim, vocab_size, "output.weight");
    /* Last, so the other tensors keep their streams. */
    if (o->rope_freqs) {
        synth_add(plan, o, 0, pmpd_synth_head_dim(o) / 2, 0, "rope_freqs.weight");
        plan->tensors[plan->n_tensors - 1].fill = PMPD_SYNTH_FILL_ROPE_FREQS;
    }
    return PMPD_OK;
}

PMPD_INTERNAL void pmpd_synth_plan_free(pmpd_synth_plan *plan)
{
    free(plan->tensors);
    memset(plan, 0, sizeof *plan);
}

#undef SYNTH_PER_LAYER
#undef SYNTH_MAX_WEIGHTS
