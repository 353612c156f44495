/* Malformed .pmpd containers: every field of the header, the directory, the
 * hyperparameters, the required tensors and the tokenizer section, each
 * refused with its own status and the offset of the offending field, with
 * the arena left as it was. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pmpd_impl/format/container.h"
#include "pmpd_impl/format/crc32.h"
#include "pmpd_impl/model/model.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

#define ANY_OFFSET (PMPD_NO_OFFSET - 1)

static unsigned char arena_memory[128 * 1024];

typedef struct fixture {
    test_container good;   /* stories260K + tok512, never modified */
    void *block;           /* work copy */
    unsigned char *p;
    size_t size;
    uint32_t n_tensors, n_sections;
} fixture;

static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint64_t rd64(const unsigned char *p)
{
    return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32);
}

static void wr32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

static void wr64(unsigned char *p, uint64_t v)
{
    wr32(p, (uint32_t)v);
    wr32(p + 4, (uint32_t)(v >> 32));
}

static void wrf(unsigned char *p, float f)
{
    uint32_t bits;
    memcpy(&bits, &f, 4);
    wr32(p, bits);
}

static int setup(void **state)
{
    fixture *f = (fixture *)calloc(1, sizeof *f);
    if (!f || test_stories_container(&f->good) != PMPD_OK)
        return -1;
    f->block = malloc(f->good.size + 64);
    f->p = (unsigned char *)f->block + (64 - (uintptr_t)f->block % 64) % 64;
    f->size = f->good.size;
    f->n_tensors = rd32(f->good.data + PMPD_HDR_N_TENSORS);
    f->n_sections = rd32(f->good.data + PMPD_HDR_N_SECTIONS);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = (fixture *)*state;
    test_container_free(&f->good);
    free(f->block);
    free(f);
    return 0;
}

static void reset(fixture *f)
{
    memcpy(f->p, f->good.data, f->good.size);
    f->size = f->good.size;
}

static size_t directory_end(const fixture *f)
{
    return PMPD_HEADER_SIZE + (size_t)f->n_tensors * PMPD_TENSOR_ENTRY_SIZE +
           (size_t)f->n_sections * PMPD_SECTION_ENTRY_SIZE;
}

static void fix_header_crc(fixture *f)
{
    uint32_t crc = pmpd_crc32_update(0, f->p, PMPD_HDR_CRC);
    crc = pmpd_crc32_update(crc, f->p + PMPD_HEADER_SIZE, directory_end(f) - PMPD_HEADER_SIZE);
    wr32(f->p + PMPD_HDR_CRC, crc);
}

static size_t tensor_entry(const fixture *f, const char *name)
{
    uint32_t i;
    for (i = 0; i < f->n_tensors; i++) {
        const unsigned char *e = f->p + PMPD_HEADER_SIZE + (size_t)i * PMPD_TENSOR_ENTRY_SIZE;
        if (rd32(e + PMPD_TE_NAME_LENGTH) == strlen(name) && memcmp(e, name, strlen(name)) == 0)
            return (size_t)(e - f->p);
    }
    fail_msg("no tensor %s", name);
    return 0;
}

static size_t section_entry(const fixture *f, uint32_t index)
{
    return PMPD_HEADER_SIZE + (size_t)f->n_tensors * PMPD_TENSOR_ENTRY_SIZE + (size_t)index * PMPD_SECTION_ENTRY_SIZE;
}

/* Recomputes the data CRC of a tensor or section entry, then the header's. */
static void fix_entry_crc(fixture *f, size_t entry, int is_tensor)
{
    uint64_t offset = rd64(f->p + entry + (is_tensor ? PMPD_TE_OFFSET : PMPD_SE_OFFSET));
    uint64_t size = rd64(f->p + entry + (is_tensor ? PMPD_TE_SIZE : PMPD_SE_SIZE));
    wr32(f->p + entry + (is_tensor ? PMPD_TE_CRC : PMPD_SE_CRC), pmpd_crc32_update(0, f->p + offset, (size_t)size));
    fix_header_crc(f);
}

