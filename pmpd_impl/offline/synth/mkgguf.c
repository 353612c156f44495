/* pmpd_synth_gguf: a Llama GGUF v3 file of random weights, for measuring
 * speed at real shapes and for checking that llama.cpp and pmpd read the
 * same file alike.
 *
 * The file is streamed: header and metadata, the tensor infos (every
 * offset follows from the shapes), then the data one row at a time, so
 * memory stays at a row however large the model.  It goes to OUT.tmp,
 * renamed to OUT only once complete. */
#include "pmpd_impl/offline/synth/synth.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/core/error.h"
#include "pmpd_impl/offline/format/atomic_file.h"
#include "pmpd_impl/offline/import/import.h"

#define SYNTH_STREAM_BUFFER (1u << 20)

void pmpd_synth_options_default(pmpd_synth_options *options)
{
    /* TinyLlama-1.1B: dim, hidden, layers, heads, KV heads, context. */
    /* The architecture variants and weight_std after progress_context:
     * zero or NULL is llama's defaults (arch.c); then no byte-level BPE
     * vocabulary, no chat template. */
    static const pmpd_synth_options tinyllama = {2048, 5632, 22, 32, 4, 2048, PMPD_GGML_Q4_0, 1, 0, NULL, NULL, NULL,
                                                 NULL, 0, 0.0f, 0.0f, 0, 0.0f, NULL, NULL, NULL};
    *options = tinyllama;
}

/* llama.cpp's general.file_type (enum llama_ftype) for a model whose
 * matrices are all `type`, or for the mix. */
static uint32_t synth_file_type(pmpd_ggml_type type)
{
    switch (type) {
    case PMPD_GGML_F16: return 1;
    case PMPD_GGML_Q4_0: return 2;
    case PMPD_GGML_Q4_1: return 3;
    case PMPD_GGML_Q8_0: return 7;
    case PMPD_GGML_Q5_0: return 8;
    case PMPD_GGML_Q5_1: return 9;
    case PMPD_GGML_Q4_K: return 14;       /* Q4_K_S: Q4_K throughout */
    case PMPD_GGML_MIX_Q4_K_M: return 15;
    case PMPD_GGML_Q5_K: return 16;       /* Q5_K_S */
    case PMPD_GGML_Q6_K: return 18;
    case PMPD_GGML_IQ4_NL: return 25;
    case PMPD_GGML_IQ4_XS: return 30;
    case PMPD_GGML_BF16: return 32;
    default: return 0; /* ALL_F32 */
    }
}

static pmpd_status synth_load_vocab(const char *path, pmpd_vocab *v, pmpd_error *err)
{
    unsigned char *data;
    size_t size;
    pmpd_status status = pmpd_import_read_file(path, &data, &size, err);
    if (status != PMPD_OK)
        return status;
    status = pmpd_import_llama2c_tokenizer(data, size, 0, v, err);
    free(data);
    if (status == PMPD_OK && v->n_tokens < 3)
        status = pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, PMPD_NO_OFFSET,
                                "%u tokens leave no room for <unk>, <s> and </s> (ids 0, 1, 2)",
                                (unsigned)v->n_tokens);
    if (status != PMPD_OK) {
        pmpd_vocab_free(v);
        if (err) {
            /* Name the file: the importer's message only knows offsets. */
            char reason[PMPD_ERROR_MESSAGE_SIZE];
            memcpy(reason, err->message, sizeof reason);
            pmpd_error_set(err, status, err->offset, "tokenizer %s: %s", path, reason);
        }
    }
    return status;
}

