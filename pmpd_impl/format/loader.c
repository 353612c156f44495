/* The .pmpd container loader: validates every byte it will rely on, then
 * builds the model's tables in the caller's arena, pointing into the
 * container (zero-copy).  The order of checks follows the file: header,
 * directory checksum, hyperparameters, directory entries, data regions,
 * then the model's required tensors and the tokenizer. */
#include "pmpd_impl/format/loader.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/core/error.h"
#include "pmpd_impl/format/chat_template.h"
#include "pmpd_impl/format/container.h"
#include "pmpd_impl/format/crc32.h"
#include "pmpd_impl/format/le.h"
#include "pmpd_impl/tokenizer/bpe.h"
#include "pmpd_impl/weights/format.h"

/* A data region of the file, for the overlap check. */
typedef struct loader_region {
    uint64_t offset;
    uint64_t size;
    uint64_t entry_offset; /* where its directory entry is, for messages */
} loader_region;

typedef int (*loader_less_fn)(const void *context, uint32_t a, uint32_t b);

/* In-place heapsort of an index array: O(n log n), no recursion, no memory. */
static void loader_sift(uint32_t *idx, size_t root, size_t n, loader_less_fn less, const void *context)
{
    for (;;) {
        size_t child = 2 * root + 1, largest = root;
        uint32_t tmp;
        if (child < n && less(context, idx[largest], idx[child]))
            largest = child;
        if (child + 1 < n && less(context, idx[largest], idx[child + 1]))
            largest = child + 1;
        if (largest == root)
            return;
        tmp = idx[root];
        idx[root] = idx[largest];
        idx[largest] = tmp;
        root = largest;
    }
}

static void loader_sort(uint32_t *idx, size_t n, loader_less_fn less, const void *context)
{
    size_t i;
    for (i = n / 2; i-- > 0;)
        loader_sift(idx, i, n, less, context);
    for (i = n; i-- > 1;) {
        uint32_t tmp = idx[0];
        idx[0] = idx[i];
        idx[i] = tmp;
        loader_sift(idx, 0, i, less, context);
    }
}

static int loader_region_less(const void *context, uint32_t a, uint32_t b)
{
    const loader_region *r = (const loader_region *)context;
    return r[a].offset < r[b].offset || (r[a].offset == r[b].offset && a < b);
}

static int loader_name_compare(const pmpd_tensor *a, const char *name, size_t length)
{
    size_t common = a->name_length < length ? a->name_length : length;
    int c = memcmp(a->name, name, common);
    if (c != 0)
        return c;
    return a->name_length < length ? -1 : (a->name_length > length ? 1 : 0);
}

static int loader_name_less(const void *context, uint32_t a, uint32_t b)
{
    const pmpd_tensor *t = (const pmpd_tensor *)context;
    int c = loader_name_compare(&t[a], t[b].name, t[b].name_length);
    return c < 0 || (c == 0 && a < b);
}

static uint64_t loader_tensor_entry(uint32_t i)
{
    return PMPD_HEADER_SIZE + (uint64_t)i * PMPD_TENSOR_ENTRY_SIZE;
}

static pmpd_status loader_check_header(const unsigned char *p, size_t size, uint64_t *directory_end,
                                       pmpd_error *err)
{
    uint64_t file_size;
    uint32_t n_tensors, n_sections, i;
    size_t magic_bytes = size < 4 ? size : 4;
    if (size == 0)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_TRUNCATED, 0, "container is empty");
    if (memcmp(p, PMPD_CONTAINER_MAGIC, magic_bytes) != 0)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_MAGIC, 0, "magic is not \"PMPD\": not a pmpd container");
    if (size < PMPD_HEADER_SIZE)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_TRUNCATED, size,
                              "container ends at byte %zu, inside the 128-byte header", size);
    if (pmpd_le_u32(p + PMPD_HDR_VERSION) != PMPD_CONTAINER_VERSION)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VERSION, PMPD_HDR_VERSION,
                              "format version %u is not supported (this build reads version %u)",
                              (unsigned)pmpd_le_u32(p + PMPD_HDR_VERSION), PMPD_CONTAINER_VERSION);
    if (pmpd_le_u32(p + PMPD_HDR_HEADER_SIZE) != PMPD_HEADER_SIZE)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, PMPD_HDR_HEADER_SIZE, "header_size %u is not 128",
                              (unsigned)pmpd_le_u32(p + PMPD_HDR_HEADER_SIZE));
    if (pmpd_le_u32(p + PMPD_HDR_FLAGS) != 0)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, PMPD_HDR_FLAGS, "header flags 0x%x are not zero",
                              (unsigned)pmpd_le_u32(p + PMPD_HDR_FLAGS));
    file_size = pmpd_le_u64(p + PMPD_HDR_FILE_SIZE);
    if (file_size != (uint64_t)size)
        return pmpd_error_set(err, file_size > size ? PMPD_ERR_FORMAT_TRUNCATED : PMPD_ERR_FORMAT_BOUNDS,
                              PMPD_HDR_FILE_SIZE, "file_size is %llu but the input has %zu bytes",
                              (unsigned long long)file_size, size);
    n_tensors = pmpd_le_u32(p + PMPD_HDR_N_TENSORS);
    n_sections = pmpd_le_u32(p + PMPD_HDR_N_SECTIONS);
    if (n_tensors == 0 || n_tensors > PMPD_MAX_TENSORS)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, PMPD_HDR_N_TENSORS, "n_tensors %u is outside 1..%u",
                              (unsigned)n_tensors, PMPD_MAX_TENSORS);
    if (n_sections > PMPD_MAX_SECTIONS)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, PMPD_HDR_N_SECTIONS, "n_sections %u exceeds %u",
                              (unsigned)n_sections, PMPD_MAX_SECTIONS);
    *directory_end = PMPD_HEADER_SIZE + (uint64_t)n_tensors * PMPD_TENSOR_ENTRY_SIZE +
                     (uint64_t)n_sections * PMPD_SECTION_ENTRY_SIZE;
    if (*directory_end > size)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_TRUNCATED, PMPD_HDR_N_TENSORS,
                              "%u tensors and %u sections need a %llu-byte directory end, past the %zu-byte input",
                              (unsigned)n_tensors, (unsigned)n_sections, (unsigned long long)*directory_end, size);
    for (i = PMPD_HDR_RESERVED; i < PMPD_HDR_CRC; i++)
        if (p[i] != 0)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, i, "reserved header byte %u is not zero", (unsigned)i);
    return PMPD_OK;
}