/* Opens the work copy and checks the refusal: status, offset (ANY_OFFSET to
 * skip), a word of the message, and an untouched arena. */
static void expect_refusal(fixture *f, pmpd_status status, uint64_t offset, const char *word)
{
    pmpd_arena arena;
    pmpd_model *model = (pmpd_model *)&arena;
    pmpd_error err;
    pmpd_arena_init(&arena, arena_memory, sizeof arena_memory);
    assert_int_equal(pmpd_model_open_memory(f->p, f->size, &arena, &model, &err), status);
    assert_int_equal(err.code, status);
    if (offset != ANY_OFFSET)
        assert_int_equal(err.offset, offset);
    if (word && !strstr(err.message, word))
        fail_msg("message \"%s\" lacks \"%s\"", err.message, word);
    assert_null(model);
    assert_int_equal(arena.used, 0);
}

static void expect_success(fixture *f)
{
    pmpd_arena arena;
    pmpd_model *model;
    pmpd_error err;
    pmpd_arena_init(&arena, arena_memory, sizeof arena_memory);
    if (pmpd_model_open_memory(f->p, f->size, &arena, &model, &err) != PMPD_OK)
        fail_msg("open failed: %s (offset %llu)", err.message, (unsigned long long)err.offset);
}

static void test_good_container_opens(void **state)
{
    fixture *f = (fixture *)*state;
    reset(f);
    expect_success(f);
}

static void test_empty_and_every_truncation(void **state)
{
    fixture *f = (fixture *)*state;
    size_t end = directory_end(f), length;
    reset(f);
    f->size = 0;
    expect_refusal(f, PMPD_ERR_FORMAT_TRUNCATED, 0, "empty");
    for (length = 1; length <= end; length++) {
        f->size = length;
        expect_refusal(f, PMPD_ERR_FORMAT_TRUNCATED, length < PMPD_HEADER_SIZE ? length : PMPD_HDR_FILE_SIZE, NULL);
    }
    /* Inside the tensor data and at the last byte. */
    for (length = end; length < f->good.size; length += 4099) {
        f->size = length;
        expect_refusal(f, PMPD_ERR_FORMAT_TRUNCATED, PMPD_HDR_FILE_SIZE, "file_size");
    }
    f->size = f->good.size - 1;
    expect_refusal(f, PMPD_ERR_FORMAT_TRUNCATED, PMPD_HDR_FILE_SIZE, "file_size");
}

static void test_magic_version_and_header_fields(void **state)
{
    fixture *f = (fixture *)*state;
    static const uint32_t versions[] = {0, 2, 0xFFFFFFFFu};
    size_t i;
    reset(f);
    f->p[3] = 'X';
    expect_refusal(f, PMPD_ERR_FORMAT_MAGIC, 0, "magic");
    f->size = 2;
    f->p[1] = 'Q';
    expect_refusal(f, PMPD_ERR_FORMAT_MAGIC, 0, "magic");
    for (i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        reset(f);
        wr32(f->p + PMPD_HDR_VERSION, versions[i]);
        expect_refusal(f, PMPD_ERR_FORMAT_VERSION, PMPD_HDR_VERSION, "version");
    }
    reset(f);
    wr32(f->p + PMPD_HDR_HEADER_SIZE, 64);
    expect_refusal(f, PMPD_ERR_FORMAT_VALUE, PMPD_HDR_HEADER_SIZE, "header_size");
    reset(f);
    wr32(f->p + PMPD_HDR_FLAGS, 4);
    expect_refusal(f, PMPD_ERR_FORMAT_VALUE, PMPD_HDR_FLAGS, "flags");
    reset(f);
    wr64(f->p + PMPD_HDR_FILE_SIZE, f->size - 64);
    expect_refusal(f, PMPD_ERR_FORMAT_BOUNDS, PMPD_HDR_FILE_SIZE, "file_size");
    reset(f);
    f->p[PMPD_HDR_RESERVED + 7] = 1;
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_VALUE, PMPD_HDR_RESERVED + 7, "reserved");
}

