/* Model builder and container writer (offline; uses the heap). */
#include "pmpd_impl/offline/format/builder.h"

#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/format/crc32.h"
#include "pmpd_impl/format/le.h"
#include "pmpd_impl/weights/format.h"
#include "pmpd_impl/offline/format/half.h"

PMPD_INTERNAL void pmpd_build_init(pmpd_build_model *b)
{
    memset(b, 0, sizeof *b);
}

PMPD_INTERNAL void pmpd_build_free(pmpd_build_model *b)
{
    uint32_t i;
    if (!b)
        return;
    for (i = 0; i < b->n_tensors; i++)
        free(b->tensors[i].data);
    for (i = 0; i < b->n_sections; i++)
        free(b->sections[i].data);
    free(b->tensors);
    free(b->sections);
    if (b->source)
        fclose(b->source);
    pmpd_build_init(b);
}

static int builder_grow(void **array, uint32_t *capacity, uint32_t needed, size_t element)
{
    uint32_t new_capacity;
    void *grown;
    if (needed <= *capacity)
        return 1;
    new_capacity = *capacity ? *capacity * 2 : 64;
    if (new_capacity < needed)
        new_capacity = needed;
    grown = realloc(*array, (size_t)new_capacity * element);
    if (!grown)
        return 0;
    *array = grown;
    *capacity = new_capacity;
    return 1;
}

