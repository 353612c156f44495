/* GGUF (versions 2 and 3) importer for Llama models.
 *
 * Layout: "GGUF", u32 version, u64 tensor count, u64 metadata count; the
 * metadata as (string key, u32 type, value) triples; the tensor infos as
 * (string name, u32 n_dims, u64 ne[n_dims] innermost first, u32 ggml type,
 * u64 offset from the data start); padding to general.alignment (default
 * 32); the data.  Strings are a u64 length and bytes.
 *
 * Llama tensors in GGUF already have Meta's rotary layout (adjacent pairs),
 * the layout llama2.c uses: llama.cpp's converters permute Hugging Face's
 * half-split Q/K rows into it.  So Q and K rows are taken as they are; the
 * tests check that stories260K.gguf and stories260K.bin give identical
 * tensors.  An output.weight equal to token_embd.weight becomes a shared
 * classifier, as in the llama2.c checkpoint. */
#include "pmpd_impl/offline/import/import.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/core/error.h"
#include "pmpd_impl/format/chat_template.h"
#include "pmpd_impl/format/le.h"
#include "pmpd_impl/offline/import/ggml_types.h"

enum {
    GGUF_UINT8 = 0, GGUF_INT8 = 1, GGUF_UINT16 = 2, GGUF_INT16 = 3, GGUF_UINT32 = 4, GGUF_INT32 = 5,
    GGUF_FLOAT32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_UINT64 = 10, GGUF_INT64 = 11,
    GGUF_FLOAT64 = 12, GGUF_N_TYPES = 13
};

#define GGUF_MAX_DEPTH 3
#define GGUF_MAX_DIMS 4

typedef struct gguf_reader {
    const unsigned char *data;
    size_t size;          /* bytes at data: the whole file, or its first part (see short_read) */
    uint64_t file_size;   /* the whole file's, for the tensors' data regions */
    size_t at;
    int short_read;       /* set when a read went past size while the file is longer: read more, parse again */
    int unloaded;         /* tensors are left in the file (pmpd_build_add_unloaded), not decoded */
    pmpd_error *err;
    int arch;             /* GGUF_ARCH_*: matches the '.'-keys once known */
    char key_name[96];    /* the full name of a key, for messages */
} gguf_reader;

/* A metadata value of interest: where it is and what type it has. */
typedef struct gguf_value {
    int present;
    uint32_t type;
    size_t at;            /* offset of the value (for arrays: of the first element) */
    uint32_t element_type;
    uint64_t count;       /* arrays */
    uint64_t key_at;
} gguf_value;

typedef struct gguf_tensor_info {
    const unsigned char *name;
    uint64_t name_length;
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    uint32_t type;
    uint64_t offset;
    size_t info_at;
    /* Set once the shape and type are checked: */
    uint64_t elements;
    uint64_t start, end;                /* the data region, in file offsets */
    const pmpd_ggml_type_info *ggml;    /* its ggml type, one that pmpd decodes */
} gguf_tensor_info;

/* Keys starting with '.' belong to the architecture: "llama.embedding_length"
 * in a llama file, "qwen2.embedding_length" in a qwen2 one.  They are
 * matched once the architecture is known (a second pass over the
 * metadata, see gguf_read_all_metadata). */
static const char *const gguf_keys[] = {
    "general.architecture", "general.alignment", ".embedding_length", ".feed_forward_length",
    ".block_count", ".attention.head_count", ".attention.head_count_kv",
    ".context_length", ".rope.dimension_count", ".attention.layer_norm_rms_epsilon",
    ".rope.freq_base", "tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.scores",
    "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.add_space_prefix",
    ".attention.key_length", ".attention.value_length", ".rope.scaling.type", ".rope.scaling.factor",
    /* byte-level BPE ("gpt2") vocabularies */
    "tokenizer.ggml.merges", "tokenizer.ggml.token_type", "tokenizer.ggml.pre", "tokenizer.ggml.eot_token_id",
    "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token", "tokenizer.chat_template",
};

enum {
    GGUF_KEY_ARCH, GGUF_KEY_ALIGNMENT, GGUF_KEY_DIM, GGUF_KEY_HIDDEN, GGUF_KEY_LAYERS, GGUF_KEY_HEADS, GGUF_KEY_KV_HEADS, GGUF_KEY_CONTEXT, GGUF_KEY_ROPE_DIM,
    GGUF_KEY_EPS, GGUF_KEY_ROPE_BASE, GGUF_KEY_TOK_MODEL, GGUF_KEY_TOKENS, GGUF_KEY_SCORES, GGUF_KEY_BOS, GGUF_KEY_EOS, GGUF_KEY_SPACE_PREFIX,
    GGUF_KEY_KEY_LENGTH, GGUF_KEY_VALUE_LENGTH, GGUF_KEY_ROPE_SCALING, GGUF_KEY_ROPE_SCALE,
    GGUF_KEY_MERGES, GGUF_KEY_TOKEN_TYPE, GGUF_KEY_PRE, GGUF_KEY_EOT, GGUF_KEY_ADD_BOS, GGUF_KEY_ADD_EOS, GGUF_KEY_CHAT_TEMPLATE, GGUF_KEY_COUNT
};

/* The architectures this importer reads (index = gguf_reader.arch). */
static const char *const gguf_archs[] = {"llama", "qwen2"};
enum { GGUF_ARCH_NONE = -1, GGUF_ARCH_LLAMA = 0, GGUF_ARCH_QWEN2 = 1 };

/* Marks a read past the bytes at hand when the file has more. */
static void gguf_past_end(gguf_reader *r)
{
    r->short_read |= r->size < r->file_size;
}

static pmpd_status gguf_need(gguf_reader *r, uint64_t bytes, const char *what)
{
    if (bytes > r->size - r->at) {
        gguf_past_end(r);
        return pmpd_error_set(r->err, PMPD_ERR_FORMAT_TRUNCATED, r->at, "GGUF %s needs %llu bytes, %zu remain", what,
                              (unsigned long long)bytes, r->size - r->at);
    }
    return PMPD_OK;
}

static pmpd_status gguf_u32(gguf_reader *r, uint32_t *v, const char *what)
{
    pmpd_status status = gguf_need(r, 4, what);
    if (status == PMPD_OK) {
        *v = pmpd_le_u32(r->data + r->at);
        r->at += 4;
    }
    return status;
}

static pmpd_status gguf_u64(gguf_reader *r, uint64_t *v, const char *what)
{
    pmpd_status status = gguf_need(r, 8, what);
    if (status == PMPD_OK) {
        *v = pmpd_le_u64(r->data + r->at);
        r->at += 8;
    }
    return status;
}

