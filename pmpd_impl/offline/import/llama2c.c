/* llama2.c checkpoints.  Legacy: int32 dim, hidden_dim, n_layers, n_heads,
 * n_kv_heads, vocab_size (negative: separate classifier), seq_len, then f32
 * tensors in the order below, with the old RoPE tables between the final
 * norm and the classifier.  Version 1: u32 magic "ak42", int32 version,
 * the same seven ints, a shared-classifier byte, zero padding to 256 bytes,
 * then the norms first and the matrices after.  Neither has a checksum, so
 * the file size must be exactly what the header implies. */
#include "pmpd_impl/offline/import/import.h"

#include <stdio.h>
#include <string.h>

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/core/error.h"
#include "pmpd_impl/format/le.h"

#define LLAMA2C_V1_MAGIC 0x616b3432u
#define LLAMA2C_V1_HEADER 256u
#define LLAMA2C_LEGACY_HEADER 28u

typedef enum llama2c_kind {
    LLAMA2C_ATTN_NORM,
    LLAMA2C_FFN_NORM,
    LLAMA2C_FINAL_NORM,
    LLAMA2C_EMBEDDING,
    LLAMA2C_WQ,
    LLAMA2C_WK,
    LLAMA2C_WV,
    LLAMA2C_WO,
    LLAMA2C_W1,
    LLAMA2C_W2,
    LLAMA2C_W3,
    LLAMA2C_ROPE_TABLES,
    LLAMA2C_CLASSIFIER
} llama2c_kind;

static const llama2c_kind llama2c_legacy_order[] = {
    LLAMA2C_EMBEDDING, LLAMA2C_ATTN_NORM, LLAMA2C_WQ, LLAMA2C_WK, LLAMA2C_WV, LLAMA2C_WO, LLAMA2C_FFN_NORM,
    LLAMA2C_W1, LLAMA2C_W2, LLAMA2C_W3, LLAMA2C_FINAL_NORM, LLAMA2C_ROPE_TABLES, LLAMA2C_CLASSIFIER};
static const llama2c_kind llama2c_v1_order[] = {
    LLAMA2C_ATTN_NORM, LLAMA2C_FFN_NORM, LLAMA2C_FINAL_NORM, LLAMA2C_EMBEDDING, LLAMA2C_WQ, LLAMA2C_WK,
    LLAMA2C_WV, LLAMA2C_WO, LLAMA2C_W1, LLAMA2C_W2, LLAMA2C_W3, LLAMA2C_CLASSIFIER};

/* Shape of one tensor of a kind (per layer for the layer kinds), its GGUF
 * name pattern, and whether it repeats per layer. */
static void llama2c_shape(const pmpd_model_info *h, llama2c_kind kind, uint64_t *rows, uint64_t *cols,
                          const char **name, int *per_layer)
{
    uint64_t kv = (uint64_t)h->n_kv_heads * h->head_dim;
    *per_layer = 1;
    *rows = 0;
    switch (kind) {
    case LLAMA2C_ATTN_NORM: *cols = h->dim; *name = "attn_norm"; break;
    case LLAMA2C_FFN_NORM: *cols = h->dim; *name = "ffn_norm"; break;
    case LLAMA2C_WQ: *rows = h->dim; *cols = h->dim; *name = "attn_q"; break;
    case LLAMA2C_WK: *rows = kv; *cols = h->dim; *name = "attn_k"; break;
    case LLAMA2C_WV: *rows = kv; *cols = h->dim; *name = "attn_v"; break;
    case LLAMA2C_WO: *rows = h->dim; *cols = h->dim; *name = "attn_output"; break;
    case LLAMA2C_W1: *rows = h->hidden_dim; *cols = h->dim; *name = "ffn_gate"; break;
    case LLAMA2C_W2: *rows = h->dim; *cols = h->hidden_dim; *name = "ffn_down"; break;
    case LLAMA2C_W3: *rows = h->hidden_dim; *cols = h->dim; *name = "ffn_up"; break;
    case LLAMA2C_FINAL_NORM: *per_layer = 0; *cols = h->dim; *name = "output_norm.weight"; break;
    case LLAMA2C_EMBEDDING: *per_layer = 0; *rows = h->vocab_size; *cols = h->dim; *name = "token_embd.weight"; break;
    case LLAMA2C_ROPE_TABLES: *per_layer = 0; *rows = 2 * (uint64_t)h->seq_len; *cols = h->head_dim / 2; *name = NULL; break;
    case LLAMA2C_CLASSIFIER:
        *per_layer = 0;
        *rows = h->shared_classifier ? 0 : h->vocab_size;
        *cols = h->shared_classifier ? 0 : h->dim;
        *name = h->shared_classifier ? NULL : "output.weight";
        break;
    }
}