static pmpd_status loader_read_hparams(const unsigned char *p, pmpd_model_info *h, pmpd_error *err)
{
    static const struct {
        uint32_t offset;
        const char *name;
    } counts[] = {
        {PMPD_HDR_DIM, "dim"},           {PMPD_HDR_HIDDEN_DIM, "hidden_dim"},
        {PMPD_HDR_N_LAYERS, "n_layers"}, {PMPD_HDR_N_HEADS, "n_heads"},
        {PMPD_HDR_N_KV_HEADS, "n_kv_heads"}, {PMPD_HDR_HEAD_DIM, "head_dim"},
        {PMPD_HDR_VOCAB_SIZE, "vocab_size"}, {PMPD_HDR_SEQ_LEN, "seq_len"},
    };
    uint32_t rope_bits, eps_bits;
    size_t i, kv_bytes;
    for (i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        uint32_t v = pmpd_le_u32(p + counts[i].offset);
        if (v == 0 || v > PMPD_MAX_HPARAM)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_HPARAMS, counts[i].offset, "%s is %u, outside 1..%u",
                                  counts[i].name, (unsigned)v, PMPD_MAX_HPARAM);
    }
    h->dim = pmpd_le_u32(p + PMPD_HDR_DIM);
    h->hidden_dim = pmpd_le_u32(p + PMPD_HDR_HIDDEN_DIM);
    h->n_layers = pmpd_le_u32(p + PMPD_HDR_N_LAYERS);
    h->n_heads = pmpd_le_u32(p + PMPD_HDR_N_HEADS);
    h->n_kv_heads = pmpd_le_u32(p + PMPD_HDR_N_KV_HEADS);
    h->head_dim = pmpd_le_u32(p + PMPD_HDR_HEAD_DIM);
    h->vocab_size = pmpd_le_u32(p + PMPD_HDR_VOCAB_SIZE);
    h->seq_len = pmpd_le_u32(p + PMPD_HDR_SEQ_LEN);
    rope_bits = pmpd_le_u32(p + PMPD_HDR_ROPE_THETA);
    eps_bits = pmpd_le_u32(p + PMPD_HDR_NORM_EPS);
    h->rope_theta = pmpd_le_f32(p + PMPD_HDR_ROPE_THETA);
    h->norm_eps = pmpd_le_f32(p + PMPD_HDR_NORM_EPS);
    h->shared_classifier = pmpd_le_u32(p + PMPD_HDR_SHARED_CLASSIFIER);
    h->bos_id = pmpd_le_u32(p + PMPD_HDR_BOS_ID);
    h->eos_id = pmpd_le_u32(p + PMPD_HDR_EOS_ID);
    h->rope_style = pmpd_le_u32(p + PMPD_HDR_ROPE_STYLE);
    h->features = pmpd_le_u32(p + PMPD_HDR_FEATURES);
    if (h->n_kv_heads > h->n_heads || h->n_heads % h->n_kv_heads != 0)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_HPARAMS, PMPD_HDR_N_KV_HEADS,
                              "n_kv_heads %u does not divide n_heads %u", (unsigned)h->n_kv_heads,
                              (unsigned)h->n_heads);
    if (h->head_dim % 2 != 0)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_HPARAMS, PMPD_HDR_HEAD_DIM,
                              "head_dim %u is odd (rotary embedding rotates pairs)", (unsigned)h->head_dim);
    /* head_dim need not be dim / n_heads (Llama 3.2 3B-style key_length),
     * but the query width is a tensor dimension like the others. */
    if ((uint64_t)h->n_heads * h->head_dim > PMPD_MAX_HPARAM)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_HPARAMS, PMPD_HDR_HEAD_DIM,
                              "n_heads %u x head_dim %u exceeds %u", (unsigned)h->n_heads, (unsigned)h->head_dim,
                              PMPD_MAX_HPARAM);
    /* The KV cache (2 x layers x seq_len x kv width floats) must be addressable. */
    if (!pmpd_checked_mul3(h->n_layers, h->seq_len, (size_t)h->n_kv_heads * h->head_dim, &kv_bytes) ||
        !pmpd_checked_mul(kv_bytes, 2 * sizeof(float), &kv_bytes) ||
        !pmpd_checked_mul3(h->seq_len, h->n_heads, sizeof(float), &kv_bytes))
        return pmpd_error_set(err, PMPD_ERR_FORMAT_HPARAMS, PMPD_HDR_SEQ_LEN,
                              "seq_len %u makes the KV cache size overflow this machine's size_t",
                              (unsigned)h->seq_len);
    if (!pmpd_f32_bits_finite(rope_bits) || !(h->rope_theta > 1.0f))
        return pmpd_error_set(err, PMPD_ERR_FORMAT_HPARAMS, PMPD_HDR_ROPE_THETA,
                              "rope_theta %g is not a finite number above 1", (double)h->rope_theta);
    if (!pmpd_f32_bits_finite(eps_bits) || !(h->norm_eps > 0.0f && h->norm_eps < 1.0f))
        return pmpd_error_set(err, PMPD_ERR_FORMAT_HPARAMS, PMPD_HDR_NORM_EPS,
                              "norm_eps %g is not in (0, 1)", (double)h->norm_eps);
    if (h->shared_classifier > 1)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_HPARAMS, PMPD_HDR_SHARED_CLASSIFIER,
                              "shared_classifier %u is neither 0 nor 1", (unsigned)h->shared_classifier);
    if (h->rope_style != PMPD_ROPE_ADJACENT && h->rope_style != PMPD_ROPE_NEOX)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, PMPD_HDR_ROPE_STYLE,
                              "rope_style %u is unknown (0: adjacent pairs, 1: NeoX halves)", (unsigned)h->rope_style);
    if ((h->features & ~PMPD_KNOWN_FEATURES) != 0)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, PMPD_HDR_FEATURES,
                              "features 0x%x have bits this build does not know (known: 0x%x)",
                              (unsigned)h->features, (unsigned)PMPD_KNOWN_FEATURES);
    if (h->bos_id >= h->vocab_size)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_HPARAMS, PMPD_HDR_BOS_ID, "bos_id %u is outside the vocabulary of %u",
                              (unsigned)h->bos_id, (unsigned)h->vocab_size);
    if (h->eos_id >= h->vocab_size)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_HPARAMS, PMPD_HDR_EOS_ID, "eos_id %u is outside the vocabulary of %u",
                              (unsigned)h->eos_id, (unsigned)h->vocab_size);
    return PMPD_OK;
}