static void test_counts_zero_huge_and_past_end(void **state)
{
    fixture *f = (fixture *)*state;
    reset(f);
    wr32(f->p + PMPD_HDR_N_TENSORS, 0);
    expect_refusal(f, PMPD_ERR_FORMAT_VALUE, PMPD_HDR_N_TENSORS, "n_tensors");
    wr32(f->p + PMPD_HDR_N_TENSORS, 0xFFFFFFFFu);
    expect_refusal(f, PMPD_ERR_FORMAT_VALUE, PMPD_HDR_N_TENSORS, "n_tensors");
    wr32(f->p + PMPD_HDR_N_TENSORS, 60000);
    expect_refusal(f, PMPD_ERR_FORMAT_TRUNCATED, PMPD_HDR_N_TENSORS, "directory");
    reset(f);
    wr32(f->p + PMPD_HDR_N_SECTIONS, 0x10000000u);
    expect_refusal(f, PMPD_ERR_FORMAT_VALUE, PMPD_HDR_N_SECTIONS, "n_sections");
    /* A count that still fits makes the directory swallow data: caught by the CRC. */
    reset(f);
    wr32(f->p + PMPD_HDR_N_SECTIONS, 200);
    expect_refusal(f, PMPD_ERR_FORMAT_CHECKSUM, PMPD_HDR_CRC, "CRC");
}

static void test_checksums(void **state)
{
    fixture *f = (fixture *)*state;
    size_t entry;
    uint64_t offset;
    reset(f);
    f->p[PMPD_HEADER_SIZE + 3 * PMPD_TENSOR_ENTRY_SIZE + PMPD_TE_CRC] ^= 0x10;
    expect_refusal(f, PMPD_ERR_FORMAT_CHECKSUM, PMPD_HDR_CRC, "CRC");
    reset(f);
    f->p[40] ^= 1; /* n_layers, without fixing the CRC */
    expect_refusal(f, PMPD_ERR_FORMAT_CHECKSUM, PMPD_HDR_CRC, "CRC");
    reset(f);
    entry = tensor_entry(f, "blk.2.ffn_down.weight");
    offset = rd64(f->p + entry + PMPD_TE_OFFSET);
    f->p[offset + 100] ^= 0x80;
    expect_refusal(f, PMPD_ERR_FORMAT_CHECKSUM, offset, "CRC");
    reset(f);
    offset = rd64(f->p + section_entry(f, 0) + PMPD_SE_OFFSET);
    f->p[offset + 40] ^= 1;
    expect_refusal(f, PMPD_ERR_FORMAT_CHECKSUM, offset, "section");
}

typedef struct hparam_case {
    size_t field;
    uint32_t value;
    const char *word;
} hparam_case;