static void synth_write_metadata(pmpd_gguf_out *o, const pmpd_synth_options *opt, const pmpd_vocab *v,
                                 const pmpd_synth_gpt2 *g)
{
    char key[96];
    const char *arch = pmpd_synth_arch(opt);
    pmpd_gguf_kv_string(o, "general.architecture", arch);
    pmpd_gguf_kv_string(o, "general.name", "pmpd synthetic llama");
    pmpd_gguf_kv_u32(o, "general.alignment", PMPD_SYNTH_ALIGNMENT);
    pmpd_gguf_kv_u32(o, "general.file_type", synth_file_type(opt->type));
#define SYNTH_KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, arch), key)
    pmpd_gguf_kv_u32(o, SYNTH_KEY("context_length"), opt->seq_len);
    pmpd_gguf_kv_u32(o, SYNTH_KEY("embedding_length"), opt->dim);
    pmpd_gguf_kv_u32(o, SYNTH_KEY("block_count"), opt->n_layers);
    pmpd_gguf_kv_u32(o, SYNTH_KEY("feed_forward_length"), opt->hidden_dim);
    pmpd_gguf_kv_u32(o, SYNTH_KEY("attention.head_count"), opt->n_heads);
    pmpd_gguf_kv_u32(o, SYNTH_KEY("attention.head_count_kv"), opt->n_kv_heads);
    pmpd_synth_arch_metadata(o, opt);
    pmpd_gguf_kv_u32(o, SYNTH_KEY("vocab_size"), g ? g->n_tokens : v->n_tokens);
#undef SYNTH_KEY
    if (g)
        pmpd_synth_write_vocab_gpt2(o, g, opt->pre);
    else
        pmpd_synth_write_vocab(o, v);
    if (opt->chat_template)
        pmpd_gguf_kv_string(o, "tokenizer.chat_template", opt->chat_template);
}

static void synth_write_header(pmpd_gguf_out *o, const pmpd_synth_options *opt, const pmpd_vocab *v,
                               const pmpd_synth_gpt2 *g, const pmpd_synth_plan *plan)
{
    pmpd_gguf_out count;
    uint32_t i, d;
    memset(&count, 0, sizeof count);
    synth_write_metadata(&count, opt, v, g);
    pmpd_gguf_bytes(o, "GGUF", 4);
    pmpd_gguf_u32(o, 3);
    pmpd_gguf_u64(o, plan->n_tensors);
    pmpd_gguf_u64(o, count.n_keys);
    synth_write_metadata(o, opt, v, g);
    for (i = 0; i < plan->n_tensors; i++) {
        const pmpd_synth_tensor *t = &plan->tensors[i];
        pmpd_gguf_string(o, t->name, strlen(t->name));
        pmpd_gguf_u32(o, t->n_dims);
        for (d = 0; d < t->n_dims; d++)
            pmpd_gguf_u64(o, t->ne[d]);
        pmpd_gguf_u32(o, (uint32_t)t->type);
        pmpd_gguf_u64(o, t->offset);
    }
    pmpd_gguf_pad(o);
}

/* Tensor `index`'s data: norms all 1.0, matrices (and biases) row after
 * row of draws from its own stream, rope factors computed.  x and row hold
 * one row as floats and as bytes. */
static void synth_write_tensor(pmpd_gguf_out *o, const pmpd_synth_tensor *t, uint32_t index,
                               const pmpd_synth_options *opt, float *x, unsigned char *row)
{
    uint64_t state = pmpd_synth_stream(opt->seed, index), r;
    size_t n = (size_t)t->ne[0], i, row_bytes = (size_t)pmpd_ggml_row_bytes(t->type, t->ne[0]);
    for (r = 0; r < t->ne[1] && !o->failed; r++) {
        if (t->fill == PMPD_SYNTH_FILL_ONES)
            for (i = 0; i < n; i++)
                x[i] = 1.0f;
        else if (t->fill == PMPD_SYNTH_FILL_ROPE_FREQS)
            pmpd_synth_rope_factors(opt, x);
        else
            pmpd_synth_normal(&state, pmpd_synth_std(opt), x, n);
        pmpd_ggml_encode_row(t->type, x, n, row);
        pmpd_gguf_bytes(o, row, row_bytes);
    }
    pmpd_gguf_pad(o);
}

/* Writes the whole file to f (named path in messages); *bytes counts what
 * was written. */