/* Bounds and alignment of one data region [offset, offset + size). */
static pmpd_status loader_check_region(const char *what, uint64_t entry_offset, uint64_t offset, uint64_t size,
                                       uint64_t data_start, uint64_t file_size, pmpd_error *err)
{
    uint64_t end;
    if (offset % PMPD_CONTAINER_ALIGNMENT != 0)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_ALIGNMENT, entry_offset,
                              "%s data offset %llu is not a multiple of 64", what, (unsigned long long)offset);
    if (!pmpd_checked_add_u64(offset, size, &end))
        return pmpd_error_set(err, PMPD_ERR_FORMAT_BOUNDS, entry_offset, "%s offset %llu + size %llu wraps around",
                              what, (unsigned long long)offset, (unsigned long long)size);
    if (end > file_size)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_BOUNDS, entry_offset,
                              "%s data [%llu, %llu) ends past the %llu-byte container", what,
                              (unsigned long long)offset, (unsigned long long)end, (unsigned long long)file_size);
    if (offset < data_start)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_OVERLAP, entry_offset,
                              "%s data offset %llu lies inside the header or directory (data starts at %llu)", what,
                              (unsigned long long)offset, (unsigned long long)data_start);
    return PMPD_OK;
}

/* Nested any-precision matrices keep their widths in a header of their own,
 * so their size is checked against that header once the bytes are known to
 * lie inside the file. */
static pmpd_status loader_read_tensor(const unsigned char *p, uint32_t index, uint64_t data_start,
                                      uint64_t file_size, pmpd_tensor *t, pmpd_error *err)
{
    uint64_t at = loader_tensor_entry(index), bytes, offset;
    const unsigned char *e = p + at;
    const pmpd_weight_format *format;
    uint32_t i;
    pmpd_status status;
    t->name = (const char *)e + PMPD_TE_NAME;
    t->name_length = pmpd_le_u32(e + PMPD_TE_NAME_LENGTH);
    t->type = pmpd_le_u32(e + PMPD_TE_TYPE);
    t->n_dims = pmpd_le_u32(e + PMPD_TE_N_DIMS);
    if (t->name_length == 0 || t->name_length > PMPD_TENSOR_NAME_MAX)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, at + PMPD_TE_NAME_LENGTH,
                              "tensor %u name_length %u is outside 1..64", (unsigned)index, (unsigned)t->name_length);
    for (i = 0; i < PMPD_TENSOR_NAME_MAX; i++) {
        unsigned char c = e[PMPD_TE_NAME + i];
        if (i < t->name_length ? (c < 0x21 || c > 0x7E) : c != 0)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, at + PMPD_TE_NAME + i,
                                  "tensor %u name byte %u (0x%02x) is not printable ASCII or zero padding",
                                  (unsigned)index, (unsigned)i, (unsigned)c);
    }
    format = pmpd_weight_format_of(t->type);
    if (!format)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, at + PMPD_TE_TYPE, "tensor %.*s has unknown type %u",
                              (int)t->name_length, t->name, (unsigned)t->type);
    if (t->n_dims == 0 || t->n_dims > PMPD_TENSOR_MAX_DIMS)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, at + PMPD_TE_N_DIMS, "tensor %.*s n_dims %u is outside 1..4",
                              (int)t->name_length, t->name, (unsigned)t->n_dims);
    for (i = 0; i < PMPD_TENSOR_MAX_DIMS; i++) {
        t->dims[i] = pmpd_le_u64(e + PMPD_TE_DIMS + 8 * i);
        if (i < t->n_dims ? t->dims[i] == 0 : t->dims[i] != 0)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, at + PMPD_TE_DIMS + 8 * i,
                                  "tensor %.*s dimension %u is %llu", (int)t->name_length, t->name, (unsigned)i,
                                  (unsigned long long)t->dims[i]);
    }
    for (i = 0; i < 8; i++)
        if (e[PMPD_TE_RESERVED + i] != 0)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, at + PMPD_TE_RESERVED + i,
                                  "tensor %.*s reserved byte is not zero", (int)t->name_length, t->name);
    t->size = pmpd_le_u64(e + PMPD_TE_SIZE);
    offset = pmpd_le_u64(e + PMPD_TE_OFFSET);
    /* Self-describing formats (no tensor_bytes) are sized by their entry
     * and verified by their check. */
    if (format->tensor_bytes) {
        status = pmpd_weight_tensor_bytes(t->type, t->n_dims, t->dims, &bytes);
        if (status != PMPD_OK)
            return pmpd_error_set(err, status, at + PMPD_TE_DIMS, "tensor %.*s: type %s cannot hold its shape (a shape the type does "
                                  "not store, or a size that overflows 64 bits)",
                                  (int)t->name_length, t->name, format->name);
        if (t->size != bytes)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, at + PMPD_TE_SIZE,
                                  "tensor %.*s size %llu differs from the %llu bytes its type and shape need",
                                  (int)t->name_length, t->name, (unsigned long long)t->size,
                                  (unsigned long long)bytes);
    }
    status = loader_check_region("tensor", at + PMPD_TE_OFFSET, offset, t->size, data_start, file_size, err);
    if (status == PMPD_OK && format->check)
        status = format->check(p + offset, t->size, t->n_dims, t->dims, offset, t->name, t->name_length, err);
    return status;
}