static pmpd_status gguf_string(gguf_reader *r, const unsigned char **s, uint64_t *length, const char *what)
{
    pmpd_status status = gguf_u64(r, length, what);
    if (status != PMPD_OK)
        return status;
    if (*length > r->size - r->at) {
        gguf_past_end(r);
        return pmpd_error_set(r->err, PMPD_ERR_FORMAT_BOUNDS, r->at - 8,
                              "GGUF %s string length %llu runs past the end (%zu bytes remain)", what,
                              (unsigned long long)*length, r->size - r->at);
    }
    *s = r->data + r->at;
    r->at += (size_t)*length;
    return PMPD_OK;
}

static uint64_t gguf_scalar_size(uint32_t type)
{
    static const unsigned char sizes[GGUF_N_TYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return type < GGUF_N_TYPES ? sizes[type] : 0;
}

/* Skips one value of the given type, checking bounds and nesting. */
static pmpd_status gguf_skip_value(gguf_reader *r, uint32_t type, int depth, uint64_t type_at)
{
    pmpd_status status;
    if (type >= GGUF_N_TYPES)
        return pmpd_error_set(r->err, PMPD_ERR_FORMAT_VALUE, type_at, "GGUF metadata type %u is unknown",
                              (unsigned)type);
    if (type == GGUF_STRING) {
        const unsigned char *s;
        uint64_t length;
        return gguf_string(r, &s, &length, "metadata string");
    }
    if (type == GGUF_ARRAY) {
        uint32_t element;
        uint64_t count, i, element_size;
        size_t element_type_at = r->at;
        if (depth >= GGUF_MAX_DEPTH)
            return pmpd_error_set(r->err, PMPD_ERR_FORMAT_VALUE, type_at, "GGUF arrays nest deeper than %d",
                                  GGUF_MAX_DEPTH);
        if ((status = gguf_u32(r, &element, "array type")) != PMPD_OK ||
            (status = gguf_u64(r, &count, "array count")) != PMPD_OK)
            return status;
        element_size = gguf_scalar_size(element);
        if (element >= GGUF_N_TYPES)
            return pmpd_error_set(r->err, PMPD_ERR_FORMAT_VALUE, element_type_at, "GGUF array element type %u is unknown",
                                  (unsigned)element);
        /* Every element takes at least one byte (strings 8, arrays 12). */
        if (count > (r->size - r->at) / (element_size ? element_size : (element == GGUF_STRING ? 8 : 12))) {
            gguf_past_end(r);
            return pmpd_error_set(r->err, PMPD_ERR_FORMAT_BOUNDS, r->at - 8,
                                  "GGUF array count %llu is larger than the bytes that remain", (unsigned long long)count);
        }
        if (element_size) {
            r->at += (size_t)(count * element_size);
            return PMPD_OK;
        }
        for (i = 0; i < count; i++)
            if ((status = gguf_skip_value(r, element, depth + 1, element_type_at)) != PMPD_OK)
                return status;
        return PMPD_OK;
    }
    status = gguf_need(r, gguf_scalar_size(type), "metadata value");
    if (status == PMPD_OK)
        r->at += (size_t)gguf_scalar_size(type);
    return status;
}

static int gguf_key_index(const gguf_reader *r, const unsigned char *key, uint64_t length)
{
    const char *arch = r->arch == GGUF_ARCH_NONE ? NULL : gguf_archs[r->arch];
    size_t prefix = arch ? strlen(arch) : 0;
    int i;
    for (i = 0; i < GGUF_KEY_COUNT; i++) {
        const char *name = gguf_keys[i];
        if (name[0] != '.') {
            if (strlen(name) == length && memcmp(name, key, (size_t)length) == 0)
                return i;
        } else if (arch && prefix + strlen(name) == length && memcmp(arch, key, prefix) == 0 &&
                   memcmp(name, key + prefix, (size_t)length - prefix) == 0) {
            return i;
        }
    }
    return -1;
}

/* The key's name as the file spells it, for messages. */
static const char *gguf_key_name(gguf_reader *r, int key)
{
    const char *name = gguf_keys[key];
    if (name[0] != '.')
        return name;
    snprintf(r->key_name, sizeof r->key_name, "%s%s", r->arch == GGUF_ARCH_NONE ? "<arch>" : gguf_archs[r->arch],
             name);
    return r->key_name;
}

static pmpd_status gguf_read_metadata(gguf_reader *r, uint64_t n_kv, gguf_value *values)
{
    uint64_t i;
    pmpd_status status;
    for (i = 0; i < n_kv; i++) {
        const unsigned char *key;
        uint64_t key_length, key_at = r->at;
        uint32_t type;
        size_t type_at;
        int index;
        if ((status = gguf_string(r, &key, &key_length, "metadata key")) != PMPD_OK)
            return status;
        type_at = r->at;
        if ((status = gguf_u32(r, &type, "metadata type")) != PMPD_OK)
            return status;
        index = gguf_key_index(r, key, key_length);
        if (index >= 0) {
            gguf_value *v = &values[index];
            if (v->present)
                return pmpd_error_set(r->err, PMPD_ERR_FORMAT_DUPLICATE, key_at, "GGUF key %s appears twice",
                                      gguf_key_name(r, index));
            v->present = 1;
            v->type = type;
            v->at = r->at;
            v->key_at = key_at;
            if (type == GGUF_ARRAY && r->size - r->at >= 12) {
                v->element_type = pmpd_le_u32(r->data + r->at);
                v->count = pmpd_le_u64(r->data + r->at + 4);
                v->at = r->at + 12;
            }
        }
        if ((status = gguf_skip_value(r, type, 0, type_at)) != PMPD_OK)
            return status;
    }
    return PMPD_OK;
}

/* An integer metadata value, whatever integer type the writer chose. */
static pmpd_status gguf_get_uint(gguf_reader *r, const gguf_value *values, int key, uint64_t fallback,
                                 int required, uint64_t *out)
{
    const gguf_value *v = &values[key];
    const unsigned char *p = r->data + v->at;
    int64_t s;
    if (!v->present) {
        if (required)
            return pmpd_error_set(r->err, PMPD_ERR_FORMAT_MISSING, PMPD_NO_OFFSET, "GGUF key %s is missing",
                                  gguf_key_name(r, key));
        *out = fallback;
        return PMPD_OK;
    }
    switch (v->type) {
    case GGUF_UINT8: *out = p[0]; return PMPD_OK;
    case GGUF_UINT16: *out = pmpd_le_u16(p); return PMPD_OK;
    case GGUF_UINT32: *out = pmpd_le_u32(p); return PMPD_OK;
    case GGUF_UINT64: *out = pmpd_le_u64(p); return PMPD_OK;
    case GGUF_INT8: s = (int8_t)p[0]; break;
    case GGUF_INT16: s = (int16_t)pmpd_le_u16(p); break;
    case GGUF_INT32: s = (int32_t)pmpd_le_u32(p); break;
    case GGUF_INT64: s = (int64_t)pmpd_le_u64(p); break;
    default:
        return pmpd_error_set(r->err, PMPD_ERR_FORMAT_VALUE, v->key_at, "GGUF key %s is not an integer (type %u)",
                              gguf_key_name(r, key), (unsigned)v->type);
    }
    if (s < 0)
        return pmpd_error_set(r->err, PMPD_ERR_FORMAT_VALUE, v->at, "GGUF key %s is negative", gguf_key_name(r, key));
    *out = (uint64_t)s;
    return PMPD_OK;
}

static pmpd_status gguf_get_float(gguf_reader *r, const gguf_value *values, int key, float fallback, float *out)
{
    const gguf_value *v = &values[key];
    if (!v->present) {
        *out = fallback;
        return PMPD_OK;
    }
    if (v->type != GGUF_FLOAT32)
        return pmpd_error_set(r->err, PMPD_ERR_FORMAT_VALUE, v->key_at, "GGUF key %s is not a float32",
                              gguf_key_name(r, key));
    *out = pmpd_le_f32(r->data + v->at);
    return PMPD_OK;
}

static int gguf_string_is(const gguf_reader *r, const gguf_value *v, const char *expected)
{
    uint64_t length;
    if (!v->present || v->type != GGUF_STRING)
        return 0;
    length = pmpd_le_u64(r->data + v->at);
    return length == strlen(expected) && memcmp(r->data + v->at + 8, expected, (size_t)length) == 0;
}

/* A hyperparameter: present, integral, 1..2^24. */
static pmpd_status gguf_hparam(gguf_reader *r, const gguf_value *values, int key, uint64_t fallback, int required,
                               uint32_t *out)
{
    uint64_t v;
    pmpd_status status = gguf_get_uint(r, values, key, fallback, required, &v);
    if (status != PMPD_OK)
        return status;
    if (v == 0 || v > PMPD_MAX_HPARAM)
        return pmpd_error_set(r->err, PMPD_ERR_FORMAT_HPARAMS, values[key].present ? values[key].at : PMPD_NO_OFFSET,
                              "GGUF %s is %llu, outside 1..%u", gguf_key_name(r, key), (unsigned long long)v,
                              PMPD_MAX_HPARAM);
    *out = (uint32_t)v;
    return PMPD_OK;
}

/* Rope scaling the forward pass does not implement is refused rather than
 * ignored: "linear" with a factor of 1 (or none) is plain rope, and
 * Llama 3.1's scaling comes as the rope_freqs.weight tensor instead. */
static pmpd_status gguf_check_rope_scaling(gguf_reader *r, const gguf_value *values)
{
    const gguf_value *type = &values[GGUF_KEY_ROPE_SCALING];
    float factor = 1.0f;
    pmpd_status status;
    if (type->present && !gguf_string_is(r, type, "none") && !gguf_string_is(r, type, "linear")) {
        uint64_t length = type->type == GGUF_STRING ? pmpd_le_u64(r->data + type->at) : 0;
        return pmpd_error_set(r->err, PMPD_ERR_UNSUPPORTED, type->at, "GGUF %s \"%.*s\" is not supported",
                              gguf_key_name(r, GGUF_KEY_ROPE_SCALING), (int)(length > 32 ? 32 : length),
                              (const char *)r->data + type->at + 8);
    }
    if ((status = gguf_get_float(r, values, GGUF_KEY_ROPE_SCALE, 1.0f, &factor)) != PMPD_OK)
        return status;
    if (factor != 0.0f && factor != 1.0f)
        return pmpd_error_set(r->err, PMPD_ERR_UNSUPPORTED, values[GGUF_KEY_ROPE_SCALE].at,
                              "GGUF %s %g (linear rope scaling) is not supported",
                              gguf_key_name(r, GGUF_KEY_ROPE_SCALE), (double)factor);
    return PMPD_OK;
}

/* head_dim is <arch>.attention.key_length when present (it may differ from
 * dim / n_heads), the values' width must be the same, and the rotation
 * must cover the whole head. */
static pmpd_status gguf_read_head_dim(gguf_reader *r, const gguf_value *values, pmpd_model_info *h)
{
    uint64_t key_length, value_length, rope_dim;
    pmpd_status status;
    if (!values[GGUF_KEY_KEY_LENGTH].present && (h->dim % h->n_heads != 0 || (h->dim / h->n_heads) % 2 != 0))
        return pmpd_error_set(r->err, PMPD_ERR_FORMAT_HPARAMS, values[GGUF_KEY_DIM].at,
                              "GGUF dim %u is not n_heads %u times an even head size", (unsigned)h->dim,
                              (unsigned)h->n_heads);
    if ((status = gguf_get_uint(r, values, GGUF_KEY_KEY_LENGTH, h->dim / h->n_heads, 0, &key_length)) != PMPD_OK ||
        (status = gguf_get_uint(r, values, GGUF_KEY_VALUE_LENGTH, key_length, 0, &value_length)) != PMPD_OK)
        return status;
    if (key_length == 0 || key_length % 2 != 0 || key_length * h->n_heads > PMPD_MAX_HPARAM)
        return pmpd_error_set(r->err, PMPD_ERR_FORMAT_HPARAMS, values[GGUF_KEY_KEY_LENGTH].at,
                              "GGUF %s %llu is not an even head size with n_heads x head size up to %u",
                              gguf_key_name(r, GGUF_KEY_KEY_LENGTH), (unsigned long long)key_length, PMPD_MAX_HPARAM);
    if (value_length != key_length)
        return pmpd_error_set(r->err, PMPD_ERR_UNSUPPORTED, values[GGUF_KEY_VALUE_LENGTH].at,
                              "GGUF value head size %llu differs from the key head size %llu",
                              (unsigned long long)value_length, (unsigned long long)key_length);
    h->head_dim = (uint32_t)key_length;
    if ((status = gguf_get_uint(r, values, GGUF_KEY_ROPE_DIM, h->head_dim, 0, &rope_dim)) != PMPD_OK)
        return status;
    if (rope_dim != h->head_dim)
        return pmpd_error_set(r->err, PMPD_ERR_UNSUPPORTED, values[GGUF_KEY_ROPE_DIM].at,
                              "GGUF rope dimension %llu differs from the head size %u (partial rotary)",
                              (unsigned long long)rope_dim, (unsigned)h->head_dim);
    return PMPD_OK;
}

static pmpd_status gguf_read_hparams(gguf_reader *r, const gguf_value *values, pmpd_model_info *h)
{
    uint64_t id;
    pmpd_status status;
    if ((status = gguf_hparam(r, values, GGUF_KEY_DIM, 0, 1, &h->dim)) != PMPD_OK ||
        (status = gguf_hparam(r, values, GGUF_KEY_HIDDEN, 0, 1, &h->hidden_dim)) != PMPD_OK ||
        (status = gguf_hparam(r, values, GGUF_KEY_LAYERS, 0, 1, &h->n_layers)) != PMPD_OK ||
        (status = gguf_hparam(r, values, GGUF_KEY_HEADS, 0, 1, &h->n_heads)) != PMPD_OK ||
        (status = gguf_hparam(r, values, GGUF_KEY_KV_HEADS, h->n_heads, 0, &h->n_kv_heads)) != PMPD_OK ||
        (status = gguf_hparam(r, values, GGUF_KEY_CONTEXT, 0, 1, &h->seq_len)) != PMPD_OK ||
        (status = gguf_get_float(r, values, GGUF_KEY_EPS, 1e-5f, &h->norm_eps)) != PMPD_OK ||
        (status = gguf_get_float(r, values, GGUF_KEY_ROPE_BASE, 10000.0f, &h->rope_theta)) != PMPD_OK)
        return status;
    h->vocab_size = 1; /* set from the tokenizer or the embedding later */
    if (h->n_kv_heads > h->n_heads || h->n_heads % h->n_kv_heads != 0)
        return pmpd_error_set(r->err, PMPD_ERR_FORMAT_HPARAMS, values[GGUF_KEY_KV_HEADS].at,
                              "GGUF n_kv_heads %u does not divide n_heads %u", (unsigned)h->n_kv_heads,
                              (unsigned)h->n_heads);
    if ((status = gguf_read_head_dim(r, values, h)) != PMPD_OK)
        return status;
    status = pmpd_import_check_hparams(h, values[GGUF_KEY_DIM].at, r->err);
    if (status != PMPD_OK || (status = gguf_check_rope_scaling(r, values)) != PMPD_OK)
        return status;
    /* llama.cpp's converter permutes llama's Q/K rows into adjacent pairs
     * and leaves qwen2's in Hugging Face's halves. */
    h->rope_style = r->arch == GGUF_ARCH_QWEN2 ? PMPD_ROPE_NEOX : PMPD_ROPE_ADJACENT;
    if ((status = gguf_get_uint(r, values, GGUF_KEY_BOS, 1, 0, &id)) != PMPD_OK)
        return status;
    h->bos_id = id > UINT32_MAX ? UINT32_MAX : (uint32_t)id;
    if ((status = gguf_get_uint(r, values, GGUF_KEY_EOS, 2, 0, &id)) != PMPD_OK)
        return status;
    h->eos_id = id > UINT32_MAX ? UINT32_MAX : (uint32_t)id;
    return PMPD_OK;
}

/* Reads the metadata twice: first the keys of fixed names, which give the
 * architecture (anything but llama and qwen2 is refused, by name), then
 * again with the architecture's own keys ("qwen2.block_count"). */
static pmpd_status gguf_read_all_metadata(gguf_reader *r, uint64_t n_kv, gguf_value *values)
{
    const gguf_value *arch = &values[GGUF_KEY_ARCH];
    size_t start = r->at;
    uint64_t length;
    int i;
    pmpd_status status = gguf_read_metadata(r, n_kv, values);
    if (status != PMPD_OK)
        return status;
    for (i = 0; i < (int)(sizeof gguf_archs / sizeof gguf_archs[0]); i++)
        if (gguf_string_is(r, arch, gguf_archs[i]))
            r->arch = i;
    if (r->arch == GGUF_ARCH_NONE) {
        if (!arch->present || arch->type != GGUF_STRING)
            return pmpd_error_set(r->err, PMPD_ERR_UNSUPPORTED, arch->present ? arch->at : PMPD_NO_OFFSET,
                                  "GGUF general.architecture is missing or not a string (pmpd reads llama and qwen2)");
        length = pmpd_le_u64(r->data + arch->at);
        return pmpd_error_set(r->err, PMPD_ERR_UNSUPPORTED, arch->at,
                              "GGUF general.architecture \"%.*s\" is not supported (pmpd reads llama and qwen2)",
                              (int)(length > 64 ? 64 : length), (const char *)r->data + arch->at + 8);
    }
    memset(values, 0, GGUF_KEY_COUNT * sizeof *values);
    r->at = start;
    return gguf_read_metadata(r, n_kv, values);
}

/* Replaces SentencePiece's U+2581 (E2 96 81) with a space, as llama2.c's
 * tokenizer export does.  Returns the new length (never longer). */
static size_t gguf_unescape_piece(const unsigned char *in, size_t length, unsigned char *out)
{
    size_t i = 0, n = 0;
    while (i < length) {
        if (i + 2 < length && in[i] == 0xE2 && in[i + 1] == 0x96 && in[i + 2] == 0x81) {
            out[n++] = ' ';
            i += 3;
        } else {
            out[n++] = in[i++];
        }
    }
    return n;
}

static pmpd_status gguf_read_vocab(gguf_reader *r, const gguf_value *values, pmpd_vocab *v)
{
    const gguf_value *tokens = &values[GGUF_KEY_TOKENS], *scores = &values[GGUF_KEY_SCORES];
    gguf_reader walk = *r;
    uint64_t i, n = tokens->count, blob_size = 0;
    int space_prefix = 1;
    pmpd_status status;
    if (tokens->type != GGUF_ARRAY || tokens->element_type != GGUF_STRING)
        return pmpd_error_set(r->err, PMPD_ERR_FORMAT_VALUE, tokens->key_at, "GGUF tokenizer.ggml.tokens is not a string array");
    if (n == 0 || n > PMPD_MAX_HPARAM)
        return pmpd_error_set(r->err, PMPD_ERR_FORMAT_VALUE, tokens->at - 8, "GGUF vocabulary of %llu tokens",
                              (unsigned long long)n);
    if (scores->present && (scores->type != GGUF_ARRAY || scores->element_type != GGUF_FLOAT32 || scores->count != n))
        return pmpd_error_set(r->err, PMPD_ERR_FORMAT_VALUE, scores->key_at,
                              "GGUF tokenizer.ggml.scores is not %llu float32 values", (unsigned long long)n);
    if (values[GGUF_KEY_SPACE_PREFIX].present) {
        if (values[GGUF_KEY_SPACE_PREFIX].type != GGUF_BOOL)
            return pmpd_error_set(r->err, PMPD_ERR_FORMAT_VALUE, values[GGUF_KEY_SPACE_PREFIX].key_at,
                                  "GGUF tokenizer.ggml.add_space_prefix is not a bool");
        space_prefix = r->data[values[GGUF_KEY_SPACE_PREFIX].at] != 0;
    }
    /* The metadata pass checked every string's bounds; the array count was
     * checked against the remaining bytes, so these allocations follow the input. */
    v->n_tokens = (uint32_t)n;
    v->flags = space_prefix ? PMPD_TOK_FLAG_SPACE_PREFIX : 0;
    v->scores = (float *)malloc((size_t)n * sizeof *v->scores);
    v->offsets = (uint32_t *)malloc(((size_t)n + 1) * sizeof *v->offsets);
    walk.at = tokens->at;
    for (i = 0; i < n; i++) {
        const unsigned char *s;
        uint64_t length;
        if ((status = gguf_string(&walk, &s, &length, "token")) != PMPD_OK)
            return status;
        blob_size += length;
    }
    if (blob_size > UINT32_MAX)
        return pmpd_error_set(r->err, PMPD_ERR_FORMAT_VALUE, tokens->at, "GGUF vocabulary text is too large");
    v->blob = (unsigned char *)malloc(blob_size ? (size_t)blob_size : 1);
    if (!v->scores || !v->offsets || !v->blob)
        return pmpd_error_set(r->err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory for the vocabulary");
    walk.at = tokens->at;
    blob_size = 0;
    for (i = 0; i < n; i++) {
        const unsigned char *s;
        uint64_t length;
        size_t piece_at = walk.at;
        gguf_string(&walk, &s, &length, "token");
        v->offsets[i] = (uint32_t)blob_size;
        length = gguf_unescape_piece(s, (size_t)length, v->blob + blob_size);
        if (length > PMPD_TOK_MAX_PIECE)
            return pmpd_error_set(r->err, PMPD_ERR_FORMAT_VALUE, piece_at, "GGUF token %llu is %llu bytes long",
                                  (unsigned long long)i, (unsigned long long)length);
        if (length > v->max_token_length)
            v->max_token_length = (uint32_t)length;
        blob_size += length;
        v->scores[i] = scores->present ? pmpd_le_f32(r->data + scores->at + 4 * i) : 0.0f;
        if (!pmpd_f32_bits_finite(scores->present ? pmpd_le_u32(r->data + scores->at + 4 * i) : 0))
            return pmpd_error_set(r->err, PMPD_ERR_FORMAT_NONFINITE, scores->at + 4 * i,
                                  "GGUF score of token %llu is not finite", (unsigned long long)i);
    }
    v->offsets[n] = (uint32_t)blob_size;
    if (v->max_token_length == 0)
        v->max_token_length = 1;
    return PMPD_OK;
}

/* A bool metadata value: 0 or 1, or -1 when absent. */
static pmpd_status gguf_get_bool(gguf_reader *r, const gguf_value *values, int key, int *out)
{
    const gguf_value *v = &values[key];
    *out = -1;
    if (!v->present)
        return PMPD_OK;
    if (v->type != GGUF_BOOL)
        return pmpd_error_set(r->err, PMPD_ERR_FORMAT_VALUE, v->key_at, "GGUF key %s is not a bool", gguf_keys[key]);
    *out = r->data[v->at] != 0;
    return PMPD_OK;
}

/* A "gpt2" vocabulary: gathers where its arrays are, gguf_bpe.c does the rest. */
static pmpd_status gguf_read_bpe_vocab(gguf_reader *r, const gguf_value *values, pmpd_build_model *out)
{
    const gguf_value *tokens = &values[GGUF_KEY_TOKENS], *merges = &values[GGUF_KEY_MERGES];
    const gguf_value *types = &values[GGUF_KEY_TOKEN_TYPE], *pre = &values[GGUF_KEY_PRE];
    pmpd_gguf_bpe_input in;
    pmpd_bpe_vocab v;
    uint64_t eot;
    pmpd_status status;
    memset(&in, 0, sizeof in);
    if (tokens->type != GGUF_ARRAY || tokens->element_type != GGUF_STRING)
        return pmpd_error_set(r->err, PMPD_ERR_FORMAT_VALUE, tokens->key_at, "GGUF tokenizer.ggml.tokens is not a string array");
    in.data = r->data;
    in.size = r->size;
    in.tokens_at = tokens->at;
    in.n_tokens = tokens->count;
    if (types->present) {
        if (types->type != GGUF_ARRAY)
            return pmpd_error_set(r->err, PMPD_ERR_FORMAT_VALUE, types->key_at, "GGUF tokenizer.ggml.token_type is not an array");
        in.has_types = 1;
        in.types_at = types->at;
        in.n_types = types->count;
        in.types_element = types->element_type;
    }
    if (merges->present) {
        if (merges->type != GGUF_ARRAY)
            return pmpd_error_set(r->err, PMPD_ERR_FORMAT_VALUE, merges->key_at, "GGUF tokenizer.ggml.merges is not an array");
        in.has_merges = 1;
        in.merges_at = merges->at;
        in.n_merges = merges->count;
        in.merges_element = merges->element_type;
        in.merges_key_at = merges->key_at;
    }
    if (pre->present) {
        if (pre->type != GGUF_STRING)
            return pmpd_error_set(r->err, PMPD_ERR_FORMAT_VALUE, pre->key_at, "GGUF tokenizer.ggml.pre is not a string");
        in.has_pre = 1;
        in.pre_length = pmpd_le_u64(r->data + pre->at);
        in.pre = r->data + pre->at + 8;
        in.pre_at = pre->at;
    }
    if ((status = gguf_get_uint(r, values, GGUF_KEY_EOT, PMPD_TOK2_NO_TOKEN, 0, &eot)) != PMPD_OK ||
        (status = gguf_get_bool(r, values, GGUF_KEY_ADD_BOS, &in.add_bos)) != PMPD_OK ||
        (status = gguf_get_bool(r, values, GGUF_KEY_ADD_EOS, &in.add_eos)) != PMPD_OK)
        return status;
    in.eot_id = eot > PMPD_TOK2_NO_TOKEN ? PMPD_TOK2_NO_TOKEN - 1 : (uint32_t)eot;
    status = pmpd_import_gguf_bpe_vocab(&in, &v, r->err);
    if (status != PMPD_OK)
        return status;
    if (v.n_tokens != out->info.vocab_size)
        status = pmpd_error_set(r->err, PMPD_ERR_FORMAT_SHAPE, tokens->at - 8,
                                "GGUF vocabulary has %u tokens but token_embd.weight has %u rows", (unsigned)v.n_tokens,
                                (unsigned)out->info.vocab_size);
    if (status == PMPD_OK)
        status = pmpd_build_add_bpe_vocab(out, &v, r->err);
    pmpd_bpe_vocab_free(&v);
    return status;
}

/* tokenizer.chat_template, when present, as a chat-template section
 * (format/chat_template.h): text for tools, checked here as the loader
 * will check it. */
static pmpd_status gguf_read_chat_template(gguf_reader *r, const gguf_value *v, pmpd_build_model *out)
{
    uint64_t length;
    unsigned char *section;
    pmpd_status status;
    if (!v->present)
        return PMPD_OK;
    if (v->type != GGUF_STRING)
        return pmpd_error_set(r->err, PMPD_ERR_FORMAT_VALUE, v->key_at, "GGUF tokenizer.chat_template is not a string");
    length = pmpd_le_u64(r->data + v->at);
    if ((status = pmpd_chat_template_check(r->data + v->at + 8, length, v->at + 8, "GGUF tokenizer.chat_template",
                                           r->err)) != PMPD_OK)
        return status;
    if (!(section = (unsigned char *)malloc((size_t)length + 4)))
        return pmpd_error_set(r->err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory for the chat template");
    pmpd_le_put_u32(section, (uint32_t)length);
    memcpy(section + 4, r->data + v->at + 8, (size_t)length);
    status = pmpd_build_add_section(out, PMPD_SECTION_CHAT_TEMPLATE, PMPD_CHAT_TEMPLATE_VERSION, 0, section,
                                    length + 4);
    free(section);
    if (status != PMPD_OK)
        return pmpd_error_set(r->err, status, PMPD_NO_OFFSET, "out of memory for the chat template");
    return PMPD_OK;
}

static pmpd_status gguf_read_tensor_infos(gguf_reader *r, uint64_t n, gguf_tensor_info *infos)
{
    uint64_t i, j;
    pmpd_status status;
    for (i = 0; i < n; i++) {
        gguf_tensor_info *t = &infos[i];
        t->info_at = r->at;
        if ((status = gguf_string(r, &t->name, &t->name_length, "tensor name")) != PMPD_OK ||
            (status = gguf_u32(r, &t->n_dims, "tensor n_dims")) != PMPD_OK)
            return status;
        if (t->name_length == 0 || t->name_length > PMPD_TENSOR_NAME_MAX)
            return pmpd_error_set(r->err, PMPD_ERR_FORMAT_VALUE, t->info_at, "GGUF tensor %llu name length %llu",
                                  (unsigned long long)i, (unsigned long long)t->name_length);
        /* The container allows printable ASCII only; a NUL inside a name would
         * also make two names collide once truncated. */
        for (j = 0; j < t->name_length; j++)
            if (t->name[j] < 0x21 || t->name[j] > 0x7E)
                return pmpd_error_set(r->err, PMPD_ERR_FORMAT_VALUE, t->info_at + 8 + j,
                                      "GGUF tensor %llu name byte %llu (0x%02x) is not printable ASCII",
                                      (unsigned long long)i, (unsigned long long)j, (unsigned)t->name[j]);
        if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS)
            return pmpd_error_set(r->err, PMPD_ERR_FORMAT_SHAPE, r->at - 4, "GGUF tensor %.*s has %u dimensions",
                                  (int)t->name_length, (const char *)t->name, (unsigned)t->n_dims);
        for (j = 0; j < t->n_dims; j++) {
            if ((status = gguf_u64(r, &t->ne[j], "tensor dimension")) != PMPD_OK)
                return status;
            if (t->ne[j] == 0 || t->ne[j] > ((uint64_t)1 << 40))
                return pmpd_error_set(r->err, PMPD_ERR_FORMAT_SHAPE, r->at - 8, "GGUF tensor %.*s dimension %llu is %llu",
                                      (int)t->name_length, (const char *)t->name, (unsigned long long)j,
                                      (unsigned long long)t->ne[j]);
        }
        if ((status = gguf_u32(r, &t->type, "tensor type")) != PMPD_OK ||
            (status = gguf_u64(r, &t->offset, "tensor offset")) != PMPD_OK)
            return status;
        for (j = 0; j < i; j++)
            if (infos[j].name_length == t->name_length && memcmp(infos[j].name, t->name, (size_t)t->name_length) == 0)
                return pmpd_error_set(r->err, PMPD_ERR_FORMAT_DUPLICATE, t->info_at, "GGUF tensor %.*s appears twice",
                                      (int)t->name_length, (const char *)t->name);
    }
    return PMPD_OK;
}

/* The ggml type of t, refused unless pmpd decodes it. */
static pmpd_status gguf_tensor_type(gguf_reader *r, gguf_tensor_info *t)
{
    t->ggml = pmpd_ggml_type_find(t->type);
    if (!t->ggml)
        return pmpd_error_set(r->err, PMPD_ERR_FORMAT_VALUE, t->info_at, "GGUF tensor %.*s has unknown ggml type %u",
                              (int)t->name_length, (const char *)t->name, (unsigned)t->type);
    if (!t->ggml->decode)
        return pmpd_error_set(r->err, PMPD_ERR_UNSUPPORTED, t->info_at,
                              "GGUF tensor %.*s has ggml type %u (%s); this importer reads F32, F16, BF16, Q4_0, Q4_1, "
                              "Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS",
                              (int)t->name_length, (const char *)t->name, (unsigned)t->type, t->ggml->name);
    return PMPD_OK;
}

/* Checks t's shape, type, alignment and bounds and sets its data region. */
static pmpd_status gguf_tensor_region(gguf_reader *r, gguf_tensor_info *t, size_t data_start, uint64_t alignment)
{
    uint64_t bytes;
    uint32_t d;
    pmpd_status status;
    t->elements = 1;
    for (d = 0; d < t->n_dims; d++)
        if (!pmpd_checked_mul_u64(t->elements, t->ne[d], &t->elements))
            return pmpd_error_set(r->err, PMPD_ERR_FORMAT_SHAPE, t->info_at, "GGUF tensor %.*s shape overflows",
                                  (int)t->name_length, (const char *)t->name);
    if ((status = gguf_tensor_type(r, t)) != PMPD_OK)
        return status;
    /* Blocks never straddle rows in ggml, so the row length decides. */
    if (t->ne[0] % t->ggml->block_elements != 0)
        return pmpd_error_set(r->err, PMPD_ERR_FORMAT_SHAPE, t->info_at,
                              "GGUF tensor %.*s rows of %llu are not whole %s blocks of %u",
                              (int)t->name_length, (const char *)t->name, (unsigned long long)t->ne[0], t->ggml->name,
                              (unsigned)t->ggml->block_elements);
    if (!pmpd_checked_mul_u64(t->elements / t->ggml->block_elements, t->ggml->block_bytes, &bytes))
        return pmpd_error_set(r->err, PMPD_ERR_FORMAT_SHAPE, t->info_at, "GGUF tensor %.*s size overflows",
                              (int)t->name_length, (const char *)t->name);
    if (t->offset % alignment != 0)
        return pmpd_error_set(r->err, PMPD_ERR_FORMAT_ALIGNMENT, t->info_at,
                              "GGUF tensor %.*s offset %llu is not a multiple of the alignment %llu",
                              (int)t->name_length, (const char *)t->name, (unsigned long long)t->offset,
                              (unsigned long long)alignment);
    if (!pmpd_checked_add_u64(data_start, t->offset, &t->start) || !pmpd_checked_add_u64(t->start, bytes, &t->end) ||
        t->end > r->file_size)
        return pmpd_error_set(r->err, PMPD_ERR_FORMAT_BOUNDS, t->info_at,
                              "GGUF tensor %.*s data (offset %llu, %llu bytes) runs past the end of the file",
                              (int)t->name_length, (const char *)t->name, (unsigned long long)t->offset,
                              (unsigned long long)bytes);
    if (t->elements > SIZE_MAX / sizeof(float))
        return pmpd_error_set(r->err, PMPD_ERR_OVERFLOW, t->info_at, "GGUF tensor too large for this machine");
    return PMPD_OK;
}

static int gguf_compare_start(const void *a, const void *b)
{
    const gguf_tensor_info *x = *(const gguf_tensor_info *const *)a, *y = *(const gguf_tensor_info *const *)b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* llama.cpp places each tensor at the aligned offset after the previous
 * one, so two regions sharing a byte mean a malformed (or crafted) file:
 * refused, naming both tensors.  Regions sorted by start overlap iff some
 * region starts before its predecessor ends. */
static pmpd_status gguf_check_overlap(gguf_reader *r, gguf_tensor_info *infos, uint64_t n)
{
    const gguf_tensor_info **by_start = (const gguf_tensor_info **)malloc((size_t)n * sizeof *by_start);
    pmpd_status status = PMPD_OK;
    uint64_t i;
    if (!by_start)
        return pmpd_error_set(r->err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory");
    for (i = 0; i < n; i++)
        by_start[i] = &infos[i];
    qsort((void *)by_start, (size_t)n, sizeof *by_start, gguf_compare_start);
    for (i = 1; i < n && status == PMPD_OK; i++) {
        const gguf_tensor_info *a = by_start[i - 1], *b = by_start[i];
        if (b->start < a->end)
            status = pmpd_error_set(r->err, PMPD_ERR_FORMAT_BOUNDS, b->info_at,
                                    "GGUF tensor %.*s data (offset %llu) overlaps tensor %.*s (offset %llu, %llu bytes)",
                                    (int)b->name_length, (const char *)b->name, (unsigned long long)b->offset,
                                    (int)a->name_length, (const char *)a->name, (unsigned long long)a->offset,
                                    (unsigned long long)(a->end - a->start));
    }
    free((void *)by_start);
    return status;
}

/* Decodes a tensor's data, block by block, to floats. */
static void gguf_decode(const gguf_reader *r, const gguf_tensor_info *t, float *out)
{
    const pmpd_ggml_type_info *g = t->ggml;
    const unsigned char *block = r->data + t->start;
    uint64_t b, blocks = t->elements / g->block_elements;
    for (b = 0; b < blocks; b++, block += g->block_bytes)
        g->decode(block, out + b * g->block_elements);
}

static pmpd_status gguf_import_tensors(gguf_reader *r, gguf_tensor_info *infos, uint64_t n, size_t data_start,
                                       uint64_t alignment, pmpd_build_model *out)
{
    uint64_t i;
    pmpd_status status;
    /* Every region is checked before any is decoded. */
    for (i = 0; i < n; i++)
        if ((status = gguf_tensor_region(r, &infos[i], data_start, alignment)) != PMPD_OK)
            return status;
    if ((status = gguf_check_overlap(r, infos, n)) != PMPD_OK)
        return status;
    for (i = 0; i < n; i++) {
        const gguf_tensor_info *t = &infos[i];
        uint64_t dims[GGUF_MAX_DIMS];
        char name[PMPD_TENSOR_NAME_MAX + 1];
        float *values;
        uint32_t d;
        for (d = 0; d < t->n_dims; d++)
            dims[t->n_dims - 1 - d] = t->ne[d];
        memcpy(name, t->name, (size_t)t->name_length);
        name[t->name_length] = '\0';
        if (r->unloaded) {
            if (pmpd_build_add_unloaded(out, name, t->n_dims, dims, t->ggml, t->start) != PMPD_OK)
                return pmpd_error_set(r->err, PMPD_ERR_FORMAT_VALUE, t->info_at, "GGUF tensor %s cannot be stored",
                                      name);
            continue;
        }
        values = (float *)malloc((size_t)t->elements * sizeof *values);
        if (!values)
            return pmpd_error_set(r->err, PMPD_ERR_OUT_OF_MEMORY, t->info_at, "out of memory");
        gguf_decode(r, t, values);
        status = pmpd_build_add_f32(out, name, t->n_dims, dims, values);
        free(values);
        if (status != PMPD_OK)
            return pmpd_error_set(r->err, PMPD_ERR_FORMAT_VALUE, t->info_at, "GGUF tensor %s cannot be stored", name);
        out->tensors[out->n_tensors - 1].source_type = t->ggml;
    }
    return PMPD_OK;
}

/* A classifier equal to the embedding (decoded values, bit for bit) is the
 * shared classifier of llama2.c. */
static pmpd_status gguf_share_classifier(pmpd_build_model *b, pmpd_error *err)
{
    pmpd_build_tensor *emb = pmpd_build_find(b, "token_embd.weight");
    pmpd_build_tensor *cls = pmpd_build_find(b, "output.weight");
    int same = 0;
    pmpd_status status;
    if (!cls) {
        b->info.shared_classifier = 1;
        return PMPD_OK;
    }
    if (emb && (status = pmpd_build_same_values(b, emb, cls, &same, err)) != PMPD_OK)
        return status;
    if (same) {
        free(cls->data);
        *cls = b->tensors[--b->n_tensors];
        b->info.shared_classifier = 1;
    }
    return PMPD_OK;
}

/* The import, on the first size bytes of a file of file_size bytes (see
 * pmpd_import_gguf_unloaded). */
static pmpd_status gguf_import(const unsigned char *data, size_t size, uint64_t file_size, int unloaded,
                               int *short_read, pmpd_build_model *out, pmpd_error *err)
{
    gguf_reader r;
    gguf_value values[GGUF_KEY_COUNT];
    gguf_tensor_info *infos = NULL;
    uint64_t n_tensors, n_kv, alignment;
    uint32_t version;
    size_t data_start;
    pmpd_vocab vocab;
    pmpd_build_tensor *emb;
    pmpd_status status;
    pmpd_error_clear(err);
    memset(values, 0, sizeof values);
    memset(&vocab, 0, sizeof vocab);
    r.data = data;
    r.size = size;
    r.file_size = file_size;
    r.at = 0;
    r.short_read = 0;
    r.unloaded = unloaded;
    r.err = err;
    r.arch = GGUF_ARCH_NONE;
    if (size < 4 || memcmp(data, "GGUF", 4) != 0) {
        if (size < 4)
            gguf_past_end(&r);
        *short_read = r.short_read;
        return pmpd_error_set(err, size < 4 ? PMPD_ERR_FORMAT_TRUNCATED : PMPD_ERR_FORMAT_MAGIC, 0,
                              "GGUF magic is missing");
    }
    r.at = 4;
    status = gguf_u32(&r, &version, "version");
    *short_read = r.short_read;
    if (status != PMPD_OK)
        return status;
    if (version != 2 && version != 3)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VERSION, 4, "GGUF version %u is not supported (2 and 3 are)",
                              (unsigned)version);
    status = gguf_u64(&r, &n_tensors, "tensor count");
    if (status == PMPD_OK)
        status = gguf_u64(&r, &n_kv, "metadata count");
    *short_read = r.short_read;
    if (status != PMPD_OK)
        return status;
    /* A metadata entry takes at least 13 bytes and a tensor info 32. */
    if (n_kv > (file_size - r.at) / 13)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_BOUNDS, 16, "GGUF metadata count %llu is larger than the file allows",
                              (unsigned long long)n_kv);
    if (n_tensors == 0 || n_tensors > (file_size - r.at) / 32 || n_tensors > PMPD_MAX_TENSORS)
        return pmpd_error_set(err, n_tensors == 0 ? PMPD_ERR_FORMAT_VALUE : PMPD_ERR_FORMAT_BOUNDS, 8,
                              "GGUF tensor count %llu is zero or larger than the file allows",
                              (unsigned long long)n_tensors);
    status = gguf_read_all_metadata(&r, n_kv, values);
    *short_read = r.short_read;
    if (status != PMPD_OK)
        return status;
    if ((status = gguf_get_uint(&r, values, GGUF_KEY_ALIGNMENT, 32, 0, &alignment)) != PMPD_OK)
        return status;
    if (alignment == 0 || alignment > 65536 || (alignment & (alignment - 1)) != 0)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, values[GGUF_KEY_ALIGNMENT].at,
                              "GGUF general.alignment %llu is not a power of two up to 65536",
                              (unsigned long long)alignment);
    if ((status = gguf_read_hparams(&r, values, &out->info)) != PMPD_OK)
        return status;
    infos = (gguf_tensor_info *)calloc((size_t)n_tensors, sizeof *infos);
    if (!infos)
        return pmpd_error_set(err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory");
    status = gguf_read_tensor_infos(&r, n_tensors, infos);
    *short_read = r.short_read;
    if (status == PMPD_OK) {
        data_start = (r.at + (size_t)alignment - 1) / (size_t)alignment * (size_t)alignment;
        status = gguf_import_tensors(&r, infos, n_tensors, data_start, alignment, out);
    }
    free(infos);
    if (status == PMPD_OK)
        status = pmpd_import_gguf_features(out, r.arch == GGUF_ARCH_QWEN2 ? PMPD_ROPE_NEOX : PMPD_ROPE_ADJACENT, err);
    if (status != PMPD_OK)
        return status;
    if ((status = gguf_share_classifier(out, err)) != PMPD_OK)
        return status;
    emb = pmpd_build_find(out, "token_embd.weight");
    if (!emb || emb->n_dims != 2)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_MISSING, PMPD_NO_OFFSET, "GGUF token_embd.weight is missing or not 2-D");
    out->info.vocab_size = (uint32_t)(emb->dims[0] > PMPD_MAX_HPARAM ? PMPD_MAX_HPARAM + 1 : emb->dims[0]);
    if (out->info.bos_id >= out->info.vocab_size || out->info.eos_id >= out->info.vocab_size)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_HPARAMS, values[GGUF_KEY_BOS].present ? values[GGUF_KEY_BOS].at : PMPD_NO_OFFSET,
                              "GGUF BOS %u / EOS %u outside the %u-token vocabulary", (unsigned)out->info.bos_id,
                              (unsigned)out->info.eos_id, (unsigned)out->info.vocab_size);
    if (!(out->info.norm_eps > 0.0f && out->info.norm_eps < 1.0f) || !(out->info.rope_theta > 1.0f) ||
        out->info.rope_theta > 1e30f)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_HPARAMS, PMPD_NO_OFFSET,
                              "GGUF norm epsilon %g or rope base %g is out of range", (double)out->info.norm_eps,
                              (double)out->info.rope_theta);
    if (values[GGUF_KEY_TOKENS].present && gguf_string_is(&r, &values[GGUF_KEY_TOK_MODEL], "llama")) {
        status = gguf_read_vocab(&r, values, &vocab);
        if (status == PMPD_OK && vocab.n_tokens != out->info.vocab_size)
            status = pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, values[GGUF_KEY_TOKENS].at - 8,
                                    "GGUF vocabulary has %u tokens but token_embd.weight has %u rows",
                                    (unsigned)vocab.n_tokens, (unsigned)out->info.vocab_size);
        if (status == PMPD_OK && pmpd_build_add_vocab(out, &vocab) != PMPD_OK)
            status = pmpd_error_set(err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory for the tokenizer");
        pmpd_vocab_free(&vocab);
    } else if (values[GGUF_KEY_TOKENS].present && gguf_string_is(&r, &values[GGUF_KEY_TOK_MODEL], "gpt2")) {
        status = gguf_read_bpe_vocab(&r, values, out);
    } else if (values[GGUF_KEY_TOKENS].present && values[GGUF_KEY_TOK_MODEL].present) {
        const gguf_value *m = &values[GGUF_KEY_TOK_MODEL];
        uint64_t length = m->type == GGUF_STRING ? pmpd_le_u64(r.data + m->at) : 0;
        status = pmpd_error_set(err, PMPD_ERR_UNSUPPORTED, m->at,
                                "GGUF tokenizer.ggml.model \"%.*s\" is not one this build reads (llama, gpt2)",
                                (int)(length > 32 ? 32 : length), m->type == GGUF_STRING ? (const char *)r.data + m->at + 8 : "");
    }
    if (status == PMPD_OK)
        status = gguf_read_chat_template(&r, &values[GGUF_KEY_CHAT_TEMPLATE], out);
    return status;
}

PMPD_INTERNAL pmpd_status pmpd_import_gguf(const unsigned char *data, size_t size, pmpd_build_model *out,
                                           pmpd_error *err)
{
    int short_read;
    return gguf_import(data, size, size, 0, &short_read, out, err);
}

PMPD_INTERNAL pmpd_status pmpd_import_gguf_unloaded(const unsigned char *head, size_t head_size, uint64_t file_size,
                                                    int *short_read, pmpd_build_model *out, pmpd_error *err)
{
    *short_read = 0;
    if (head_size > file_size)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET, "GGUF head longer than the file");
    return gguf_import(head, head_size, file_size, 1, short_read, out, err);
}

#undef GGUF_MAX_DEPTH
#undef GGUF_MAX_DIMS
