/* Writes the fuzz seed corpora: tiny synthetic models in every input format
 * (so each seed is a few KiB and every parser reaches its deep paths), plus
 * cut-down heads of the real shared files.  Run from the repository root:
 *
 *   cc -std=c99 -I. -DPMPD_OFFLINE=1 -o build/make_seeds fuzz/tools/make_seeds.c \
 *      tests/support/test_gguf.c build/libpmpd_offline.a build/libpmpd.a -lm -pthread
 *   build/make_seeds
 *
 * The quantized container seeds come from the converter on the tiny seeds:
 *   build/pmpd-convert fuzz/corpus/llama2c/tiny_legacy_shared.bin fuzz/corpus/container/tiny_q4.pmpd \
 *       --tokenizer fuzz/corpus/tokenizer_bin/tiny_tokenizer.bin --type q4      (also q8, q2cb, nuq3, tcq2.5;
 *       tiny_vq2_5.pmpd with --type vq2.5)
 *   build/pmpd-convert fuzz/corpus/llama2c/tiny_legacy_shared.bin fuzz/corpus/container/tiny_anyprec.pmpd \
 *       --type anyprec --bits 2:4
 *
 * The architecture-variant seeds come from pmpd-mkgguf, then the converter:
 *   T="--tokenizer fuzz/corpus/tokenizer_bin/tiny_tokenizer.bin --type f32 --dim 16 --hidden 32 --layers 1
 *      --heads 2 --kv-heads 1 --seq-len 32"
 *   build/pmpd-mkgguf fuzz/corpus/gguf/tiny_qwen2_bias.gguf $T --arch qwen2 --seed 2
 *   build/pmpd-mkgguf fuzz/corpus/gguf/tiny_llama3_rope_freqs_head_dim.gguf $T --head-dim 16 --rope-freqs \
 *       --rope-theta 500000 --tied --seed 3
 *   build/pmpd-convert fuzz/corpus/gguf/tiny_qwen2_bias.gguf fuzz/corpus/container/tiny_qwen2_bias.pmpd
 *   build/pmpd-convert fuzz/corpus/gguf/tiny_llama3_rope_freqs_head_dim.gguf \
 *       fuzz/corpus/container/tiny_llama3_rope_freqs.pmpd
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/offline/import/import.h"
#include "tests/support/test_gguf.h"

/* dim 16, hidden 32, 1 layer, 2 heads of 8, 1 KV head, vocab 24, seq_len 32. */
enum { DIM = 16, HIDDEN = 32, LAYERS = 1, HEADS = 2, KV_HEADS = 1, VOCAB = 24, SEQ = 32, HEAD = DIM / HEADS };

static uint32_t seed_state = 12345;

