/* pmpd_synth_gguf (pmpd-mkgguf): tiny synthetic models in every type, read
 * back two ways -- by a GGUF walker and block decoders written here from the
 * format definitions, and by pmpd's GGUF importer -- which must agree bit for
 * bit.  The F32 file is the reference the other types must round to by their
 * block rules; the vocabulary must round-trip to tok512.bin's; impossible
 * shapes and missing files fail with a status and a message naming them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd_impl/format/container.h"
#include "pmpd_impl/offline/import/import.h"
#include "tests/support/test_gguf.h"
#include "tests/support/test_support.h"

#define MAX_KEYS 64
#define MAX_TENSORS 64

/* ---- An independent reader of the generated file ---- */

typedef struct kv {
    char key[64];
    uint32_t type;
    const unsigned char *value; /* for arrays: the element type, count, then elements */
} kv;

typedef struct tensor_info {
    char name[64];
    uint32_t n_dims, type;
    uint64_t ne[2], offset;
    const unsigned char *data;
} tensor_info;

typedef struct gguf_file {
    unsigned char *bytes;
    size_t size;
    uint64_t n_kv, n_tensors;
    kv keys[MAX_KEYS];
    tensor_info tensors[MAX_TENSORS];
} gguf_file;

static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const unsigned char *p)
{
    return rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

static float rdf32(const unsigned char *p)
{
    uint32_t bits = rd32(p);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Bytes of one metadata value of a type (GGUF types 4 u32, 5 i32, 6 f32, 7 bool, 8 string, 9 array). */
static size_t value_size(uint32_t type, const unsigned char *p)
{
    size_t i, n, at;
    switch (type) {
    case 4: case 5: case 6: return 4;
    case 7: return 1;
    case 8: return 8 + (size_t)rd64(p);
    case 9:
        n = (size_t)rd64(p + 4);
        for (i = 0, at = 12; i < n; i++)
            at += value_size(rd32(p), p + at);
        return at;
    default: fail_msg("unexpected metadata type %u", (unsigned)type); return 0;
    }
}

static void copy_string(char *out, size_t out_size, const unsigned char *p)
{
    size_t n = (size_t)rd64(p);
    assert_true(n < out_size);
    memcpy(out, p + 8, n);
    out[n] = '\0';
}

static void gguf_open(const char *path, gguf_file *g)
{
    size_t at = 24, data_start;
    uint64_t i, d;
    memset(g, 0, sizeof *g);
    g->bytes = test_read_file(path, &g->size);
    assert_non_null(g->bytes);
    assert_memory_equal(g->bytes, "GGUF", 4);
    assert_int_equal(rd32(g->bytes + 4), 3);
    g->n_tensors = rd64(g->bytes + 8);
    g->n_kv = rd64(g->bytes + 16);
    assert_true(g->n_kv <= MAX_KEYS && g->n_tensors <= MAX_TENSORS);
    for (i = 0; i < g->n_kv; i++) {
        kv *k = &g->keys[i];
        copy_string(k->key, sizeof k->key, g->bytes + at);
        at += 8 + rd64(g->bytes + at);
        k->type = rd32(g->bytes + at);
        k->value = g->bytes + at + 4;
        at += 4 + value_size(k->type, k->value);
    }
    for (i = 0; i < g->n_tensors; i++) {
        tensor_info *t = &g->tensors[i];
        copy_string(t->name, sizeof t->name, g->bytes + at);
        at += 8 + rd64(g->bytes + at);
        t->n_dims = rd32(g->bytes + at);
        assert_true(t->n_dims == 1 || t->n_dims == 2);
        at += 4;
        t->ne[1] = 1;
        for (d = 0; d < t->n_dims; d++, at += 8)
            t->ne[d] = rd64(g->bytes + at);
        t->type = rd32(g->bytes + at);
        t->offset = rd64(g->bytes + at + 4);
        at += 12;
    }
    data_start = (at + 31) / 32 * 32;
    for (i = 0; i < g->n_tensors; i++) {
        assert_int_equal(g->tensors[i].offset % 32, 0);
        g->tensors[i].data = g->bytes + data_start + g->tensors[i].offset;
    }
}

static const kv *gguf_key(const gguf_file *g, const char *key, uint32_t type)
{
    uint64_t i;
    for (i = 0; i < g->n_kv; i++) {
        if (strcmp(g->keys[i].key, key) == 0) {
            assert_int_equal(g->keys[i].type, type);
            return &g->keys[i];
        }
    }
    fail_msg("GGUF key %s is missing", key);
    return NULL;
}

static uint32_t gguf_u32(const gguf_file *g, const char *key)
{
    return rd32(gguf_key(g, key, 4)->value);
}

static const tensor_info *gguf_tensor(const gguf_file *g, const char *name)
{
    uint64_t i;
    for (i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0)
            return &g->tensors[i];
    return NULL;
}

/* Bytes of a tensor of type (0 F32, 1 F16, 2 Q4_0, 8 Q8_0). */
static uint64_t tensor_bytes(const tensor_info *t)
{
    uint64_t n = t->ne[0] * t->ne[1];
    return t->type == 0 ? 4 * n : t->type == 1 ? 2 * n : t->type == 8 ? n / 32 * 34 : n / 32 * 18;
}

/* Element i of a tensor, decoded by the definition of its ggml type. */
static float decode(const tensor_info *t, uint64_t i)
{
    const unsigned char *block;
    unsigned j = (unsigned)(i % 32);
    switch (t->type) {
    case 0: return rdf32(t->data + 4 * i);
    case 1: return test_half_value((uint16_t)(t->data[2 * i] | t->data[2 * i + 1] << 8));
    case 8:
        block = t->data + i / 32 * 34;
        return test_half_value((uint16_t)(block[0] | block[1] << 8)) * (float)(int8_t)block[2 + j];
    case 2:
        /* Byte k of the 16 holds element k in its low nibble, k + 16 in its high one. */
        block = t->data + i / 32 * 18;
        return test_half_value((uint16_t)(block[0] | block[1] << 8)) *
               (float)((j < 16 ? block[2 + j] & 15 : block[2 + j - 16] >> 4) - 8);
    default: fail_msg("unexpected ggml type %u", (unsigned)t->type); return 0;
    }
}

/* ---- Generating ---- */

typedef struct shape {
    uint32_t dim, hidden;
} shape;

/* Rows not a multiple of 32 where the type allows it; blocks of 32 otherwise. */
static const shape odd_shape = {40, 72}, block_shape = {64, 96};

static void tiny_options(pmpd_synth_options *o, shape s, pmpd_ggml_type type)
{
    static char tokenizer[512];
    pmpd_synth_options_default(o);
    o->dim = s.dim;
    o->hidden_dim = s.hidden;
    o->n_layers = 2;
    o->n_heads = 4;
    o->n_kv_heads = 2;
    o->seq_len = 256;
    o->type = type;
    o->tokenizer_path = test_shared_path(tokenizer, sizeof tokenizer, "models/tok512.bin");
}

static void generate(const char *path, shape s, pmpd_ggml_type type, gguf_file *g)
{
    pmpd_synth_options o;
    pmpd_synth_summary summary;
    pmpd_error err;
    tiny_options(&o, s, type);
    assert_int_equal(pmpd_synth_gguf(path, &o, &summary, &err), PMPD_OK);
    assert_int_equal(summary.n_tensors, 2 * 9 + 3);
    assert_int_equal(summary.vocab_size, 512);
    gguf_open(path, g);
    assert_int_equal(summary.bytes, g->size);
}

static void import(const gguf_file *g, pmpd_build_model *b)
{
    pmpd_error err;
    pmpd_build_init(b);
    assert_int_equal(pmpd_import_gguf(g->bytes, g->size, b, &err), PMPD_OK);
}

/* ---- Tests ---- */

/* Shapes and names llama.cpp's "llama" loader asks for. */
static void test_tensor_names_and_shapes(void **state)
{
    static const char *const layer_names[9] = {"attn_norm", "attn_q", "attn_k",  "attn_v",  "attn_output",
                                               "ffn_norm",  "ffn_gate", "ffn_up", "ffn_down"};
    const uint64_t dim = 64, hidden = 96, kv_dim = 32;
    const uint64_t layer_ne[9][2] = {{dim, 1},      {dim, dim},    {dim, kv_dim}, {dim, kv_dim}, {dim, dim},
                                     {dim, 1},      {dim, hidden}, {dim, hidden}, {hidden, dim}};
    gguf_file g;
    const tensor_info *t;
    unsigned l, k;
    (void)state;
    generate("build/test_mkgguf_names.gguf", block_shape, PMPD_GGML_Q8_0, &g);
    assert_int_equal(g.n_tensors, 21);
    t = gguf_tensor(&g, "token_embd.weight");
    assert_non_null(t);
    assert_true(t->n_dims == 2 && t->ne[0] == dim && t->ne[1] == 512 && t->type == 8);
    t = gguf_tensor(&g, "output.weight");
    assert_non_null(t);
    assert_true(t->n_dims == 2 && t->ne[0] == dim && t->ne[1] == 512 && t->type == 8);
    t = gguf_tensor(&g, "output_norm.weight");
    assert_non_null(t);
    assert_true(t->n_dims == 1 && t->ne[0] == dim && t->type == 0);
    for (l = 0; l < 2; l++) {
        for (k = 0; k < 9; k++) {
            char name[64];
            sprintf(name, "blk.%u.%s.weight", l, layer_names[k]);
            t = gguf_tensor(&g, name);
            assert_non_null(t);
            assert_int_equal(t->n_dims, layer_ne[k][1] == 1 ? 1 : 2);
            assert_int_equal(t->ne[0], layer_ne[k][0]);
            assert_int_equal(t->ne[1], layer_ne[k][1]);
            assert_int_equal(t->type, t->n_dims == 1 ? 0 : 8);
        }
    }
    /* Data regions follow one another without overlap and end at the file's end. */
    for (k = 0; k < g.n_tensors; k++)
        assert_true(g.tensors[k].data + tensor_bytes(&g.tensors[k]) <= g.bytes + g.size);
    assert_true(g.tensors[g.n_tensors - 1].data + tensor_bytes(&g.tensors[g.n_tensors - 1]) + 31 >= g.bytes + g.size);
    free(g.bytes);
    remove("build/test_mkgguf_names.gguf");
}

static void test_metadata(void **state)
{
    static const struct {
        pmpd_ggml_type type;
        uint32_t file_type;
    } types[] = {{PMPD_GGML_F32, 0}, {PMPD_GGML_F16, 1}, {PMPD_GGML_Q8_0, 7}, {PMPD_GGML_Q4_0, 2}};
    gguf_file g;
    const kv *k;
    unsigned i;
    (void)state;
    for (i = 0; i < 4; i++) {
        generate("build/test_mkgguf_meta.gguf", block_shape, types[i].type, &g);
        assert_int_equal(gguf_u32(&g, "general.file_type"), types[i].file_type);
        free(g.bytes);
    }
    /* The rest does not depend on the type: check the last file. */
    generate("build/test_mkgguf_meta.gguf", block_shape, PMPD_GGML_Q4_0, &g);
    k = gguf_key(&g, "general.architecture", 8);
    assert_int_equal(rd64(k->value), 5);
    assert_memory_equal(k->value + 8, "llama", 5);
    gguf_key(&g, "general.name", 8);
    assert_int_equal(gguf_u32(&g, "general.alignment"), 32);
    assert_int_equal(gguf_u32(&g, "llama.context_length"), 256);
    assert_int_equal(gguf_u32(&g, "llama.embedding_length"), 64);
    assert_int_equal(gguf_u32(&g, "llama.block_count"), 2);
    assert_int_equal(gguf_u32(&g, "llama.feed_forward_length"), 96);
    assert_int_equal(gguf_u32(&g, "llama.attention.head_count"), 4);
    assert_int_equal(gguf_u32(&g, "llama.attention.head_count_kv"), 2);
    assert_int_equal(gguf_u32(&g, "llama.rope.dimension_count"), 16);
    assert_int_equal(gguf_u32(&g, "llama.vocab_size"), 512);
    assert_true(rdf32(gguf_key(&g, "llama.rope.freq_base", 6)->value) == 10000.0f);
    assert_true(rdf32(gguf_key(&g, "llama.attention.layer_norm_rms_epsilon", 6)->value) == 1e-5f);
    k = gguf_key(&g, "tokenizer.ggml.model", 8);
    assert_int_equal(rd64(k->value), 5);
    assert_memory_equal(k->value + 8, "llama", 5);
    assert_int_equal(gguf_u32(&g, "tokenizer.ggml.bos_token_id"), 1);
    assert_int_equal(gguf_u32(&g, "tokenizer.ggml.eos_token_id"), 2);
    assert_int_equal(gguf_u32(&g, "tokenizer.ggml.unknown_token_id"), 0);
    assert_int_equal(gguf_key(&g, "tokenizer.ggml.add_bos_token", 7)->value[0], 1);
    free(g.bytes);
    remove("build/test_mkgguf_meta.gguf");
}

/* tok512.bin as written: piece i is bytes[at[i]] with length len[i]. */
typedef struct tokbin {
    unsigned char *bytes;
    size_t at[512], length[512];
    float score[512];
} tokbin;

static void read_tokbin(tokbin *t)
{
    char path[512];
    size_t size, at = 4, i;
    t->bytes = test_read_file(test_shared_path(path, sizeof path, "models/tok512.bin"), &size);
    assert_non_null(t->bytes);
    for (i = 0; i < 512; i++) {
        t->score[i] = rdf32(t->bytes + at);
        t->length[i] = rd32(t->bytes + at + 4);
        t->at[i] = at + 8;
        at += 8 + t->length[i];
    }
    assert_int_equal(at, size);
}

/* llama.cpp's token types: 2 unknown, 3 control, 6 byte, 1 normal. */
static uint32_t expected_token_type(const unsigned char *piece, size_t n, size_t id)
{
    if (id == 0)
        return 2;
    if (id == 1 || id == 2)
        return 3;
    if (n == 6 && piece[0] == '<' && piece[1] == '0' && piece[2] == 'x' && piece[5] == '>')
        return 6;
    return 1;
}

/* The vocabulary as GGUF text (U+2581 for spaces, <s> and </s> bare) and
 * back through pmpd's importer (spaces again). */
static void test_vocabulary_round_trip(void **state)
{
    gguf_file g;
    tokbin tok;
    pmpd_build_model b;
    const unsigned char *tokens, *scores, *types, *section = NULL, *offsets, *blob;
    size_t i, at = 12;
    uint32_t n, s;
    (void)state;
    read_tokbin(&tok);
    generate("build/test_mkgguf_vocab.gguf", odd_shape, PMPD_GGML_F32, &g);
    tokens = gguf_key(&g, "tokenizer.ggml.tokens", 9)->value;
    scores = gguf_key(&g, "tokenizer.ggml.scores", 9)->value;
    types = gguf_key(&g, "tokenizer.ggml.token_type", 9)->value;
    assert_true(rd32(tokens) == 8 && rd64(tokens + 4) == 512);
    assert_true(rd32(scores) == 6 && rd64(scores + 4) == 512);
    assert_true(rd32(types) == 5 && rd64(types + 4) == 512);
    for (i = 0; i < 512; i++) {
        const unsigned char *piece = tok.bytes + tok.at[i];
        size_t n_piece = tok.length[i], length = (size_t)rd64(tokens + at), k, spaces = 0;
        const unsigned char *text = tokens + at + 8;
        if (i == 1 || i == 2) {
            /* tok512.bin spells them "\n<s>\n" and "\n</s>\n". */
            assert_int_equal(length, i == 1 ? 3 : 4);
            assert_memory_equal(text, i == 1 ? "<s>" : "</s>", length);
        } else {
            for (k = 0; k < n_piece; k++) {
                if (piece[k] == ' ') {
                    assert_memory_equal(text + k + 2 * spaces, "\xe2\x96\x81", 3);
                    spaces++;
                } else {
                    assert_int_equal(text[k + 2 * spaces], piece[k]);
                }
            }
            assert_int_equal(length, n_piece + 2 * spaces);
        }
        assert_true(rdf32(scores + 12 + 4 * i) == tok.score[i]);
        assert_int_equal(rd32(types + 12 + 4 * i), expected_token_type(piece, n_piece, i));
        at += 8 + length;
    }
    /* Through the importer, every piece and score equals tok512.bin's but BOS and EOS. */
    import(&g, &b);
    for (i = 0; i < b.n_sections; i++)
        if (b.sections[i].kind == PMPD_SECTION_TOKENIZER)
            section = b.sections[i].data;
    assert_non_null(section);
    n = rd32(section + PMPD_TOK_N_TOKENS);
    assert_int_equal(n, 512);
    offsets = section + PMPD_TOK_HEADER_SIZE + 4 * n;
    blob = offsets + 4 * (n + 1) + 4 * n;
    for (s = 0; s < n; s++) {
        size_t length = rd32(offsets + 4 * s + 4) - rd32(offsets + 4 * s);
        assert_true(rdf32(section + PMPD_TOK_HEADER_SIZE + 4 * s) == tok.score[s]);
        if (s == 1 || s == 2)
            continue;
        assert_int_equal(length, tok.length[s]);
        assert_memory_equal(blob + rd32(offsets + 4 * s), tok.bytes + tok.at[s], length);
    }
    pmpd_build_free(&b);
    free(tok.bytes);
    free(g.bytes);
    remove("build/test_mkgguf_vocab.gguf");
}

/* Every tensor pmpd imports equals this test's decoding of the file's bytes. */
static void check_import_matches_decoding(const gguf_file *g)
{
    pmpd_build_model b;
    uint64_t i, j;
    import(g, &b);
    assert_int_equal(b.n_tensors, g->n_tensors);
    assert_int_equal(b.info.shared_classifier, 0);
    for (i = 0; i < g->n_tensors; i++) {
        const tensor_info *t = &g->tensors[i];
        const pmpd_build_tensor *got = pmpd_build_find(&b, t->name);
        assert_non_null(got);
        assert_int_equal(got->type, PMPD_TENSOR_F32);
        assert_int_equal(got->size, 4 * t->ne[0] * t->ne[1]);
        for (j = 0; j < t->ne[0] * t->ne[1]; j++)
            assert_true(rdf32(got->data + 4 * j) == decode(t, j));
    }
    pmpd_build_free(&b);
}

/* The F32 file: norms are ones, weights look like normal(0, 0.02). */
static void check_reference(const gguf_file *f32)
{
    double sum = 0, squares = 0, count = 0;
    uint64_t i, j;
    for (i = 0; i < f32->n_tensors; i++) {
        const tensor_info *t = &f32->tensors[i];
        assert_int_equal(t->type, 0);
        for (j = 0; j < t->ne[0] * t->ne[1]; j++) {
            double x = decode(t, j);
            if (t->n_dims == 1) {
                assert_true(x == 1.0);
                continue;
            }
            assert_true(fabs(x) < 0.02 * 7);
            sum += x;
            squares += x * x;
            count++;
        }
    }
    /* Over ~10^5 draws the mean is within 5 standard errors of 0 and the
     * deviation within 2% of 0.02. */
    assert_true(fabs(sum / count) < 5 * 0.02 / sqrt(count));
    assert_true(fabs(sqrt(squares / count) - 0.02) < 0.02 * 0.02);
}

/* The quantized or f16 tensor t against the f32 reference r, by the rules of t's type. */
static void check_rounding(const tensor_info *t, const tensor_info *r)
{
    const double half_ulp = 1.0 / 2048;           /* f16 keeps 11 significant bits */
    const double subnormal_half_step = 1.0 / 33554432; /* below 2^-14, steps of 2^-24 */
    uint64_t n = t->ne[0] * t->ne[1], b, j;
    assert_true(t->ne[0] == r->ne[0] && t->ne[1] == r->ne[1]);
    if (t->type == 1) {
        for (j = 0; j < n; j++)
            assert_true(fabs((double)decode(t, j) - decode(r, j)) <= fabs((double)decode(r, j)) * half_ulp + subnormal_half_step);
        return;
    }
    for (b = 0; b < n / 32; b++) {
        const unsigned char *block = t->data + b * (t->type == 8 ? 34 : 18);
        double d = test_half_value((uint16_t)(block[0] | block[1] << 8)), amax = 0, max = 0, want;
        uint64_t at_max = 0;
        for (j = 32 * b; j < 32 * b + 32; j++) {
            if (fabs((double)decode(r, j)) > amax) {
                amax = fabs((double)decode(r, j));
                max = decode(r, j);
                at_max = j;
            }
        }
        /* Q8_0: d = amax / 127; Q4_0: d = max / -8, the largest weight at q = 0.
         * Errors: half a step from rounding (a whole one where Q4_0 clamps
         * q at 15), plus |q| times the f16 rounding of d (2^-11 of it). */
        want = t->type == 8 ? amax / 127 : max / -8;
        assert_true(fabs(d - want) <= fabs(want) * half_ulp);
        if (t->type == 2)
            assert_true(decode(t, at_max) == (float)(d * -8));
        for (j = 32 * b; j < 32 * b + 32; j++)
            assert_true(fabs((double)decode(t, j) - decode(r, j)) <= fabs(d) * (t->type == 8 ? 0.57 : 1.01));
    }
}

static void check_types_against_f32(shape s, const pmpd_ggml_type *types, size_t n_types)
{
    gguf_file ref, g;
    size_t k;
    uint64_t i;
    generate("build/test_mkgguf_ref.gguf", s, PMPD_GGML_F32, &ref);
    check_reference(&ref);
    check_import_matches_decoding(&ref);
    for (k = 0; k < n_types; k++) {
        generate("build/test_mkgguf_type.gguf", s, types[k], &g);
        assert_int_equal(g.n_tensors, ref.n_tensors);
        for (i = 0; i < g.n_tensors; i++) {
            const tensor_info *r = gguf_tensor(&ref, g.tensors[i].name);
            assert_non_null(r);
            if (g.tensors[i].n_dims == 1) {
                assert_int_equal(g.tensors[i].type, 0); /* norms stay F32 */
                assert_memory_equal(g.tensors[i].data, r->data, 4 * r->ne[0]);
            } else {
                assert_int_equal(g.tensors[i].type, (uint32_t)types[k]);
                check_rounding(&g.tensors[i], r);
            }
        }
        check_import_matches_decoding(&g);
        free(g.bytes);
    }
    free(ref.bytes);
    remove("build/test_mkgguf_ref.gguf");
    remove("build/test_mkgguf_type.gguf");
}

static void test_f32_f16_odd_rows(void **state)
{
    const pmpd_ggml_type f16 = PMPD_GGML_F16;
    (void)state;
    check_types_against_f32(odd_shape, &f16, 1);
}

static void test_all_types_block_rows(void **state)
{
    const pmpd_ggml_type types[] = {PMPD_GGML_F16, PMPD_GGML_Q8_0, PMPD_GGML_Q4_0};
    (void)state;
    check_types_against_f32(block_shape, types, 3);
}

static int same_file(const gguf_file *a, const gguf_file *b)
{
    return a->size == b->size && memcmp(a->bytes, b->bytes, a->size) == 0;
}

/* Same seed, same bytes; another seed, other weights; --tied drops only output.weight. */
static void test_seed_and_tied(void **state)
{
    pmpd_synth_options o;
    gguf_file a, b, tied;
    pmpd_build_model m;
    uint64_t i;
    (void)state;
    generate("build/test_mkgguf_a.gguf", block_shape, PMPD_GGML_Q4_0, &a);
    generate("build/test_mkgguf_b.gguf", block_shape, PMPD_GGML_Q4_0, &b);
    assert_true(same_file(&a, &b));
    free(b.bytes);
    tiny_options(&o, block_shape, PMPD_GGML_Q4_0);
    o.seed = 2;
    assert_int_equal(pmpd_synth_gguf("build/test_mkgguf_b.gguf", &o, NULL, NULL), PMPD_OK);
    gguf_open("build/test_mkgguf_b.gguf", &b);
    assert_int_equal(b.size, a.size);
    assert_memory_not_equal(gguf_tensor(&b, "token_embd.weight")->data, gguf_tensor(&a, "token_embd.weight")->data,
                            64 / 32 * 18);
    tiny_options(&o, block_shape, PMPD_GGML_Q4_0);
    o.tied = 1;
    assert_int_equal(pmpd_synth_gguf("build/test_mkgguf_tied.gguf", &o, NULL, NULL), PMPD_OK);
    gguf_open("build/test_mkgguf_tied.gguf", &tied);
    assert_int_equal(tied.n_tensors, a.n_tensors - 1);
    assert_null(gguf_tensor(&tied, "output.weight"));
    for (i = 0; i < tied.n_tensors; i++) {
        const tensor_info *t = &tied.tensors[i], *u = gguf_tensor(&a, t->name);
        assert_non_null(u);
        assert_memory_equal(t->data, u->data, tensor_bytes(t));
    }
    import(&tied, &m);
    assert_int_equal(m.info.shared_classifier, 1);
    pmpd_build_free(&m);
    free(a.bytes);
    free(b.bytes);
    free(tied.bytes);
    remove("build/test_mkgguf_a.gguf");
    remove("build/test_mkgguf_b.gguf");
    remove("build/test_mkgguf_tied.gguf");
}

static int file_exists(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f)
        fclose(f);
    return f != NULL;
}

/* Fails with status and a message containing `names`, leaving no file. */
static void expect_failure(const char *out, const pmpd_synth_options *o, pmpd_status status, const char *names)
{
    pmpd_error err;
    char tmp[256];
    assert_int_equal(pmpd_synth_gguf(out, o, NULL, &err), status);
    assert_int_equal(err.code, status);
    if (!strstr(err.message, names))
        fail_msg("message \"%s\" does not name \"%s\"", err.message, names);
    sprintf(tmp, "%s.tmp", out);
    assert_false(file_exists(out));
    assert_false(file_exists(tmp));
}

static void write_bytes(const char *path, const unsigned char *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void test_bad_input(void **state)
{
    /* tokenizer.bin with two tokens: max length 5, then (score, length, bytes) each. */
    static const unsigned char short_tokenizer[] = {5, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, '<', 'u', 'n', 'k', '>',
                                                    0, 0, 0, 0, 3, 0, 0, 0, '<', 's', '>'};
    /* Impossible shapes and types, each with what its message must name. */
    static const struct {
        uint32_t dim, hidden, layers, heads, kv_heads;
        pmpd_ggml_type type;
        const char *names;
    } shapes[] = {
        {64, 96, 2, 6, 2, PMPD_GGML_F32, "heads 6 do not divide dim 64"},
        {64, 96, 2, 4, 3, PMPD_GGML_F32, "kv-heads 3 do not divide heads 4"},
        {40, 72, 2, 4, 2, PMPD_GGML_Q4_0, "multiples of 32"},
        {64, 100, 2, 4, 2, PMPD_GGML_Q8_0, "hidden 100"},
        {64, 96, 0, 4, 2, PMPD_GGML_F32, "positive"},
        {64, 96, 2, 4, 2, (pmpd_ggml_type)16, "type 16"},
        {64, 96, 2, 4, 2, PMPD_GGML_Q4_K, "Q4_K rows are blocks of 256 weights: dim 64 and hidden 96"},
        {256, 96, 2, 4, 2, PMPD_GGML_Q6_K, "multiples of 256"},
        {512, 320, 2, 4, 2, PMPD_GGML_MIX_Q4_K_M, "Q4_K_M rows are blocks of 256"},
    };
    const char *out = "build/test_mkgguf_bad.gguf";
    pmpd_synth_options o;
    size_t i;
    (void)state;
    for (i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        tiny_options(&o, block_shape, shapes[i].type);
        o.dim = shapes[i].dim;
        o.hidden_dim = shapes[i].hidden;
        o.n_layers = shapes[i].layers;
        o.n_heads = shapes[i].heads;
        o.n_kv_heads = shapes[i].kv_heads;
        expect_failure(out, &o, PMPD_ERR_INVALID_ARGUMENT, shapes[i].names);
    }
    tiny_options(&o, block_shape, PMPD_GGML_Q4_0);
    o.tokenizer_path = "build/no_such_tokenizer.bin";
    expect_failure(out, &o, PMPD_ERR_NOT_FOUND, "build/no_such_tokenizer.bin");
    /* A tokenizer cut inside its second entry, and one too small for <unk>, <s>, </s>. */
    o.tokenizer_path = "build/test_mkgguf_tokenizer.bin";
    write_bytes(o.tokenizer_path, short_tokenizer, sizeof short_tokenizer - 3);
    expect_failure(out, &o, PMPD_ERR_FORMAT_TRUNCATED, "tokenizer build/test_mkgguf_tokenizer.bin: ");
    write_bytes(o.tokenizer_path, short_tokenizer, sizeof short_tokenizer);
    expect_failure(out, &o, PMPD_ERR_FORMAT_VALUE, "no room for <unk>");
    remove(o.tokenizer_path);
    tiny_options(&o, block_shape, PMPD_GGML_F32);
    expect_failure("build/no_such_dir/x.gguf", &o, PMPD_ERR_IO, "build/no_such_dir/x.gguf.tmp");
}

/* pmpd-convert's path: the generated file becomes a container the runtime opens. */
static void test_convert_generated(void **state)
{
    const char *out = "build/test_mkgguf_convert.pmpd";
    static unsigned char arena_memory[256 * 1024];
    pmpd_convert_options options;
    pmpd_convert_summary summary;
    pmpd_error err;
    pmpd_arena arena;
    pmpd_model *m;
    gguf_file g;
    (void)state;
    generate("build/test_mkgguf_convert.gguf", block_shape, PMPD_GGML_Q4_0, &g);
    memset(&options, 0, sizeof options);
    options.type = PMPD_TENSOR_Q4;
    assert_int_equal(pmpd_convert_file("build/test_mkgguf_convert.gguf", out, &options, &summary, &err), PMPD_OK);
    assert_int_equal(summary.n_tensors, 21);
    pmpd_arena_init(&arena, arena_memory, sizeof arena_memory);
    assert_int_equal(pmpd_model_open_file(out, &arena, &m, &err), PMPD_OK);
    assert_int_equal(pmpd_model_get_info(m)->vocab_size, 512);
    assert_int_equal(pmpd_model_get_info(m)->n_kv_heads, 2);
    assert_int_equal(pmpd_model_get_info(m)->shared_classifier, 0);
    pmpd_model_close(m);
    free(g.bytes);
    remove(out);
    remove("build/test_mkgguf_convert.gguf");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tensor_names_and_shapes),
        cmocka_unit_test(test_metadata),
        cmocka_unit_test(test_vocabulary_round_trip),
        cmocka_unit_test(test_f32_f16_odd_rows),
        cmocka_unit_test(test_all_types_block_rows),
        cmocka_unit_test(test_seed_and_tied),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_convert_generated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