PMPD_INTERNAL pmpd_status pmpd_import_check_hparams(const pmpd_model_info *h, uint64_t field_offset, pmpd_error *err)
{
    if (h->dim == 0 || h->hidden_dim == 0 || h->n_layers == 0 || h->n_heads == 0 || h->n_kv_heads == 0 ||
        h->vocab_size == 0 || h->seq_len == 0)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_HPARAMS, field_offset,
                              "a hyperparameter is zero or negative (dim %u, hidden %u, layers %u, heads %u, "
                              "kv heads %u, vocab %u, seq_len %u)",
                              (unsigned)h->dim, (unsigned)h->hidden_dim, (unsigned)h->n_layers, (unsigned)h->n_heads,
                              (unsigned)h->n_kv_heads, (unsigned)h->vocab_size, (unsigned)h->seq_len);
    if (h->dim > PMPD_MAX_HPARAM || h->hidden_dim > PMPD_MAX_HPARAM || h->n_layers > PMPD_MAX_HPARAM ||
        h->n_heads > PMPD_MAX_HPARAM || h->vocab_size > PMPD_MAX_HPARAM || h->seq_len > PMPD_MAX_HPARAM)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_HPARAMS, field_offset, "a hyperparameter exceeds %u",
                              PMPD_MAX_HPARAM);
    if (h->n_kv_heads > h->n_heads || h->n_heads % h->n_kv_heads != 0)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_HPARAMS, field_offset, "n_kv_heads %u does not divide n_heads %u",
                              (unsigned)h->n_kv_heads, (unsigned)h->n_heads);
    /* A head_dim already read (GGUF key_length) was checked by its reader. */
    if (h->head_dim == 0 && (h->dim % h->n_heads != 0 || (h->dim / h->n_heads) % 2 != 0))
        return pmpd_error_set(err, PMPD_ERR_FORMAT_HPARAMS, field_offset,
                              "dim %u is not n_heads %u times an even head size", (unsigned)h->dim,
                              (unsigned)h->n_heads);
    return PMPD_OK;
}

static int32_t llama2c_i32(const unsigned char *p)
{
    return (int32_t)pmpd_le_u32(p);
}