static void test_broken_hyperparameters(void **state)
{
    static const hparam_case cases[] = {
        {PMPD_HDR_N_HEADS, 0, "n_heads"},          {PMPD_HDR_DIM, 0, "dim"},
        {PMPD_HDR_N_KV_HEADS, 0, "n_kv_heads"},    {PMPD_HDR_N_KV_HEADS, 3, "divide"},
        {PMPD_HDR_N_KV_HEADS, 16, "divide"},       {PMPD_HDR_HEAD_DIM, 7, "odd"},
        {PMPD_HDR_HEAD_DIM, 1u << 22, "n_heads"},         {PMPD_HDR_VOCAB_SIZE, 0, "vocab_size"},
        {PMPD_HDR_VOCAB_SIZE, 0x80000000u, "vocab_size"}, {PMPD_HDR_SEQ_LEN, 0, "seq_len"},
        {PMPD_HDR_N_LAYERS, 0x01000001u, "n_layers"}, {PMPD_HDR_SHARED_CLASSIFIER, 2, "shared"},
        {PMPD_HDR_BOS_ID, 512, "bos_id"},          {PMPD_HDR_EOS_ID, 0xFFFFFFFFu, "eos_id"},
    };
    fixture *f = (fixture *)*state;
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        reset(f);
        wr32(f->p + cases[i].field, cases[i].value);
        fix_header_crc(f);
        expect_refusal(f, PMPD_ERR_FORMAT_HPARAMS, cases[i].field, cases[i].word);
    }
    reset(f);
    wrf(f->p + PMPD_HDR_ROPE_THETA, NAN);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_HPARAMS, PMPD_HDR_ROPE_THETA, "rope_theta");
    reset(f);
    wrf(f->p + PMPD_HDR_NORM_EPS, 0.0f);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_HPARAMS, PMPD_HDR_NORM_EPS, "norm_eps");
    reset(f);
    wrf(f->p + PMPD_HDR_NORM_EPS, INFINITY);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_HPARAMS, PMPD_HDR_NORM_EPS, "norm_eps");
    /* A KV cache of 2^24 layers x 2^24 positions x 2^24 floats does not fit in size_t. */
    reset(f);
    wr32(f->p + PMPD_HDR_HEAD_DIM, 1u << 21);
    wr32(f->p + PMPD_HDR_DIM, 1u << 24);
    wr32(f->p + PMPD_HDR_N_KV_HEADS, 8);
    wr32(f->p + PMPD_HDR_N_LAYERS, 1u << 24);
    wr32(f->p + PMPD_HDR_SEQ_LEN, 1u << 24);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_HPARAMS, PMPD_HDR_SEQ_LEN, "KV cache");
}

static void test_tensor_entries(void **state)
{
    fixture *f = (fixture *)*state;
    size_t e;
    uint64_t offset;
    reset(f);
    e = tensor_entry(f, "blk.1.attn_v.weight");
    wr32(f->p + e + PMPD_TE_NAME_LENGTH, 0);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_VALUE, e + PMPD_TE_NAME_LENGTH, "name_length");
    wr32(f->p + e + PMPD_TE_NAME_LENGTH, 65);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_VALUE, e + PMPD_TE_NAME_LENGTH, "name_length");
    reset(f);
    f->p[e + 3] = ' ';
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_VALUE, e + 3, "printable");
    reset(f);
    f->p[e + 40] = 'x';
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_VALUE, e + 40, "padding");
    reset(f);
    wr32(f->p + e + PMPD_TE_TYPE, 99);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_VALUE, e + PMPD_TE_TYPE, "unknown type");
    reset(f);
    wr32(f->p + e + PMPD_TE_N_DIMS, 0);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_SHAPE, e + PMPD_TE_N_DIMS, "n_dims");
    wr32(f->p + e + PMPD_TE_N_DIMS, 5);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_SHAPE, e + PMPD_TE_N_DIMS, "n_dims");
    reset(f);
    wr64(f->p + e + PMPD_TE_DIMS + 8, 0);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_SHAPE, e + PMPD_TE_DIMS + 8, "dimension");
    reset(f);
    wr64(f->p + e + PMPD_TE_DIMS + 16, 1);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_SHAPE, e + PMPD_TE_DIMS + 16, "dimension");
    reset(f);
    wr64(f->p + e + PMPD_TE_DIMS, (uint64_t)1 << 62);
    wr64(f->p + e + PMPD_TE_DIMS + 8, (uint64_t)1 << 62);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_SHAPE, e + PMPD_TE_DIMS, "overflows");
    reset(f);
    wr64(f->p + e + PMPD_TE_SIZE, rd64(f->p + e + PMPD_TE_SIZE) + 4);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_SHAPE, e + PMPD_TE_SIZE, "size");
    reset(f);
    f->p[e + PMPD_TE_RESERVED + 2] = 9;
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_VALUE, e + PMPD_TE_RESERVED + 2, "reserved");
    /* Offsets: misaligned, past the end, wrapping, inside the directory, overlapping. */
    reset(f);
    offset = rd64(f->p + e + PMPD_TE_OFFSET);
    wr64(f->p + e + PMPD_TE_OFFSET, offset + 4);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_ALIGNMENT, e + PMPD_TE_OFFSET, "multiple of 64");
    wr64(f->p + e + PMPD_TE_OFFSET, (uint64_t)f->size);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_BOUNDS, e + PMPD_TE_OFFSET, "past");
    wr64(f->p + e + PMPD_TE_OFFSET, UINT64_MAX - 63);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_BOUNDS, e + PMPD_TE_OFFSET, "wraps");
    wr64(f->p + e + PMPD_TE_OFFSET, 128);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_OVERLAP, e + PMPD_TE_OFFSET, "directory");
    reset(f);
    e = tensor_entry(f, "blk.3.ffn_norm.weight");
    wr64(f->p + e + PMPD_TE_OFFSET, rd64(f->p + tensor_entry(f, "blk.3.ffn_up.weight") + PMPD_TE_OFFSET) + 640);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_OVERLAP, ANY_OFFSET, "overlaps");
}