static float seed_random(void)
{
    seed_state = seed_state * 1664525u + 1013904223u;
    return (float)((seed_state >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

static void put32(FILE *f, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    fwrite(b, 1, 4, f);
}

static void putf(FILE *f, float x)
{
    uint32_t bits;
    memcpy(&bits, &x, 4);
    put32(f, bits);
}

static void put_floats(FILE *f, size_t n, int positive)
{
    size_t i;
    for (i = 0; i < n; i++) {
        float x = seed_random();
        putf(f, positive ? 1.0f + 0.5f * x : 0.1f * x);
    }
}

static const char *seed_path(const char *corpus, const char *name, char *out, size_t size)
{
    snprintf(out, size, "fuzz/corpus/%s/%s", corpus, name);
    return out;
}

/* The llama2.c checkpoint, legacy layout (version 0) or version 1. */
static void write_llama2c(const char *corpus, const char *name, int version1, int shared)
{
    const size_t kv = KV_HEADS * HEAD;
    char path[256];
    FILE *f = fopen(seed_path(corpus, name, path, sizeof path), "wb");
    size_t i;
    seed_state = 12345;
    if (version1) {
        unsigned char pad[256 - 37];
        put32(f, 0x616b3432u);
        put32(f, 1);
        put32(f, DIM); put32(f, HIDDEN); put32(f, LAYERS); put32(f, HEADS); put32(f, KV_HEADS);
        put32(f, VOCAB); put32(f, SEQ);
        fputc(shared, f);
        memset(pad, 0, sizeof pad);
        fwrite(pad, 1, sizeof pad, f);
        put_floats(f, 2 * LAYERS * DIM + DIM, 1);
        put_floats(f, (size_t)VOCAB * DIM, 0);
    } else {
        put32(f, DIM); put32(f, HIDDEN); put32(f, LAYERS); put32(f, HEADS); put32(f, KV_HEADS);
        put32(f, shared ? VOCAB : (uint32_t)-VOCAB); put32(f, SEQ);
        put_floats(f, (size_t)VOCAB * DIM, 0);
        put_floats(f, LAYERS * DIM, 1);
    }
    put_floats(f, LAYERS * (DIM * DIM + 2 * kv * DIM + DIM * DIM), 0);
    if (!version1)
        put_floats(f, LAYERS * DIM, 1);
    put_floats(f, LAYERS * 3 * (size_t)HIDDEN * DIM, 0);
    if (!version1) {
        put_floats(f, DIM, 1);
        for (i = 0; i < (size_t)SEQ * HEAD; i++)
            putf(f, 0.0f); /* the old RoPE tables */
    }
    if (!shared)
        put_floats(f, (size_t)VOCAB * DIM, 0);
    fclose(f);
}

static const char *const seed_pieces[VOCAB] = {
    "<unk>", "\n<s>\n", "\n</s>\n", "<0x0A>", "<0x20>", "<0xE2>", "<0x98>", "<0x83>", " ", "a", "b", "c",
    " a", " b", "ab", "ba", " ab", "abc", "\xe2\x98\x83", " \xe2\x98\x83", "c ", "<", ">", "x"};

static void write_tokenizer_bin(const char *corpus, const char *name)
{
    char path[256];
    FILE *f = fopen(seed_path(corpus, name, path, sizeof path), "wb");
    size_t i;
    put32(f, 8);
    for (i = 0; i < VOCAB; i++) {
        putf(f, i < 8 ? 0.0f : -(float)i);
        put32(f, (uint32_t)strlen(seed_pieces[i]));
        fwrite(seed_pieces[i], 1, strlen(seed_pieces[i]), f);
    }
    fclose(f);
}

static unsigned char *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    unsigned char *data;
    long n;
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    data = (unsigned char *)malloc((size_t)n + 1);
    *size = fread(data, 1, (size_t)n, f);
    fclose(f);
    return data;
}

static void write_bytes(const char *corpus, const char *name, const void *data, size_t size)
{
    char path[256];
    FILE *f = fopen(seed_path(corpus, name, path, sizeof path), "wb");
    fwrite(data, 1, size, f);
    fclose(f);
}

/* An ANYPREC tensor seed for fuzz_anyprec (selector byte 0, then the
 * tensor): random weights quantized by the offline quantizer. */
static void write_anyprec(const char *name, uint32_t rows, uint32_t cols, unsigned seed_bits, unsigned parent_bits)
{
    uint64_t size = 0;
    unsigned char *bytes;
    float *w = (float *)malloc((size_t)rows * cols * sizeof(float));
    size_t i;
    seed_state = 12345;
    for (i = 0; i < (size_t)rows * cols; i++)
        w[i] = seed_random();
    if (pmpd_anyprec_size(rows, cols, seed_bits, parent_bits, &size) != PMPD_OK ||
        !(bytes = (unsigned char *)calloc((size_t)size + 1, 1)) ||
        pmpd_anyprec_quantize(w, rows, cols, NULL, seed_bits, parent_bits, 0, rows, bytes + 1, (size_t)size) !=
            PMPD_OK)
        abort();
    write_bytes("anyprec", name, bytes, (size_t)size + 1);
    free(bytes);
    free(w);
}

/* A cut-down head of a real shared file. */
static void write_head(const char *corpus, const char *name, const char *shared_file, size_t bytes)
{
    size_t size;
    unsigned char *data = slurp(shared_file, &size);
    if (!data) {
        fprintf(stderr, "make_seeds: %s not found, skipped\n", shared_file);
        return;
    }
    write_bytes(corpus, name, data, size < bytes ? size : bytes);
    free(data);
}

/* Imports the tiny checkpoint and tokenizer into a builder. */
static void tiny_build(pmpd_build_model *b, int shared, int with_tokenizer)
{
    size_t size;
    unsigned char *data;
    pmpd_vocab v;
    write_llama2c("llama2c", shared ? "tiny_legacy_shared.bin" : "tiny_legacy_separate.bin", 0, shared);
    data = slurp(shared ? "fuzz/corpus/llama2c/tiny_legacy_shared.bin" : "fuzz/corpus/llama2c/tiny_legacy_separate.bin",
                 &size);
    pmpd_build_init(b);
    if (pmpd_import_llama2c(data, size, b, NULL) != PMPD_OK)
        abort();
    free(data);
    if (with_tokenizer) {
        data = slurp("fuzz/corpus/tokenizer_bin/tiny_tokenizer.bin", &size);
        if (pmpd_import_llama2c_tokenizer(data, size, VOCAB, &v, NULL) != PMPD_OK || pmpd_build_add_vocab(b, &v) != PMPD_OK)
            abort();
        pmpd_vocab_free(&v);
        free(data);
    }
}

static void write_container(const char *name, pmpd_build_model *b)
{
    void *block;
    unsigned char *data;
    size_t size;
    if (pmpd_build_serialize(b, &block, &data, &size) != PMPD_OK)
        abort();
    write_bytes("container", name, data, size);
    free(block);
}

static uint32_t gguf_mixed(const pmpd_build_tensor *t)
{
    if (t->n_dims == 1)
        return TEST_GGML_F32;
    if (strstr(t->name, "ffn_down"))
        return TEST_GGML_Q4_0;
    if (strstr(t->name, "attn_q"))
        return TEST_GGML_F16;
    return TEST_GGML_F32;
}

static uint32_t gguf_q8(const pmpd_build_tensor *t)
{
    return strstr(t->name, "ffn_down") ? TEST_GGML_Q8_0 : TEST_GGML_F32;
}

static void write_gguf(const char *name, const pmpd_build_model *b, test_gguf_type_fn types)
{
    size_t size;
    unsigned char *data = test_gguf_write(b, types, &size);
    write_bytes("gguf", name, data, size);
    free(data);
}

/* GPT-2's byte-level spelling of byte b (printable Latin-1 as itself, the
 * other bytes in order from U+0100). */
static size_t byte_level(unsigned b, char *out)
{
    unsigned cp = b, k = 0, c;
    if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
        for (c = 0; c < b; c++)
            if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE))
                k++;
        cp = 0x100 + k;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* A GGUF with a byte-level BPE ("gpt2") vocabulary: the 256 bytes, a few
 * merged tokens, control and user-defined tokens, pre-tokenizer pre; and
 * the container it converts to. */
static void write_gguf_gpt2(const char *name, const char *container_name, const char *pre)
{
    static const char *const merges[] = {"a b", "ab c", "\xc4\xa0 t", "h e", "\xc4\xa0t he", "1 2", "\xc4\x8a \xc4\x8a"};
    char piece[2];
    const char *vocab_path = "build/make_seeds_gpt2.vocab", *gguf_path = "build/make_seeds_gpt2.gguf";
    FILE *f = fopen(vocab_path, "wb");
    pmpd_synth_options o;
    pmpd_build_model b;
    pmpd_error err;
    unsigned char *data;
    size_t size, i;
    unsigned k;
    if (!f)
        abort();
    fprintf(f, "pmpd-gpt2-vocab 1\npre %s\nbos 263\neos 264\neot 264\nadd_bos 1\ntokens 266\n", pre);
    for (k = 0; k < 256; k++) {
        fputs("1 ", f);
        fwrite(piece, 1, byte_level(k, piece), f);
        fputc('\n', f);
    }
    fputs("1 ab\n1 abc\n1 \xc4\xa0t\n1 he\n1 \xc4\xa0the\n1 12\n1 \xc4\x8a\xc4\x8a\n", f);
    fputs("3 <|begin_of_text|>\n3 <|eot_id|>\n4 <tool>\n", f);
    fprintf(f, "merges %u\n", (unsigned)(sizeof merges / sizeof merges[0]));
    for (i = 0; i < sizeof merges / sizeof merges[0]; i++)
        fprintf(f, "%s\n", merges[i]);
    fclose(f);
    pmpd_synth_options_default(&o);
    o.dim = DIM;
    o.hidden_dim = HIDDEN;
    o.n_layers = LAYERS;
    o.n_heads = HEADS;
    o.n_kv_heads = KV_HEADS;
    o.seq_len = SEQ;
    o.type = PMPD_GGML_F32;
    o.tied = 1;
    o.tokenizer_path = NULL;
    o.gpt2_vocab_path = vocab_path;
    if (pmpd_synth_gguf(gguf_path, &o, NULL, &err) != PMPD_OK) {
        fprintf(stderr, "make_seeds: %s\n", err.message);
        abort();
    }
    if (pmpd_import_read_file(gguf_path, &data, &size, &err) != PMPD_OK)
        abort();
    write_bytes("gguf", name, data, size);
    pmpd_build_init(&b);
    if (pmpd_import_gguf(data, size, &b, &err) != PMPD_OK) {
        fprintf(stderr, "make_seeds: %s\n", err.message);
        abort();
    }
    write_container(container_name, &b);
    pmpd_build_free(&b);
    free(data);
    remove(vocab_path);
    remove(gguf_path);
}

/* GGUFs in each newer ggml type, written by pmpd's synthetic generator
 * with the tiny tokenizer: 32-weight block types at dim 32 (a few KiB),
 * the 256-weight super-block types at dim 256 with one layer (the smallest
 * shape they allow; the Q4_K_M mix gives Q4_K and Q6_K in one file). */
static void write_typed_gguf(const char *name, pmpd_ggml_type type)
{
    pmpd_synth_options o;
    pmpd_error err;
    char path[256];
    int super = type == PMPD_GGML_Q5_K || type == PMPD_GGML_IQ4_XS || type == PMPD_GGML_MIX_Q4_K_M;
    pmpd_synth_options_default(&o);
    o.dim = super ? 256 : 32;
    o.hidden_dim = super ? 256 : 64;
    o.n_layers = 1;
    o.n_heads = 2;
    o.n_kv_heads = 1;
    o.seq_len = SEQ;
    o.type = type;
    o.tokenizer_path = "fuzz/corpus/tokenizer_bin/tiny_tokenizer.bin";
    if (pmpd_synth_gguf(seed_path("gguf", name, path, sizeof path), &o, NULL, &err) != PMPD_OK) {
        fprintf(stderr, "make_seeds: %s: %s\n", name, err.message);
        abort();
    }
}

int main(void)
{
    static const char *const texts[] = {
        "\x01Once upon a time", "\x04" "caf\xc3\xa9 \xe2\x98\x83 \xf0\x9f\x98\x80 \xe6\x97\xa5\xe6\x9c\xac",
        "\x03Lily's mom said, \"Lily, let's go!\"\n", "\x02\x80\xbf\xff\xfe lone bytes \xf0\x9f",
    };
    pmpd_build_model b;
    size_t i;
    write_tokenizer_bin("tokenizer_bin", "tiny_tokenizer.bin");
    write_head("tokenizer_bin", "tok512_head.bin", "../shared/models/tok512.bin", 2048);
    write_llama2c("llama2c", "tiny_v1.bin", 1, 1);
    write_head("llama2c", "stories260K_head.bin", "../shared/models/stories260K.bin", 1024);
    write_head("llama2c", "stories260K_v1_head.bin", "../shared/models/stories260K_v1.bin", 1024);

    tiny_build(&b, 1, 1);
    write_container("tiny_f32.pmpd", &b);
    write_gguf("tiny_f32.gguf", &b, NULL);
    write_gguf("tiny_q4_f16.gguf", &b, gguf_mixed);
    write_gguf("tiny_q8.gguf", &b, gguf_q8);
    if (pmpd_build_convert_matrices(&b, PMPD_TENSOR_F16) != PMPD_OK ||
        pmpd_build_add_section(&b, 200, 1, 0, "opaque", 6) != PMPD_OK)
        abort();
    write_container("tiny_f16_extra_section.pmpd", &b);
    pmpd_build_free(&b);
    tiny_build(&b, 0, 0);
    write_container("tiny_separate_no_tokenizer.pmpd", &b);
    pmpd_build_free(&b);
    write_head("gguf", "stories260K_head.gguf", "../shared/models/stories260K.gguf", 16384);
    write_gguf_gpt2("tiny_gpt2_llama_bpe.gguf", "tiny_gpt2_llama_bpe.pmpd", "llama-bpe");
    write_gguf_gpt2("tiny_gpt2_qwen2.gguf", "tiny_gpt2_qwen2.pmpd", "qwen2");
    write_typed_gguf("tiny_bf16.gguf", PMPD_GGML_BF16);
    write_typed_gguf("tiny_q4_1.gguf", PMPD_GGML_Q4_1);
    write_typed_gguf("tiny_q5_0.gguf", PMPD_GGML_Q5_0);
    write_typed_gguf("tiny_q5_1.gguf", PMPD_GGML_Q5_1);
    write_typed_gguf("tiny_iq4_nl.gguf", PMPD_GGML_IQ4_NL);
    write_typed_gguf("q4_k_m_256.gguf", PMPD_GGML_MIX_Q4_K_M);
    write_typed_gguf("q5_k_256.gguf", PMPD_GGML_Q5_K);
    write_typed_gguf("iq4_xs_256.gguf", PMPD_GGML_IQ4_XS);
    write_anyprec("tensor_2x7_seed1_parent4", 2, 7, 1, 4);
    write_anyprec("tensor_3x40_seed2_parent3", 3, 40, 2, 3);

    for (i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "text%u", (unsigned)i);
        write_bytes("tokenize", name, texts[i], strlen(texts[i]));
    }
    return 0;
}