PMPD_INTERNAL pmpd_status pmpd_import_llama2c(const unsigned char *data, size_t size, pmpd_build_model *out, pmpd_error *err)
{
    pmpd_model_info *h = &out->info;
    const llama2c_kind *order;
    size_t n_order, i, header, fields;
    int32_t v[7];
    uint64_t expected, at;
    uint32_t l;
    pmpd_status status;
    pmpd_error_clear(err);
    memset(h, 0, sizeof *h);
    if (size >= 4 && pmpd_le_u32(data) == LLAMA2C_V1_MAGIC) {
        if (size < LLAMA2C_V1_HEADER)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_TRUNCATED, size,
                                  "llama2.c v1 checkpoint ends at byte %zu, inside its 256-byte header", size);
        if (llama2c_i32(data + 4) != 1)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VERSION, 4, "llama2.c checkpoint version %d is not supported",
                                  (int)llama2c_i32(data + 4));
        header = LLAMA2C_V1_HEADER;
        fields = 8;
        order = llama2c_v1_order;
        n_order = sizeof llama2c_v1_order / sizeof llama2c_v1_order[0];
    } else {
        if (size < LLAMA2C_LEGACY_HEADER)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_TRUNCATED, size,
                                  "llama2.c checkpoint ends at byte %zu, inside its 28-byte header", size);
        header = LLAMA2C_LEGACY_HEADER;
        fields = 0;
        order = llama2c_legacy_order;
        n_order = sizeof llama2c_legacy_order / sizeof llama2c_legacy_order[0];
    }
    for (i = 0; i < 7; i++) {
        v[i] = llama2c_i32(data + fields + 4 * i);
        if (v[i] <= 0 && !(i == 5 && fields == 0 && v[i] < 0 && v[i] != INT32_MIN))
            return pmpd_error_set(err, PMPD_ERR_FORMAT_HPARAMS, fields + 4 * i,
                                  "llama2.c header field %u is %d", (unsigned)i, (int)v[i]);
    }
    h->dim = (uint32_t)v[0];
    h->hidden_dim = (uint32_t)v[1];
    h->n_layers = (uint32_t)v[2];
    h->n_heads = (uint32_t)v[3];
    h->n_kv_heads = (uint32_t)v[4];
    h->vocab_size = (uint32_t)(v[5] < 0 ? -v[5] : v[5]);
    h->seq_len = (uint32_t)v[6];
    if (fields == 0) {
        h->shared_classifier = v[5] > 0;
    } else {
        if (data[36] > 1)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, 36, "shared_classifier byte is %u",
                                  (unsigned)data[36]);
        h->shared_classifier = data[36];
    }
    status = pmpd_import_check_hparams(h, fields, err);
    if (status != PMPD_OK)
        return status;
    h->head_dim = h->dim / h->n_heads;
    h->rope_theta = 10000.0f;
    h->norm_eps = 1e-5f;
    h->bos_id = 1;
    h->eos_id = 2;
    if (h->bos_id >= h->vocab_size || h->eos_id >= h->vocab_size)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_HPARAMS, fields + 20,
                              "vocab_size %u leaves no room for BOS (1) and EOS (2)", (unsigned)h->vocab_size);
    /* Counts below 2^24 still multiply past 2^64 (4 * dim * hidden * layers),
     * and a wrapped sum could equal the real file size: check every step. */
    expected = header;
    for (i = 0; i < n_order; i++) {
        uint64_t rows, cols, tensor_bytes;
        const char *name;
        int per_layer;
        llama2c_shape(h, order[i], &rows, &cols, &name, &per_layer);
        if (!pmpd_checked_mul_u64(4 * (rows ? rows : 1), cols, &tensor_bytes) ||
            !pmpd_checked_mul_u64(tensor_bytes, per_layer ? h->n_layers : 1, &tensor_bytes) ||
            !pmpd_checked_add_u64(expected, tensor_bytes, &expected))
            return pmpd_error_set(err, PMPD_ERR_FORMAT_HPARAMS, fields,
                                  "llama2.c header implies more than 2^64 bytes of tensors");
    }
    if (expected != size)
        return pmpd_error_set(err, size < expected ? PMPD_ERR_FORMAT_TRUNCATED : PMPD_ERR_FORMAT_BOUNDS,
                              fields, "llama2.c checkpoint is %zu bytes but its header implies %llu", size,
                              (unsigned long long)expected);
    at = header;
    for (i = 0; i < n_order; i++) {
        uint64_t rows, cols, dims[2], bytes;
        const char *name;
        int per_layer;
        llama2c_shape(h, order[i], &rows, &cols, &name, &per_layer);
        bytes = 4 * (rows ? rows : 1) * cols;
        dims[0] = rows ? rows : cols;
        dims[1] = cols;
        for (l = 0; l < (per_layer ? h->n_layers : 1u); l++) {
            char full[PMPD_TENSOR_NAME_MAX + 1];
            if (name) {
                if (per_layer)
                    snprintf(full, sizeof full, "blk.%u.%s.weight", (unsigned)l, name);
                else
                    snprintf(full, sizeof full, "%s", name);
                if (bytes > size - at)
                    return pmpd_error_set(err, PMPD_ERR_FORMAT_TRUNCATED, at, "tensor %s runs past the end", full);
                status = pmpd_build_add_tensor(out, full, PMPD_TENSOR_F32, rows ? 2 : 1, dims, data + at, bytes);
                if (status != PMPD_OK)
                    return pmpd_error_set(err, status, at, "cannot store tensor %s", full);
            }
            at += bytes;
        }
    }
    return PMPD_OK;
}

#undef LLAMA2C_V1_MAGIC
#undef LLAMA2C_V1_HEADER
#undef LLAMA2C_LEGACY_HEADER