/* Renames a tensor in place (same length or shorter). */
static void rename_tensor(fixture *f, const char *from, const char *to)
{
    size_t e = tensor_entry(f, from);
    memset(f->p + e, 0, PMPD_TENSOR_NAME_MAX);
    memcpy(f->p + e, to, strlen(to));
    wr32(f->p + e + PMPD_TE_NAME_LENGTH, (uint32_t)strlen(to));
    fix_header_crc(f);
}

static void test_names_shapes_and_missing_tensors(void **state)
{
    fixture *f = (fixture *)*state;
    size_t e;
    reset(f);
    rename_tensor(f, "blk.4.attn_k.weight", "blk.4.attn_v.weight");
    expect_refusal(f, PMPD_ERR_FORMAT_DUPLICATE, ANY_OFFSET, "twice");
    reset(f);
    rename_tensor(f, "blk.4.ffn_up.weight", "blk.4.ffn_upx.weight");
    expect_refusal(f, PMPD_ERR_FORMAT_MISSING, PMPD_HDR_N_TENSORS, "blk.4.ffn_up.weight");
    reset(f);
    rename_tensor(f, "output_norm.weight", "extra_norm.weight");
    expect_refusal(f, PMPD_ERR_FORMAT_MISSING, PMPD_HDR_N_TENSORS, "output_norm.weight");
    /* A separate classifier is required when the header says so. */
    reset(f);
    wr32(f->p + PMPD_HDR_SHARED_CLASSIFIER, 0);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_MISSING, PMPD_HDR_N_TENSORS, "output.weight");
    reset(f);
    rename_tensor(f, "blk.0.attn_q.weight", "output.weight");
    expect_refusal(f, PMPD_ERR_FORMAT_DUPLICATE, ANY_OFFSET, "shared");
    /* Same byte count, transposed: the shape disagrees with the hyperparameters. */
    reset(f);
    e = tensor_entry(f, "blk.2.attn_k.weight");
    wr64(f->p + e + PMPD_TE_DIMS, 64);
    wr64(f->p + e + PMPD_TE_DIMS + 8, 32);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_SHAPE, e + PMPD_TE_DIMS, "blk.2.attn_k.weight");
    /* A norm stored as a 1x64 matrix. */
    reset(f);
    e = tensor_entry(f, "blk.1.attn_norm.weight");
    wr32(f->p + e + PMPD_TE_N_DIMS, 2);
    wr64(f->p + e + PMPD_TE_DIMS, 1);
    wr64(f->p + e + PMPD_TE_DIMS + 8, 64);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_SHAPE, e + PMPD_TE_DIMS, "vector");
}

/* n_layers sizes the layer table, so it is held against the tensor count
 * (9 per layer + embedding + final norm; stories260K has exactly 47) before
 * anything per-layer is allocated: only the model record may have been
 * taken from the arena when the refusal comes. */