/* The version of each section kind this build can read; 0 for kinds it has
 * no reader for (their required copies are refused, optional ones skipped). */
static uint32_t loader_section_version_read(uint32_t kind)
{
    switch (kind) {
    case PMPD_SECTION_TOKENIZER: return PMPD_TOKENIZER_VERSION;
    case PMPD_SECTION_PRECISION_SCHEDULE: return PMPD_PRECISION_SCHEDULE_VERSION;
    case PMPD_SECTION_LEARNED_SCHEDULER: return PMPD_LEARNED_SCHEDULER_VERSION;
    case PMPD_SECTION_KV_CODEBOOKS: return PMPD_KV_CODEBOOKS_VERSION;
    case PMPD_SECTION_CHAT_TEMPLATE: return PMPD_CHAT_TEMPLATE_VERSION;
    default: return 0;
    }
}

static const char *loader_section_name(uint32_t kind)
{
    switch (kind) {
    case PMPD_SECTION_TOKENIZER: return "tokenizer";
    case PMPD_SECTION_PRECISION_SCHEDULE: return "precision schedule";
    case PMPD_SECTION_LEARNED_SCHEDULER: return "learned scheduler";
    case PMPD_SECTION_KV_CODEBOOKS: return "KV codebooks";
    case PMPD_SECTION_CHAT_TEMPLATE: return "chat template";
    default: return "unknown";
    }
}

static pmpd_status loader_read_section(const unsigned char *p, uint64_t at, uint64_t data_start, uint64_t file_size,
                                       pmpd_section *s, pmpd_error *err)
{
    const unsigned char *e = p + at;
    s->kind = pmpd_le_u32(e + PMPD_SE_KIND);
    s->version = pmpd_le_u32(e + PMPD_SE_VERSION);
    s->flags = pmpd_le_u32(e + PMPD_SE_FLAGS);
    s->size = pmpd_le_u64(e + PMPD_SE_SIZE);
    if ((s->flags & ~PMPD_SECTION_FLAG_REQUIRED) != 0)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, at + PMPD_SE_FLAGS, "section flags 0x%x have unknown bits",
                              (unsigned)s->flags);
    if ((s->flags & PMPD_SECTION_FLAG_REQUIRED) && loader_section_version_read(s->kind) == 0)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_REQUIRED_SECTION, at + PMPD_SE_KIND,
                              "section kind %u is unknown to this build and marked required", (unsigned)s->kind);
    if ((s->flags & PMPD_SECTION_FLAG_REQUIRED) && s->version != loader_section_version_read(s->kind) &&
        !(s->kind == PMPD_SECTION_TOKENIZER && s->version == PMPD_TOKENIZER_VERSION_BPE))
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VERSION, at + PMPD_SE_VERSION,
                              "required %s section is version %u; this build reads version %u%s",
                              loader_section_name(s->kind), (unsigned)s->version,
                              (unsigned)loader_section_version_read(s->kind),
                              s->kind == PMPD_SECTION_TOKENIZER ? " and 2" : "");
    return loader_check_region("section", at + PMPD_SE_OFFSET, pmpd_le_u64(e + PMPD_SE_OFFSET), s->size, data_start,
                               file_size, err);
}

static pmpd_status loader_check_overlaps(loader_region *regions, uint32_t n, pmpd_arena *arena, pmpd_error *err)
{
    uint32_t *order, i, prev = UINT32_MAX;
    pmpd_status status = pmpd_arena_alloc_array(arena, n, sizeof *order, PMPD_ARENA_ALIGNMENT, (void **)&order);
    if (status != PMPD_OK)
        return pmpd_error_set(err, status, PMPD_NO_OFFSET, "arena too small for the container's region table");
    for (i = 0; i < n; i++)
        order[i] = i;
    loader_sort(order, n, loader_region_less, regions);
    for (i = 0; i < n; i++) {
        const loader_region *r = &regions[order[i]];
        if (r->size == 0)
            continue;
        if (prev != UINT32_MAX && regions[prev].offset + regions[prev].size > r->offset)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_OVERLAP, r->entry_offset,
                                  "data at offset %llu overlaps the region at %llu (%llu bytes)",
                                  (unsigned long long)r->offset, (unsigned long long)regions[prev].offset,
                                  (unsigned long long)regions[prev].size);
        prev = order[i];
    }
    return PMPD_OK;
}