static pmpd_status synth_write_file(FILE *f, const char *path, const pmpd_synth_options *opt, const pmpd_vocab *v,
                                    const pmpd_synth_gpt2 *g, const pmpd_synth_plan *plan, uint64_t *bytes,
                                    pmpd_error *err)
{
    pmpd_gguf_out o;
    size_t q_dim = (size_t)pmpd_synth_head_dim(opt) * opt->n_heads;
    size_t widest = opt->dim > opt->hidden_dim ? opt->dim : opt->hidden_dim;
    float *x;
    unsigned char *row;
    uint64_t total;
    uint32_t i;
    if (q_dim > widest) /* attn_output's rows when head_dim x heads > dim */
        widest = q_dim;
    x = (float *)malloc(widest * sizeof *x);
    row = (unsigned char *)malloc(widest * sizeof *x);
    memset(&o, 0, sizeof o);
    o.f = f;
    if (!x || !row) {
        free(x);
        free(row);
        return pmpd_error_set(err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory for a row of %zu weights",
                              widest);
    }
    synth_write_header(&o, opt, v, g, plan);
    total = o.written + plan->data_bytes;
    for (i = 0; i < plan->n_tensors && !o.failed; i++) {
        synth_write_tensor(&o, &plan->tensors[i], i, opt, x, row);
        if (opt->progress)
            opt->progress(opt->progress_context, o.written, total);
    }
    free(x);
    free(row);
    *bytes = o.written;
    if (!o.failed && fflush(f) != 0)
        o.failed = errno > 0 ? errno : -1;
    if (o.failed)
        return pmpd_error_set(err, PMPD_ERR_IO, o.written, "cannot write %s: %s", path,
                              o.failed > 0 ? strerror(o.failed) : "write failed");
    return PMPD_OK;
}

pmpd_status pmpd_synth_gguf(const char *out_path, const pmpd_synth_options *options, pmpd_synth_summary *summary,
                            pmpd_error *err)
{
    pmpd_synth_summary local;
    pmpd_synth_plan plan;
    pmpd_vocab vocab;
    pmpd_synth_gpt2 gpt2, *g = NULL;
    uint32_t n_tokens;
    pmpd_atomic_file out;
    uint64_t bytes = 0;
    pmpd_status status;
    if (!summary)
        summary = &local;
    memset(summary, 0, sizeof *summary);
    pmpd_error_clear(err);
    if (!out_path || !options || (!options->tokenizer_path && !options->gpt2_vocab_path))
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                              "an output path, options and a tokenizer path are required");
    memset(&vocab, 0, sizeof vocab);
    memset(&plan, 0, sizeof plan);
    if (options->gpt2_vocab_path) {
        status = pmpd_synth_load_gpt2(options->gpt2_vocab_path, &gpt2, err);
        if (status != PMPD_OK) {
            pmpd_synth_gpt2_free(&gpt2);
            return status;
        }
        g = &gpt2;
        n_tokens = gpt2.n_tokens;
    } else {
        if ((status = synth_load_vocab(options->tokenizer_path, &vocab, err)) != PMPD_OK)
            return status;
        n_tokens = vocab.n_tokens;
    }
    status = pmpd_synth_plan_make(options, n_tokens, &plan, err);
    if (status == PMPD_OK && (status = pmpd_atomic_open(&out, out_path, err)) == PMPD_OK) {
        setvbuf(out.f, NULL, _IOFBF, SYNTH_STREAM_BUFFER);
        status = synth_write_file(out.f, out.tmp, options, &vocab, g, &plan, &bytes, err);
        status = pmpd_atomic_finish(&out, status, err);
    }
    if (status == PMPD_OK) {
        summary->n_tensors = plan.n_tensors;
        summary->vocab_size = n_tokens;
        summary->parameters = plan.parameters;
        summary->bytes = bytes;
    }
    pmpd_synth_plan_free(&plan);
    pmpd_vocab_free(&vocab);
    if (g)
        pmpd_synth_gpt2_free(g);
    return status;
}

#undef SYNTH_STREAM_BUFFER