static void test_more_layers_than_tensors(void **state)
{
    fixture *f = (fixture *)*state;
    pmpd_arena arena;
    pmpd_model *model;
    pmpd_error err;
    reset(f);
    wr32(f->p + PMPD_HDR_N_LAYERS, 6);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_HPARAMS, PMPD_HDR_N_LAYERS, "56 tensors");
    /* The most layers the header allows, with a KV cache that fits even a
     * 32-bit size_t (1 position, one 8-wide KV head), so that only the
     * tensor count can refuse it: a 1.2 GB layer table otherwise. */
    reset(f);
    wr32(f->p + PMPD_HDR_N_LAYERS, PMPD_MAX_HPARAM);
    wr32(f->p + PMPD_HDR_SEQ_LEN, 1);
    wr32(f->p + PMPD_HDR_N_KV_HEADS, 1);
    fix_header_crc(f);
    pmpd_arena_init(&arena, arena_memory, sizeof arena_memory);
    assert_int_equal(pmpd_model_open_memory(f->p, f->size, &arena, &model, &err), PMPD_ERR_FORMAT_HPARAMS);
    assert_int_equal(err.offset, PMPD_HDR_N_LAYERS);
    assert_non_null(strstr(err.message, "n_layers 16777216"));
    assert_int_equal(arena.used, 0);
    assert_true(arena.high_water <= sizeof(pmpd_model) + PMPD_ARENA_ALIGNMENT);
    /* Fewer layers than the file holds is fine: the rest are extra tensors. */
    reset(f);
    wr32(f->p + PMPD_HDR_N_LAYERS, 4);
    fix_header_crc(f);
    expect_success(f);
}

static void test_nonfinite_norms(void **state)
{
    static const float bad[] = {NAN, INFINITY, -INFINITY};
    static const char *const names[] = {"blk.0.attn_norm.weight", "blk.3.ffn_norm.weight", "output_norm.weight"};
    fixture *f = (fixture *)*state;
    size_t i;
    for (i = 0; i < 3; i++) {
        size_t e;
        uint64_t offset;
        reset(f);
        e = tensor_entry(f, names[i]);
        offset = rd64(f->p + e + PMPD_TE_OFFSET);
        wrf(f->p + offset + 4 * (10 + i), bad[i]);
        fix_entry_crc(f, e, 1);
        expect_refusal(f, PMPD_ERR_FORMAT_NONFINITE, offset + 4 * (10 + i), names[i]);
    }
}

static void test_sections(void **state)
{
    fixture *f = (fixture *)*state;
    size_t s = section_entry(f, 0);
    reset(f);
    wr32(f->p + s + PMPD_SE_FLAGS, 6);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_VALUE, s + PMPD_SE_FLAGS, "flags");
    reset(f);
    wr32(f->p + s + PMPD_SE_KIND, 1000);
    wr32(f->p + s + PMPD_SE_FLAGS, PMPD_SECTION_FLAG_REQUIRED);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_REQUIRED_SECTION, s + PMPD_SE_KIND, "required");
    reset(f);
    wr32(f->p + s + PMPD_SE_KIND, 0);
    wr32(f->p + s + PMPD_SE_FLAGS, PMPD_SECTION_FLAG_REQUIRED);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_REQUIRED_SECTION, s + PMPD_SE_KIND, "required");
    /* A kind with a number but no reader in this build is as unknown. */
    reset(f);
    wr32(f->p + s + PMPD_SE_KIND, PMPD_SECTION_OUTLIER_CALIBRATION);
    wr32(f->p + s + PMPD_SE_FLAGS, PMPD_SECTION_FLAG_REQUIRED);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_REQUIRED_SECTION, s + PMPD_SE_KIND, "required");
    reset(f);
    wr64(f->p + s + PMPD_SE_OFFSET, rd64(f->p + s + PMPD_SE_OFFSET) + 8);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_ALIGNMENT, s + PMPD_SE_OFFSET, "multiple of 64");
    reset(f);
    wr64(f->p + s + PMPD_SE_SIZE, (uint64_t)f->size);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_BOUNDS, s + PMPD_SE_OFFSET, "past");
    /* Version 1 data labelled version 2 (byte-level BPE) is read as version 2 and refused. */
    reset(f);
    wr32(f->p + s + PMPD_SE_VERSION, PMPD_TOKENIZER_VERSION_BPE);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_VALUE, ANY_OFFSET, "tokenizer");
    /* A tokenizer of a version this build cannot read: skipped when optional, refused when required. */
    reset(f);
    wr32(f->p + s + PMPD_SE_VERSION, 3);
    fix_header_crc(f);
    expect_success(f);
    wr32(f->p + s + PMPD_SE_FLAGS, PMPD_SECTION_FLAG_REQUIRED);
    fix_header_crc(f);
    expect_refusal(f, PMPD_ERR_FORMAT_VERSION, s + PMPD_SE_VERSION, "tokenizer");
}