static pmpd_status loader_check_names(const pmpd_tensor *tensors, uint32_t n, uint32_t *order, pmpd_error *err)
{
    uint32_t i;
    for (i = 0; i < n; i++)
        order[i] = i;
    loader_sort(order, n, loader_name_less, tensors);
    for (i = 1; i < n; i++) {
        const pmpd_tensor *a = &tensors[order[i - 1]], *b = &tensors[order[i]];
        if (loader_name_compare(a, b->name, b->name_length) == 0)
            return pmpd_error_set(err, PMPD_ERR_FORMAT_DUPLICATE, loader_tensor_entry(order[i]),
                                  "tensor name %.*s appears twice", (int)b->name_length, b->name);
    }
    return PMPD_OK;
}

/* Binding context: the model, its tensors sorted by name, the directory. */
typedef struct loader_binder {
    pmpd_model *model;
    const uint32_t *order;
    const unsigned char *bytes;
    pmpd_error *err;
} loader_binder;

static uint32_t loader_index_of(const loader_binder *b, const char *name)
{
    size_t length = strlen(name), lo = 0, hi = b->model->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (loader_name_compare(&b->model->tensors[b->order[mid]], name, length) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < b->model->n_tensors && loader_name_compare(&b->model->tensors[b->order[lo]], name, length) == 0)
        return b->order[lo];
    return UINT32_MAX;
}

/* Finds a required tensor and checks its shape: rows x cols, or a vector of
 * cols f32 values that must all be finite (norm weights) when rows == 0. */
static pmpd_status loader_bind(const loader_binder *b, const char *name, uint64_t rows, uint64_t cols,
                               const pmpd_tensor **out)
{
    uint32_t index = loader_index_of(b, name);
    const pmpd_tensor *t;
    uint64_t at, i;
    if (index == UINT32_MAX)
        return pmpd_error_set(b->err, PMPD_ERR_FORMAT_MISSING, PMPD_HDR_N_TENSORS, "required tensor %s is missing",
                              name);
    t = &b->model->tensors[index];
    at = loader_tensor_entry(index);
    if (rows == 0) {
        if (t->n_dims != 1 || t->dims[0] != cols || t->type != PMPD_TENSOR_F32)
            return pmpd_error_set(b->err, PMPD_ERR_FORMAT_SHAPE, at + PMPD_TE_DIMS,
                                  "tensor %s must be an f32 vector of %llu values", name, (unsigned long long)cols);
        for (i = 0; i < cols; i++)
            if (!pmpd_f32_bits_finite(pmpd_le_u32((const unsigned char *)t->data + 4 * i)))
                return pmpd_error_set(b->err, PMPD_ERR_FORMAT_NONFINITE,
                                      pmpd_le_u64(b->bytes + at + PMPD_TE_OFFSET) + 4 * i,
                                      "tensor %s element %llu is NaN or infinite", name, (unsigned long long)i);
    } else if (t->n_dims != 2 || t->dims[0] != rows || t->dims[1] != cols) {
        return pmpd_error_set(b->err, PMPD_ERR_FORMAT_SHAPE, at + PMPD_TE_DIMS,
                              "tensor %s has shape %llux%llu (%u dims); the hyperparameters need %llux%llu", name,
                              (unsigned long long)t->dims[0], (unsigned long long)t->dims[1], (unsigned)t->n_dims,
                              (unsigned long long)rows, (unsigned long long)cols);
    }
    *out = t;
    return PMPD_OK;
}

static pmpd_status loader_bind_layer(const loader_binder *b, uint32_t l, pmpd_layer_weights *w)
{
    const pmpd_model_info *h = &b->model->info;
    uint64_t q = (uint64_t)h->n_heads * h->head_dim, kv = (uint64_t)h->n_kv_heads * h->head_dim;
    const struct {
        const char *suffix;
        uint64_t rows, cols;
        const pmpd_tensor **slot;
    } want[] = {
        {"attn_norm", 0, h->dim, &w->attn_norm}, {"attn_q", q, h->dim, &w->wq},
        {"attn_k", kv, h->dim, &w->wk},          {"attn_v", kv, h->dim, &w->wv},
        {"attn_output", h->dim, q, &w->wo},      {"ffn_norm", 0, h->dim, &w->ffn_norm},
        {"ffn_gate", h->hidden_dim, h->dim, &w->w_gate}, {"ffn_down", h->dim, h->hidden_dim, &w->w_down},
        {"ffn_up", h->hidden_dim, h->dim, &w->w_up},
    };
    const struct {
        const char *suffix;
        uint64_t width;
        const pmpd_tensor **slot;
    } bias[] = {{"attn_q", q, &w->bq}, {"attn_k", kv, &w->bk}, {"attn_v", kv, &w->bv}};
    size_t i;
    char name[PMPD_TENSOR_NAME_MAX + 1];
    pmpd_status status;
    for (i = 0; i < sizeof want / sizeof want[0]; i++) {
        snprintf(name, sizeof name, "blk.%u.%s.weight", (unsigned)l, want[i].suffix);
        status = loader_bind(b, name, want[i].rows, want[i].cols, want[i].slot);
        if (status != PMPD_OK)
            return status;
    }
    /* Without the feature bit the biases stay NULL and the forward pass
     * adds nothing. */
    for (i = 0; (h->features & PMPD_MODEL_QKV_BIAS) && i < sizeof bias / sizeof bias[0]; i++) {
        snprintf(name, sizeof name, "blk.%u.%s.bias", (unsigned)l, bias[i].suffix);
        status = loader_bind(b, name, 0, bias[i].width, bias[i].slot);
        if (status != PMPD_OK)
            return status;
    }
    return PMPD_OK;
}

