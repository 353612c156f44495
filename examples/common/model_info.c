#include "examples/common/model_info.h"

#include <string.h>

#include "examples/common/chat.h"

/* Per type: tensors and bytes, in type order. */
#define INFO_MAX_TYPES 16

static pmpd_status info_plan(const pmpd_model *model, size_t context, uint32_t kv_type, size_t *bytes)
{
    pmpd_session_config config;
    size_t session_bytes = 0, sampler_bytes = 0;
    pmpd_status st;
    pmpd_session_config_init(&config);
    config.context_length = (uint32_t)context;
    config.kv_type = kv_type;
    if ((st = pmpd_session_plan(model, &config, &session_bytes)) != PMPD_OK)
        return st;
    if ((st = pmpd_sampler_plan(pmpd_model_get_info(model)->vocab_size, &sampler_bytes)) != PMPD_OK)
        return st;
    *bytes = session_bytes + sampler_bytes;
    return PMPD_OK;
}

pmpd_status example_print_model_info(FILE *out, const pmpd_model *model, size_t context, size_t model_arena_bytes)
{
    const pmpd_model_info *m = pmpd_model_get_info(model);
    pmpd_tokenizer_info tok;
    uint64_t type_count[INFO_MAX_TYPES], type_bytes[INFO_MAX_TYPES], weight_bytes = 0;
    uint32_t i, n = pmpd_model_tensor_count(model);
    size_t f32_bytes = 0, f16_bytes = 0;
    pmpd_status st;
    static unsigned char scratch_block[1 << 16]; /* vocabulary probe for the chat family */
    pmpd_arena scratch;

    if (!context)
        context = m->seq_len;
    fprintf(out, "architecture: %s, rope %s", m->features & PMPD_MODEL_QKV_BIAS ? "qwen2" : "llama",
            m->rope_style == PMPD_ROPE_NEOX ? "neox" : "adjacent");
    fprintf(out, ", features:%s%s%s, classifier %s\n", m->features & PMPD_MODEL_QKV_BIAS ? " qkv-bias" : "",
            m->features & PMPD_MODEL_ROPE_FREQS ? " rope-freqs" : "", m->features ? "" : " none",
            m->shared_classifier ? "tied to the embedding" : "separate");
    fprintf(out, "shape: dim %u, hidden %u, layers %u, heads %u, kv heads %u, head_dim %u, vocab %u, seq_len %u\n",
            (unsigned)m->dim, (unsigned)m->hidden_dim, (unsigned)m->n_layers, (unsigned)m->n_heads,
            (unsigned)m->n_kv_heads, (unsigned)m->head_dim, (unsigned)m->vocab_size, (unsigned)m->seq_len);
    fprintf(out, "rope theta %g, norm eps %g\n", (double)m->rope_theta, (double)m->norm_eps);
    if (pmpd_model_get_tokenizer_info(model, &tok) == PMPD_OK && tok.kind) {
        pmpd_arena_init(&scratch, scratch_block, sizeof scratch_block);
        fprintf(out, "tokenizer: %s%s%s, %u tokens, %u merges, %u special; bos %u, eos %u, eot ",
                tok.kind == 1 ? "sentencepiece (llama)" : "byte-level bpe (gpt2)", tok.pre ? ", pre " : "",
                tok.pre ? tok.pre : "", (unsigned)tok.n_tokens, (unsigned)tok.n_merges, (unsigned)tok.n_special,
                (unsigned)tok.bos_id, (unsigned)tok.eos_id);
        if (tok.eot_id >= 0)
            fprintf(out, "%d", (int)tok.eot_id);
        else
            fputs("none", out);
        fprintf(out, "; add bos %s, add eos %s\n", tok.add_bos ? "yes" : "no", tok.add_eos ? "yes" : "no");
        {
            const char *source, *text;
            size_t length;
            example_chat_family f = example_chat_detect_model(model, &scratch, &source);
            fprintf(out, "chat template: ");
            if (pmpd_model_chat_template(model, &text, &length) == PMPD_OK)
                fprintf(out, "stored (%zu bytes), ", length);
            else
                fprintf(out, "none stored, ");
            fprintf(out, "format %s%s%s\n", example_chat_family_name(f), source ? " by its " : "",
                    source ? source : "");
        }
    } else {
        fputs("tokenizer: none\n", out);
    }
    memset(type_count, 0, sizeof type_count);
    memset(type_bytes, 0, sizeof type_bytes);
    for (i = 0; i < n; i++) {
        pmpd_tensor_desc d;
        if (pmpd_model_tensor_at(model, i, &d) != PMPD_OK)
            continue;
        if (d.type < INFO_MAX_TYPES) {
            type_count[d.type]++;
            type_bytes[d.type] += d.bytes;
        }
        weight_bytes += d.bytes;
    }
    fprintf(out, "tensors: %u, %llu bytes:", (unsigned)n, (unsigned long long)weight_bytes);
    for (i = 0; i < INFO_MAX_TYPES; i++)
        if (type_count[i]) {
            const char *name = pmpd_tensor_type_name((pmpd_tensor_type)i);
            fprintf(out, " %s %llu (%llu bytes)", name ? name : "?", (unsigned long long)type_count[i],
                    (unsigned long long)type_bytes[i]);
        }
    fprintf(out, "\nfile: %llu bytes; model tables %zu arena bytes\n",
            (unsigned long long)pmpd_model_container_bytes(model), model_arena_bytes);
    if ((st = info_plan(model, context, PMPD_KV_F32, &f32_bytes)) != PMPD_OK ||
        (st = info_plan(model, context, PMPD_KV_F16, &f16_bytes)) != PMPD_OK)
        return st;
    fprintf(out, "session arena for %zu positions (batch 128, 1 thread, sampler included): %zu bytes with an f32 KV "
                 "cache, %zu with f16\n",
            context, f32_bytes, f16_bytes);
    return PMPD_OK;
}