PMPD_INTERNAL pmpd_status pmpd_build_add_tensor(pmpd_build_model *b, const char *name, uint32_t type, uint32_t n_dims,
                                  const uint64_t *dims, const void *data, uint64_t size)
{
    pmpd_build_tensor *t;
    uint64_t expected;
    size_t length = strlen(name), bytes;
    uint32_t i;
    if (length == 0 || length > PMPD_TENSOR_NAME_MAX || n_dims == 0 || n_dims > PMPD_TENSOR_MAX_DIMS ||
        pmpd_weight_tensor_bytes(type, n_dims, dims, &expected) != PMPD_OK || expected != size ||
        !pmpd_checked_u64_to_size(size, &bytes))
        return PMPD_ERR_INVALID_ARGUMENT;
    if (!builder_grow((void **)&b->tensors, &b->tensor_capacity, b->n_tensors + 1, sizeof *b->tensors))
        return PMPD_ERR_OUT_OF_MEMORY;
    t = &b->tensors[b->n_tensors];
    memset(t, 0, sizeof *t);
    memcpy(t->name, name, length);
    t->type = type;
    t->n_dims = n_dims;
    for (i = 0; i < n_dims; i++)
        t->dims[i] = dims[i];
    t->size = size;
    t->data = (unsigned char *)malloc(bytes ? bytes : 1);
    if (!t->data)
        return PMPD_ERR_OUT_OF_MEMORY;
    memcpy(t->data, data, bytes);
    b->n_tensors++;
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_build_add_f32(pmpd_build_model *b, const char *name, uint32_t n_dims, const uint64_t *dims,
                               const float *values)
{
    uint64_t bytes, i;
    unsigned char *le;
    pmpd_status status;
    if (pmpd_weight_tensor_bytes(PMPD_TENSOR_F32, n_dims, dims, &bytes) != PMPD_OK || bytes > SIZE_MAX)
        return PMPD_ERR_INVALID_ARGUMENT;
    le = (unsigned char *)malloc(bytes ? (size_t)bytes : 1);
    if (!le)
        return PMPD_ERR_OUT_OF_MEMORY;
    for (i = 0; i < bytes / 4; i++)
        pmpd_le_put_f32(le + 4 * i, values[i]);
    status = pmpd_build_add_tensor(b, name, PMPD_TENSOR_F32, n_dims, dims, le, bytes);
    free(le);
    return status;
}

PMPD_INTERNAL pmpd_status pmpd_build_add_section(pmpd_build_model *b, uint32_t kind, uint32_t version, uint32_t flags,
                                   const void *data, uint64_t size)
{
    pmpd_build_section *s;
    if (size > SIZE_MAX)
        return PMPD_ERR_INVALID_ARGUMENT;
    if (!builder_grow((void **)&b->sections, &b->section_capacity, b->n_sections + 1, sizeof *b->sections))
        return PMPD_ERR_OUT_OF_MEMORY;
    s = &b->sections[b->n_sections];
    s->kind = kind;
    s->version = version;
    s->flags = flags;
    s->size = size;
    s->data = (unsigned char *)malloc(size ? (size_t)size : 1);
    if (!s->data)
        return PMPD_ERR_OUT_OF_MEMORY;
    if (size)
        memcpy(s->data, data, (size_t)size);
    b->n_sections++;
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_build_tensor *pmpd_build_find(const pmpd_build_model *b, const char *name)
{
    uint32_t i;
    for (i = 0; i < b->n_tensors; i++)
        if (strcmp(b->tensors[i].name, name) == 0)
            return &b->tensors[i];
    return NULL;
}

PMPD_INTERNAL void pmpd_build_replace_data(pmpd_build_tensor *t, uint32_t type, unsigned char *data, uint64_t size)
{
    free(t->data);
    t->data = data;
    t->size = size;
    t->type = type;
}

PMPD_INTERNAL pmpd_status pmpd_build_convert_matrices(pmpd_build_model *b, uint32_t type)
{
    uint32_t i;
    if (type != PMPD_TENSOR_F32 && type != PMPD_TENSOR_F16)
        return PMPD_ERR_UNSUPPORTED;
    for (i = 0; i < b->n_tensors; i++) {
        pmpd_build_tensor *t = &b->tensors[i];
        uint64_t j, n = t->size / (t->type == PMPD_TENSOR_F32 ? 4 : 2);
        unsigned char *out;
        /* Only the other float type changes: f32 to f16, or f16 back to f32
         * (a container's f16 matrices, for a quantizer that reads floats). */
        if (t->n_dims != 2 || t->type == type || (t->type != PMPD_TENSOR_F32 && t->type != PMPD_TENSOR_F16))
            continue;
        out = (unsigned char *)malloc(n ? (size_t)(n * (type == PMPD_TENSOR_F32 ? 4 : 2)) : 1);
        if (!out)
            return PMPD_ERR_OUT_OF_MEMORY;
        for (j = 0; j < n; j++) {
            if (type == PMPD_TENSOR_F16) {
                uint16_t h = pmpd_float_to_half(pmpd_le_f32(t->data + 4 * j));
                out[2 * j] = (unsigned char)h;
                out[2 * j + 1] = (unsigned char)(h >> 8);
            } else {
                float f = pmpd_half_to_float((uint16_t)(t->data[2 * j] | t->data[2 * j + 1] << 8));
                memcpy(out + 4 * j, &f, 4); /* little-endian hosts only, as everywhere in pmpd */
            }
        }
        pmpd_build_replace_data(t, type, out, n * (type == PMPD_TENSOR_F32 ? 4 : 2));
    }
    return PMPD_OK;
}

PMPD_INTERNAL int pmpd_build_piece_compare(const void *a, const void *b)
{
    const pmpd_build_piece *x = (const pmpd_build_piece *)a, *y = (const pmpd_build_piece *)b;
    uint32_t common = x->length < y->length ? x->length : y->length;
    int c = common ? memcmp(x->bytes, y->bytes, common) : 0;
    if (c != 0)
        return c;
    if (x->length != y->length)
        return x->length < y->length ? -1 : 1;
    return x->id < y->id ? -1 : (x->id > y->id ? 1 : 0);
}

PMPD_INTERNAL pmpd_status pmpd_build_add_vocab(pmpd_build_model *b, const pmpd_vocab *v)
{
    uint64_t n = v->n_tokens, blob_size = v->offsets[n];
    uint64_t size = PMPD_TOK_HEADER_SIZE + 12 * n + 4 + blob_size;
    unsigned char *s, *at;
    pmpd_build_piece *pieces;
    uint32_t i;
    pmpd_status status;
    if (size > SIZE_MAX || blob_size > UINT32_MAX)
        return PMPD_ERR_INVALID_ARGUMENT;
    s = (unsigned char *)malloc((size_t)size);
    pieces = (pmpd_build_piece *)malloc((size_t)n * sizeof *pieces + 1);
    if (!s || !pieces) {
        free(s);
        free(pieces);
        return PMPD_ERR_OUT_OF_MEMORY;
    }
    pmpd_le_put_u32(s + PMPD_TOK_N_TOKENS, v->n_tokens);
    pmpd_le_put_u32(s + PMPD_TOK_MAX_TOKEN_LENGTH, v->max_token_length);
    pmpd_le_put_u32(s + PMPD_TOK_FLAGS, v->flags);
    pmpd_le_put_u32(s + PMPD_TOK_BLOB_SIZE, (uint32_t)blob_size);
    at = s + PMPD_TOK_HEADER_SIZE;
    for (i = 0; i < n; i++, at += 4)
        pmpd_le_put_f32(at, v->scores[i]);
    for (i = 0; i <= n; i++, at += 4)
        pmpd_le_put_u32(at, v->offsets[i]);
    for (i = 0; i < n; i++) {
        pieces[i].bytes = v->blob + v->offsets[i];
        pieces[i].length = v->offsets[i + 1] - v->offsets[i];
        pieces[i].id = i;
    }
    qsort(pieces, (size_t)n, sizeof *pieces, pmpd_build_piece_compare);
    for (i = 0; i < n; i++, at += 4)
        pmpd_le_put_u32(at, pieces[i].id);
    if (blob_size)
        memcpy(at, v->blob, (size_t)blob_size);
    status = pmpd_build_add_section(b, PMPD_SECTION_TOKENIZER, PMPD_TOKENIZER_VERSION, 0, s, size);
    free(s);
    free(pieces);
    return status;
}

PMPD_INTERNAL void pmpd_vocab_free(pmpd_vocab *v)
{
    if (!v)
        return;
    free(v->scores);
    free(v->offsets);
    free(v->blob);
    memset(v, 0, sizeof *v);
}

PMPD_INTERNAL uint64_t pmpd_build_align(uint64_t v)
{
    return (v + PMPD_CONTAINER_ALIGNMENT - 1) / PMPD_CONTAINER_ALIGNMENT * PMPD_CONTAINER_ALIGNMENT;
}

PMPD_INTERNAL uint64_t pmpd_build_directory_end(const pmpd_build_model *b)
{
    return PMPD_HEADER_SIZE + (uint64_t)b->n_tensors * PMPD_TENSOR_ENTRY_SIZE +
           (uint64_t)b->n_sections * PMPD_SECTION_ENTRY_SIZE;
}

PMPD_INTERNAL void pmpd_build_put_header(const pmpd_build_model *b, unsigned char *p, uint64_t file_size)
{
    const pmpd_model_info *h = &b->info;
    memcpy(p + PMPD_HDR_MAGIC, PMPD_CONTAINER_MAGIC, 4);
    pmpd_le_put_u32(p + PMPD_HDR_VERSION, PMPD_CONTAINER_VERSION);
    pmpd_le_put_u32(p + PMPD_HDR_HEADER_SIZE, PMPD_HEADER_SIZE);
    pmpd_le_put_u64(p + PMPD_HDR_FILE_SIZE, file_size);
    pmpd_le_put_u32(p + PMPD_HDR_N_TENSORS, b->n_tensors);
    pmpd_le_put_u32(p + PMPD_HDR_N_SECTIONS, b->n_sections);
    pmpd_le_put_u32(p + PMPD_HDR_DIM, h->dim);
    pmpd_le_put_u32(p + PMPD_HDR_HIDDEN_DIM, h->hidden_dim);
    pmpd_le_put_u32(p + PMPD_HDR_N_LAYERS, h->n_layers);
    pmpd_le_put_u32(p + PMPD_HDR_N_HEADS, h->n_heads);
    pmpd_le_put_u32(p + PMPD_HDR_N_KV_HEADS, h->n_kv_heads);
    pmpd_le_put_u32(p + PMPD_HDR_HEAD_DIM, h->head_dim);
    pmpd_le_put_u32(p + PMPD_HDR_VOCAB_SIZE, h->vocab_size);
    pmpd_le_put_u32(p + PMPD_HDR_SEQ_LEN, h->seq_len);
    pmpd_le_put_f32(p + PMPD_HDR_ROPE_THETA, h->rope_theta);
    pmpd_le_put_f32(p + PMPD_HDR_NORM_EPS, h->norm_eps);
    pmpd_le_put_u32(p + PMPD_HDR_SHARED_CLASSIFIER, h->shared_classifier);
    pmpd_le_put_u32(p + PMPD_HDR_BOS_ID, h->bos_id);
    pmpd_le_put_u32(p + PMPD_HDR_EOS_ID, h->eos_id);
    pmpd_le_put_u32(p + PMPD_HDR_ROPE_STYLE, h->rope_style);
    pmpd_le_put_u32(p + PMPD_HDR_FEATURES, h->features);
}

PMPD_INTERNAL void pmpd_build_put_tensor_entry(unsigned char *p, uint32_t i, const pmpd_build_tensor *t, uint32_t type,
                                               uint64_t offset, uint64_t size, uint32_t crc)
{
    unsigned char *e = p + PMPD_HEADER_SIZE + (size_t)i * PMPD_TENSOR_ENTRY_SIZE;
    size_t length = strlen(t->name);
    uint32_t k;
    memcpy(e + PMPD_TE_NAME, t->name, length);
    pmpd_le_put_u32(e + PMPD_TE_NAME_LENGTH, (uint32_t)length);
    pmpd_le_put_u32(e + PMPD_TE_TYPE, type);
    pmpd_le_put_u32(e + PMPD_TE_N_DIMS, t->n_dims);
    pmpd_le_put_u32(e + PMPD_TE_CRC, crc);
    for (k = 0; k < t->n_dims; k++)
        pmpd_le_put_u64(e + PMPD_TE_DIMS + 8 * k, t->dims[k]);
    pmpd_le_put_u64(e + PMPD_TE_OFFSET, offset);
    pmpd_le_put_u64(e + PMPD_TE_SIZE, size);
}

PMPD_INTERNAL void pmpd_build_put_section_entry(unsigned char *p, uint32_t n_tensors, uint32_t i,
                                                const pmpd_build_section *s, uint64_t offset)
{
    unsigned char *e =
        p + PMPD_HEADER_SIZE + (size_t)n_tensors * PMPD_TENSOR_ENTRY_SIZE + (size_t)i * PMPD_SECTION_ENTRY_SIZE;
    pmpd_le_put_u32(e + PMPD_SE_KIND, s->kind);
    pmpd_le_put_u32(e + PMPD_SE_VERSION, s->version);
    pmpd_le_put_u32(e + PMPD_SE_FLAGS, s->flags);
    pmpd_le_put_u32(e + PMPD_SE_CRC, pmpd_crc32_update(0, s->data, (size_t)s->size));
    pmpd_le_put_u64(e + PMPD_SE_OFFSET, offset);
    pmpd_le_put_u64(e + PMPD_SE_SIZE, s->size);
}

PMPD_INTERNAL void pmpd_build_seal_header(unsigned char *p, uint64_t directory_end)
{
    uint32_t crc = pmpd_crc32_update(0, p, PMPD_HDR_CRC);
    crc = pmpd_crc32_update(crc, p + PMPD_HEADER_SIZE, (size_t)(directory_end - PMPD_HEADER_SIZE));
    pmpd_le_put_u32(p + PMPD_HDR_CRC, crc);
}

PMPD_INTERNAL pmpd_status pmpd_build_serialize(const pmpd_build_model *b, void **block, unsigned char **data, size_t *size)
{
    uint64_t directory_end = pmpd_build_directory_end(b);
    uint64_t at = pmpd_build_align(directory_end), total;
    unsigned char *p, *raw;
    uint32_t i;
    *block = NULL;
    *data = NULL;
    *size = 0;
    for (i = 0; i < b->n_tensors; i++) {
        if (!b->tensors[i].data)
            return PMPD_ERR_INVALID_ARGUMENT; /* unloaded: only pmpd_build_write_stream reads those */
        at = pmpd_build_align(at + b->tensors[i].size);
    }
    for (i = 0; i < b->n_sections; i++)
        at = pmpd_build_align(at + b->sections[i].size);
    total = at;
    if (total > SIZE_MAX - PMPD_CONTAINER_ALIGNMENT)
        return PMPD_ERR_OVERFLOW;
    raw = (unsigned char *)calloc(1, (size_t)total + PMPD_CONTAINER_ALIGNMENT);
    if (!raw)
        return PMPD_ERR_OUT_OF_MEMORY;
    p = raw + (PMPD_CONTAINER_ALIGNMENT - (uintptr_t)raw % PMPD_CONTAINER_ALIGNMENT) % PMPD_CONTAINER_ALIGNMENT;
    pmpd_build_put_header(b, p, total);
    at = pmpd_build_align(directory_end);
    for (i = 0; i < b->n_tensors; i++) {
        const pmpd_build_tensor *t = &b->tensors[i];
        pmpd_build_put_tensor_entry(p, i, t, t->type, at, t->size, pmpd_crc32_update(0, t->data, (size_t)t->size));
        memcpy(p + at, t->data, (size_t)t->size);
        at = pmpd_build_align(at + t->size);
    }
    for (i = 0; i < b->n_sections; i++) {
        const pmpd_build_section *s = &b->sections[i];
        pmpd_build_put_section_entry(p, b->n_tensors, i, s, at);
        if (s->size)
            memcpy(p + at, s->data, (size_t)s->size);
        at = pmpd_build_align(at + s->size);
    }
    pmpd_build_seal_header(p, directory_end);
    *block = raw;
    *data = p;
    *size = (size_t)total;
    return PMPD_OK;
}