/* Llama 3.1's frequency divisors: finite (checked by loader_bind) and
 * positive, since each divides a rotary frequency. */
static pmpd_status loader_bind_rope_freqs(const loader_binder *b)
{
    pmpd_model *m = b->model;
    uint32_t i, half = m->info.head_dim / 2;
    const unsigned char *data;
    pmpd_status status = loader_bind(b, "rope_freqs.weight", 0, half, &m->rope_freqs);
    if (status != PMPD_OK)
        return status;
    data = (const unsigned char *)m->rope_freqs->data;
    for (i = 0; i < half; i++)
        if (!(pmpd_le_f32(data + 4 * i) > 0.0f))
            return pmpd_error_set(b->err, PMPD_ERR_FORMAT_VALUE, (uint64_t)(data + 4 * i - b->bytes),
                                  "tensor rope_freqs.weight element %u is %g, not a positive divisor", (unsigned)i,
                                  (double)pmpd_le_f32(data + 4 * i));
    return PMPD_OK;
}

static pmpd_status loader_bind_model(const loader_binder *b)
{
    pmpd_model *m = b->model;
    const pmpd_model_info *h = &m->info;
    pmpd_status status;
    uint32_t l;
    status = loader_bind(b, "token_embd.weight", h->vocab_size, h->dim, &m->tok_embedding);
    if (status == PMPD_OK)
        status = loader_bind(b, "output_norm.weight", 0, h->dim, &m->final_norm);
    if (status != PMPD_OK)
        return status;
    if (h->shared_classifier) {
        uint32_t extra = loader_index_of(b, "output.weight");
        if (extra != UINT32_MAX)
            return pmpd_error_set(b->err, PMPD_ERR_FORMAT_DUPLICATE, loader_tensor_entry(extra),
                                  "output.weight is present although shared_classifier is 1");
        m->classifier = m->tok_embedding;
    } else {
        status = loader_bind(b, "output.weight", h->vocab_size, h->dim, &m->classifier);
        if (status != PMPD_OK)
            return status;
    }
    for (l = 0; l < h->n_layers; l++) {
        status = loader_bind_layer(b, l, &m->layers[l]);
        if (status != PMPD_OK)
            return status;
    }
    if (h->features & PMPD_MODEL_ROPE_FREQS)
        return loader_bind_rope_freqs(b);
    return PMPD_OK;
}

/* Reads the directory into the model's tables and checks every region. */
static pmpd_status loader_read_directory(const unsigned char *p, size_t size, uint64_t directory_end, unsigned flags,
                                         pmpd_model *m, pmpd_arena *arena, pmpd_error *err)
{
    uint64_t data_start = (directory_end + PMPD_CONTAINER_ALIGNMENT - 1) / PMPD_CONTAINER_ALIGNMENT *
                          PMPD_CONTAINER_ALIGNMENT;
    uint64_t sections_at = loader_tensor_entry(m->n_tensors);
    loader_region *regions;
    uint32_t i, j, n_regions = m->n_tensors + m->n_sections;
    pmpd_status status = pmpd_arena_alloc_array(arena, n_regions, sizeof *regions, PMPD_ARENA_ALIGNMENT, (void **)&regions);
    if (status != PMPD_OK)
        return pmpd_error_set(err, status, PMPD_NO_OFFSET, "arena too small for the container's region table");
    for (i = 0; i < m->n_tensors; i++) {
        pmpd_tensor *t = &m->tensors[i];
        status = loader_read_tensor(p, i, data_start, size, t, err);
        if (status != PMPD_OK)
            return status;
        regions[i].offset = pmpd_le_u64(p + loader_tensor_entry(i) + PMPD_TE_OFFSET);
        regions[i].size = t->size;
        regions[i].entry_offset = loader_tensor_entry(i) + PMPD_TE_OFFSET;
        t->data = p + regions[i].offset;
    }
    for (i = 0; i < m->n_sections; i++) {
        uint64_t at = sections_at + (uint64_t)i * PMPD_SECTION_ENTRY_SIZE;
        pmpd_section *s = &m->sections[i];
        loader_region *r = &regions[m->n_tensors + i];
        status = loader_read_section(p, at, data_start, size, s, err);
        if (status != PMPD_OK)
            return status;
        for (j = 0; j < i; j++)
            if (m->sections[j].kind == s->kind)
                return pmpd_error_set(err, PMPD_ERR_FORMAT_DUPLICATE, at + PMPD_SE_KIND, "section kind %u appears twice",
                                      (unsigned)s->kind);
        r->offset = pmpd_le_u64(p + at + PMPD_SE_OFFSET);
        r->size = s->size;
        r->entry_offset = at + PMPD_SE_OFFSET;
        s->data = p + r->offset;
    }
    status = loader_check_overlaps(regions, n_regions, arena, err);
    if (status != PMPD_OK || (flags & PMPD_LOAD_SKIP_CHECKSUMS))
        return status;
    for (i = 0; i < n_regions; i++) {
        int is_tensor = i < m->n_tensors;
        uint64_t crc_at = is_tensor ? loader_tensor_entry(i) + PMPD_TE_CRC
                                    : sections_at + (uint64_t)(i - m->n_tensors) * PMPD_SECTION_ENTRY_SIZE + PMPD_SE_CRC;
        uint32_t crc = pmpd_crc32_update(0, p + regions[i].offset, (size_t)regions[i].size);
        if (crc != pmpd_le_u32(p + crc_at))
            return pmpd_error_set(err, PMPD_ERR_FORMAT_CHECKSUM, regions[i].offset,
                                  "%s %u data CRC-32 is 0x%08x, the directory says 0x%08x",
                                  is_tensor ? "tensor" : "section", (unsigned)(is_tensor ? i : i - m->n_tensors),
                                  (unsigned)crc, (unsigned)pmpd_le_u32(p + crc_at));
    }
    return PMPD_OK;
}