static void test_duplicate_section_kind(void **state)
{
    static const unsigned char blob[4] = {1, 2, 3, 4};
    pmpd_build_model b;
    test_container c;
    pmpd_arena arena;
    pmpd_model *model;
    pmpd_error err;
    (void)state;
    assert_int_equal(test_import_shared("models/stories260K.bin", NULL, &b), PMPD_OK);
    assert_int_equal(pmpd_build_add_section(&b, PMPD_SECTION_KV_CODEBOOKS, 1, 0, blob, 4), PMPD_OK);
    assert_int_equal(pmpd_build_add_section(&b, PMPD_SECTION_KV_CODEBOOKS, 1, 0, blob, 4), PMPD_OK);
    assert_int_equal(test_serialize(&b, &c), PMPD_OK);
    pmpd_arena_init(&arena, arena_memory, sizeof arena_memory);
    assert_int_equal(pmpd_model_open_memory(c.data, c.size, &arena, &model, &err), PMPD_ERR_FORMAT_DUPLICATE);
    assert_int_equal(err.offset, PMPD_HEADER_SIZE + 47 * PMPD_TENSOR_ENTRY_SIZE + PMPD_SECTION_ENTRY_SIZE);
    assert_int_equal(arena.used, 0);
    test_container_free(&c);
    pmpd_build_free(&b);
}

/* Edits the tokenizer section at byte at (section-relative). */
static void patch_tokenizer(fixture *f, size_t at, uint32_t value)
{
    size_t s = section_entry(f, 0);
    wr32(f->p + rd64(f->p + s + PMPD_SE_OFFSET) + at, value);
    fix_entry_crc(f, s, 0);
}

static void test_tokenizer_section(void **state)
{
    fixture *f = (fixture *)*state;
    const size_t n = 512, scores = 16, offsets = scores + 4 * n, sorted = offsets + 4 * (n + 1);
    uint64_t base;
    reset(f);
    base = rd64(f->p + section_entry(f, 0) + PMPD_SE_OFFSET);
    patch_tokenizer(f, PMPD_TOK_N_TOKENS, 511);
    expect_refusal(f, PMPD_ERR_FORMAT_VALUE, base + PMPD_TOK_N_TOKENS, "vocab_size");
    reset(f);
    patch_tokenizer(f, PMPD_TOK_N_TOKENS, 0xFFFFFFFFu);
    expect_refusal(f, PMPD_ERR_FORMAT_VALUE, base + PMPD_TOK_N_TOKENS, "vocab_size");
    reset(f);
    patch_tokenizer(f, PMPD_TOK_MAX_TOKEN_LENGTH, 0);
    expect_refusal(f, PMPD_ERR_FORMAT_VALUE, base + PMPD_TOK_MAX_TOKEN_LENGTH, "max_token_length");
    reset(f);
    patch_tokenizer(f, PMPD_TOK_MAX_TOKEN_LENGTH, 3); /* shorter than real pieces */
    expect_refusal(f, PMPD_ERR_FORMAT_BOUNDS, ANY_OFFSET, "max_token_length");
    reset(f);
    patch_tokenizer(f, PMPD_TOK_FLAGS, 0x100);
    expect_refusal(f, PMPD_ERR_FORMAT_VALUE, base + PMPD_TOK_FLAGS, "flags");
    reset(f);
    patch_tokenizer(f, PMPD_TOK_BLOB_SIZE, 0x7FFFFFFF);
    expect_refusal(f, PMPD_ERR_FORMAT_TRUNCATED, base + PMPD_TOK_BLOB_SIZE, "imply");
    reset(f);
    patch_tokenizer(f, scores + 4 * 300, 0x7FC00000u);
    expect_refusal(f, PMPD_ERR_FORMAT_NONFINITE, base + scores + 4 * 300, "score");
    reset(f);
    patch_tokenizer(f, offsets + 4 * 301, 0xFFFFFFF0u); /* piece 300 runs past the blob */
    expect_refusal(f, PMPD_ERR_FORMAT_BOUNDS, base + offsets + 4 * 300, "piece 300");
    reset(f);
    patch_tokenizer(f, offsets, 1);
    expect_refusal(f, PMPD_ERR_FORMAT_BOUNDS, base + offsets, "piece 0");
    reset(f);
    patch_tokenizer(f, sorted + 4 * 7, 512);
    expect_refusal(f, PMPD_ERR_FORMAT_VALUE, base + sorted + 4 * 7, "outside the vocabulary");
    reset(f);
    {
        /* Swapping two sorted entries breaks the order. */
        unsigned char *q = f->p + base + sorted + 4 * 100;
        uint32_t a = rd32(q), b = rd32(q + 4);
        wr32(q, b);
        wr32(q + 4, a);
        fix_entry_crc(f, section_entry(f, 0), 0);
        expect_refusal(f, PMPD_ERR_FORMAT_VALUE, base + sorted + 4 * 101, "increasing");
    }
}