/* Each slot of a layer's weights before the optional biases is one
 * required tensor. */
#define LOADER_TENSORS_PER_LAYER (offsetof(pmpd_layer_weights, bq) / sizeof(const pmpd_tensor *))

/* The layer table is sized from n_layers, so n_layers is held against the
 * directory before that table is allocated: a header claiming 2^24 layers
 * over a 47-tensor file must not reserve a gigabyte first. */
static pmpd_status loader_check_layer_count(const pmpd_model *m, pmpd_error *err)
{
    uint64_t needed = (uint64_t)m->info.n_layers * LOADER_TENSORS_PER_LAYER + 2;
    if (needed > m->n_tensors)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_HPARAMS, PMPD_HDR_N_LAYERS,
                              "n_layers %u needs at least %llu tensors (%u per layer, the embedding and the final "
                              "norm) but the directory has %u",
                              (unsigned)m->info.n_layers, (unsigned long long)needed,
                              (unsigned)LOADER_TENSORS_PER_LAYER, (unsigned)m->n_tensors);
    return PMPD_OK;
}

static pmpd_status loader_open(const unsigned char *p, size_t size, pmpd_arena *arena, unsigned flags,
                               pmpd_model **out, pmpd_error *err)
{
    uint64_t directory_end = 0;
    pmpd_model *m;
    uint32_t *order = NULL;
    pmpd_arena_mark scratch;
    loader_binder binder;
    const pmpd_section *tok;
    pmpd_status status = loader_check_header(p, size, &directory_end, err);
    if (status != PMPD_OK)
        return status;
    if (!(flags & PMPD_LOAD_SKIP_CHECKSUMS)) {
        uint32_t crc = pmpd_crc32_update(0, p, PMPD_HDR_CRC);
        crc = pmpd_crc32_update(crc, p + PMPD_HEADER_SIZE, (size_t)directory_end - PMPD_HEADER_SIZE);
        if (crc != pmpd_le_u32(p + PMPD_HDR_CRC))
            return pmpd_error_set(err, PMPD_ERR_FORMAT_CHECKSUM, PMPD_HDR_CRC,
                                  "header and directory CRC-32 is 0x%08x, the header says 0x%08x", (unsigned)crc,
                                  (unsigned)pmpd_le_u32(p + PMPD_HDR_CRC));
    }
    status = pmpd_arena_alloc(arena, sizeof *m, PMPD_ARENA_ALIGNMENT, (void **)&m);
    if (status != PMPD_OK)
        return pmpd_error_set(err, status, PMPD_NO_OFFSET, "arena too small for the model");
    memset(m, 0, sizeof *m);
    status = loader_read_hparams(p, &m->info, err);
    if (status != PMPD_OK)
        return status;
    m->bytes = p;
    m->byte_count = size;
    m->n_tensors = pmpd_le_u32(p + PMPD_HDR_N_TENSORS);
    m->n_sections = pmpd_le_u32(p + PMPD_HDR_N_SECTIONS);
    status = loader_check_layer_count(m, err);
    if (status != PMPD_OK)
        return status;
    if ((status = pmpd_arena_alloc_array(arena, m->n_tensors, sizeof *m->tensors, PMPD_ARENA_ALIGNMENT, (void **)&m->tensors)) != PMPD_OK ||
        (status = pmpd_arena_alloc_array(arena, m->n_sections, sizeof *m->sections, PMPD_ARENA_ALIGNMENT, (void **)&m->sections)) !=
            PMPD_OK ||
        (status = pmpd_arena_alloc_array(arena, m->info.n_layers, sizeof *m->layers, PMPD_ARENA_ALIGNMENT, (void **)&m->layers)) !=
            PMPD_OK)
        return pmpd_error_set(err, status, PMPD_NO_OFFSET, "arena too small for the model's tables");
    /* Optional slots (biases) stay NULL unless bound. */
    memset(m->layers, 0, (size_t)m->info.n_layers * sizeof *m->layers);
    scratch = pmpd_arena_save(arena);
    status = loader_read_directory(p, size, directory_end, flags, m, arena, err);
    if (status == PMPD_OK) {
        status = pmpd_arena_alloc_array(arena, m->n_tensors, sizeof *order, PMPD_ARENA_ALIGNMENT, (void **)&order);
        if (status != PMPD_OK)
            pmpd_error_set(err, status, PMPD_NO_OFFSET, "arena too small for the tensor name index");
    }
    if (status == PMPD_OK)
        status = loader_check_names(m->tensors, m->n_tensors, order, err);
    if (status == PMPD_OK) {
        binder.model = m;
        binder.order = order;
        binder.bytes = p;
        binder.err = err;
        status = loader_bind_model(&binder);
    }
    pmpd_arena_restore(arena, scratch);
    if (status != PMPD_OK)
        return status;
    tok = pmpd_model_find_section(m, PMPD_SECTION_TOKENIZER);
    /* A required section of another version was refused with the directory;
     * an optional one is skipped like an unknown kind. */
    if (tok && (tok->version == PMPD_TOKENIZER_VERSION || tok->version == PMPD_TOKENIZER_VERSION_BPE)) {
        uint64_t at = (uint64_t)((const unsigned char *)tok->data - p);
        if (tok->version == PMPD_TOKENIZER_VERSION)
            status = pmpd_tokenizer_parse(&m->tokenizer, (const unsigned char *)tok->data, tok->size, at,
                                          m->info.vocab_size, m->info.bos_id, m->info.eos_id, err);
        else
            status = pmpd_tokenizer_parse_bpe(&m->tokenizer, (const unsigned char *)tok->data, tok->size, at,
                                              m->info.vocab_size, m->info.bos_id, m->info.eos_id, err);
        if (status != PMPD_OK)
            return status;
    }
    /* Optional: a version this build does not read is skipped. */
    tok = pmpd_model_find_section(m, PMPD_SECTION_CHAT_TEMPLATE);
    if (tok && tok->version == PMPD_CHAT_TEMPLATE_VERSION) {
        status = pmpd_chat_template_parse((const unsigned char *)tok->data, tok->size,
                                          (uint64_t)((const unsigned char *)tok->data - p), &m->chat_template,
                                          &m->chat_template_length, err);
        if (status != PMPD_OK)
            return status;
    }
    *out = m;
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_container_open(const void *data, size_t size, pmpd_arena *arena, unsigned flags,
                                              pmpd_model **out, pmpd_error *err)
{
    pmpd_arena_mark mark;
    pmpd_status status;
    pmpd_error_clear(err);
    if (out)
        *out = NULL;
    if (!data || !arena || !out)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET, "data, arena and out must not be NULL");
    /* An empty input has nothing to align (the POSIX port maps an empty file
     * to a static empty string); the header check names it. */
    if (size > 0 && (uintptr_t)data % PMPD_CONTAINER_ALIGNMENT != 0)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                              "container memory must be 64-byte aligned for zero-copy tensors");
    if (!pmpd_host_is_little_endian())
        return pmpd_error_set(err, PMPD_ERR_UNSUPPORTED, PMPD_NO_OFFSET,
                              "tensors are used in place, which needs a little-endian host");
    mark = pmpd_arena_save(arena);
    status = loader_open((const unsigned char *)data, size, arena, flags, out, err);
    if (status != PMPD_OK)
        pmpd_arena_restore(arena, mark);
    return status;
}

pmpd_status pmpd_model_open_memory(const void *data, size_t size, pmpd_arena *arena, pmpd_model **out,
                                   pmpd_error *err)
{
    return pmpd_container_open(data, size, arena, 0, out, err);
}

pmpd_status pmpd_model_open_file(const char *path, pmpd_arena *arena, pmpd_model **out, pmpd_error *err)
{
    pmpd_mapped_file file;
    pmpd_arena_mark mark;
    pmpd_status status;
    pmpd_error_clear(err);
    if (out)
        *out = NULL;
    if (!path || !arena || !out)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET, "path, arena and out must not be NULL");
    mark = pmpd_arena_save(arena);
    status = pmpd_platform_map_file(path, &file);
    if (status == PMPD_ERR_UNSUPPORTED) {
        uint64_t size64 = 0;
        size_t size;
        void *buffer;
        status = pmpd_platform_file_size(path, &size64);
        if (status != PMPD_OK)
            return pmpd_error_set(err, status, PMPD_NO_OFFSET, "cannot read the size of %s", path);
        if (!pmpd_checked_u64_to_size(size64, &size))
            return pmpd_error_set(err, PMPD_ERR_OVERFLOW, PMPD_NO_OFFSET, "%s is larger than the address space", path);
        status = pmpd_arena_alloc(arena, size ? size : 1, PMPD_ARENA_ALIGNMENT, &buffer);
        if (status != PMPD_OK)
            return pmpd_error_set(err, status, PMPD_NO_OFFSET, "arena too small to read %s (%zu bytes)", path, size);
        status = pmpd_platform_read_file(path, buffer, size);
        if (status != PMPD_OK) {
            pmpd_arena_restore(arena, mark);
            return pmpd_error_set(err, status, PMPD_NO_OFFSET, "cannot read %s", path);
        }
        file.data = (const unsigned char *)buffer;
        file.size = size;
        file.is_mapped = 0;
    } else if (status != PMPD_OK) {
        return pmpd_error_set(err, status, PMPD_NO_OFFSET, "cannot open %s", path);
    }
    status = pmpd_container_open(file.data, file.size, arena, 0, out, err);
    if (status != PMPD_OK) {
        pmpd_platform_unmap_file(&file);
        pmpd_arena_restore(arena, mark);
        return status;
    }
    (*out)->mapping = file;
    return PMPD_OK;
}

void pmpd_model_close(pmpd_model *model)
{
    if (model)
        pmpd_platform_unmap_file(&model->mapping);
}

const pmpd_model_info *pmpd_model_get_info(const pmpd_model *model)
{
    return model ? &model->info : NULL;
}

PMPD_INTERNAL const pmpd_tensor *pmpd_model_find_tensor(const pmpd_model *model, const char *name)
{
    size_t length = strlen(name);
    uint32_t i;
    for (i = 0; i < model->n_tensors; i++)
        if (loader_name_compare(&model->tensors[i], name, length) == 0)
            return &model->tensors[i];
    return NULL;
}

PMPD_INTERNAL const pmpd_section *pmpd_model_find_section(const pmpd_model *model, uint32_t kind)
{
    uint32_t i;
    for (i = 0; i < model->n_sections; i++)
        if (model->sections[i].kind == kind)
            return &model->sections[i];
    return NULL;
}

#undef LOADER_TENSORS_PER_LAYER