static void test_arena_usable_after_failures(void **state)
{
    fixture *f = (fixture *)*state;
    pmpd_arena arena;
    pmpd_model *model;
    pmpd_error err;
    pmpd_arena_init(&arena, arena_memory, sizeof arena_memory);
    reset(f);
    f->p[500] ^= 1;
    assert_int_equal(pmpd_model_open_memory(f->p, f->size, &arena, &model, &err), PMPD_ERR_FORMAT_CHECKSUM);
    assert_int_equal(arena.used, 0);
    reset(f);
    assert_int_equal(pmpd_model_open_memory(f->p, f->size, &arena, &model, &err), PMPD_OK);
    assert_int_equal(pmpd_model_open_file("/nonexistent/model.pmpd", &arena, &model, &err), PMPD_ERR_NOT_FOUND);
    assert_int_equal(pmpd_model_open_file("/", &arena, &model, &err), PMPD_ERR_IO);
    {
        /* An empty file maps to an empty view, refused as empty. */
        char path[64];
        FILE *file;
        snprintf(path, sizeof path, "/tmp/pmpd-test-bad-input-%ld-empty.pmpd", (long)getpid());
        file = fopen(path, "wb");
        assert_non_null(file);
        fclose(file);
        assert_int_equal(pmpd_model_open_file(path, &arena, &model, &err), PMPD_ERR_FORMAT_TRUNCATED);
        remove(path);
        assert_int_equal(err.offset, 0);
        assert_non_null(strstr(err.message, "empty"));
    }
    assert_int_equal(pmpd_model_open_memory(NULL, 10, &arena, &model, &err), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_model_open_memory(f->p, f->size, NULL, &model, &err), PMPD_ERR_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_container_opens),
        cmocka_unit_test(test_empty_and_every_truncation),
        cmocka_unit_test(test_magic_version_and_header_fields),
        cmocka_unit_test(test_counts_zero_huge_and_past_end),
        cmocka_unit_test(test_checksums),
        cmocka_unit_test(test_broken_hyperparameters),
        cmocka_unit_test(test_tensor_entries),
        cmocka_unit_test(test_names_shapes_and_missing_tensors),
        cmocka_unit_test(test_more_layers_than_tensors),
        cmocka_unit_test(test_nonfinite_norms),
        cmocka_unit_test(test_sections),
        cmocka_unit_test(test_duplicate_section_kind),
        cmocka_unit_test(test_tokenizer_section),
        cmocka_unit_test(test_arena_usable_after_failures),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
