#include "tests/support/test_gguf.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/format/container.h"

typedef struct gguf_out {
    unsigned char *p;
    size_t size, capacity;
} gguf_out;

static void out_bytes(gguf_out *o, const void *data, size_t n)
{
    if (o->size + n > o->capacity) {
        o->capacity = (o->size + n) * 2;
        o->p = (unsigned char *)realloc(o->p, o->capacity);
    }
    memcpy(o->p + o->size, data, n);
    o->size += n;
}

static void out_u32(gguf_out *o, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    out_bytes(o, b, 4);
}

static void out_u64(gguf_out *o, uint64_t v)
{
    out_u32(o, (uint32_t)v);
    out_u32(o, (uint32_t)(v >> 32));
}

static void out_f32(gguf_out *o, float f)
{
    uint32_t bits;
    memcpy(&bits, &f, 4);
    out_u32(o, bits);
}

static void out_string(gguf_out *o, const char *s, size_t n)
{
    out_u64(o, n);
    out_bytes(o, s, n);
}

static void kv_u32(gguf_out *o, const char *key, uint32_t v)
{
    out_string(o, key, strlen(key));
    out_u32(o, 4);
    out_u32(o, v);
}

static void kv_f32(gguf_out *o, const char *key, float v)
{
    out_string(o, key, strlen(key));
    out_u32(o, 6);
    out_f32(o, v);
}

static void kv_str(gguf_out *o, const char *key, const char *v)
{
    out_string(o, key, strlen(key));
    out_u32(o, 8);
    out_string(o, v, strlen(v));
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

float test_half_value(uint16_t bits)
{
    int e = (bits >> 10) & 31;
    double mant = bits & 1023, v;
    if (e == 31)
        v = mant != 0 ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp(mant, -24);
    else
        v = ldexp(1024.0 + mant, e - 25);
    return (float)((bits & 0x8000) ? -v : v);
}

/* Nearest half by brute force over the bit patterns near the value. */
static uint16_t half_bits(float x)
{
    uint16_t best = 0, bits;
    double best_error = INFINITY;
    unsigned lo = 0, hi = 0x7BFF, mid;
    double a = fabs((double)x);
    while (lo < hi) {
        mid = (lo + hi + 1) / 2;
        if (test_half_value((uint16_t)mid) <= a)
            lo = mid;
        else
            hi = mid - 1;
    }
    for (bits = (uint16_t)lo; bits <= lo + 1 && bits <= 0x7BFF; bits++) {
        double error = fabs(test_half_value(bits) - a);
        if (error < best_error) {
            best_error = error;
            best = bits;
        }
    }
    return (uint16_t)(best | (x < 0 ? 0x8000 : 0));
}

static void write_tokenizer(gguf_out *o, const pmpd_build_model *b, uint64_t *n_kv)
{
    uint32_t i, k, n;
    const unsigned char *s = NULL, *scores, *offsets, *blob;
    for (i = 0; i < b->n_sections; i++)
        if (b->sections[i].kind == PMPD_SECTION_TOKENIZER)
            s = b->sections[i].data;
    if (!s)
        return;
    n = le32(s);
    scores = s + 16;
    offsets = scores + 4 * n;
    blob = offsets + 4 * (n + 1) + 4 * n;
    kv_str(o, "tokenizer.ggml.model", "llama");
    out_string(o, "tokenizer.ggml.tokens", strlen("tokenizer.ggml.tokens"));
    out_u32(o, 9);
    out_u32(o, 8);
    out_u64(o, n);
    for (i = 0; i < n; i++) {
        uint32_t start = le32(offsets + 4 * i), end = le32(offsets + 4 * i + 4);
        char piece[1024];
        size_t length = 0;
        for (k = start; k < end && length + 3 < sizeof piece; k++) {
            if (blob[k] == ' ') {
                memcpy(piece + length, "\xe2\x96\x81", 3);
                length += 3;
            } else {
                piece[length++] = (char)blob[k];
            }
        }
        out_string(o, piece, length);
    }
    out_string(o, "tokenizer.ggml.scores", strlen("tokenizer.ggml.scores"));
    out_u32(o, 9);
    out_u32(o, 6);
    out_u64(o, n);
    out_bytes(o, scores, 4 * (size_t)n);
    kv_u32(o, "tokenizer.ggml.bos_token_id", b->info.bos_id);
    kv_u32(o, "tokenizer.ggml.eos_token_id", b->info.eos_id);
    *n_kv += 5;
}

/* One quantized block of 32 values (34 bytes for Q8_0, 18 for Q4_0). */
static size_t quantize_block(uint32_t type, const float *x, unsigned char *block)
{
    float amax = 0.0f, d;
    uint16_t hd;
    int j;
    for (j = 0; j < 32; j++)
        amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    hd = half_bits(amax / (type == TEST_GGML_Q8_0 ? 127.0f : 8.0f));
    d = test_half_value(hd);
    block[0] = (unsigned char)hd;
    block[1] = (unsigned char)(hd >> 8);
    if (type == TEST_GGML_Q8_0) {
        for (j = 0; j < 32; j++) {
            long q = d > 0 ? lroundf(x[j] / d) : 0;
            block[2 + j] = (unsigned char)(int8_t)(q > 127 ? 127 : q < -127 ? -127 : q);
        }
        return 34;
    }
    for (j = 0; j < 16; j++) {
        long lo = d > 0 ? lroundf(x[j] / d) + 8 : 8, hi = d > 0 ? lroundf(x[j + 16] / d) + 8 : 8;
        lo = lo < 0 ? 0 : lo > 15 ? 15 : lo;
        hi = hi < 0 ? 0 : hi > 15 ? 15 : hi;
        block[2 + j] = (unsigned char)(lo | (hi << 4));
    }
    return 18;
}

float test_gguf_expected(const pmpd_build_tensor *t, uint32_t type, uint64_t i)
{
    const float *x = (const float *)(const void *)t->data;
    unsigned char block[34];
    float d;
    uint64_t first = i / 32 * 32;
    unsigned j = (unsigned)(i % 32);
    if (type == TEST_GGML_F32)
        return x[i];
    if (type == TEST_GGML_F16)
        return test_half_value(half_bits(x[i]));
    quantize_block(type, x + first, block);
    d = test_half_value((uint16_t)(block[0] | (block[1] << 8)));
    if (type == TEST_GGML_Q8_0)
        return d * (float)(int8_t)block[2 + j];
    /* ggml's Q4_0: byte k holds value k in its low nibble and k + 16 in its high one. */
    return d * (float)((j < 16 ? block[2 + j] & 15 : block[2 + j - 16] >> 4) - 8);
}

static void write_data(gguf_out *o, const pmpd_build_tensor *t, uint32_t type)
{
    uint64_t n = t->size / 4, i;
    const float *x = (const float *)(const void *)t->data; /* f32 tensors of the builder, little-endian host */
    unsigned char block[34];
    if (type == TEST_GGML_F32) {
        out_bytes(o, t->data, (size_t)t->size);
        return;
    }
    if (type == TEST_GGML_F16) {
        for (i = 0; i < n; i++) {
            uint16_t h = half_bits(x[i]);
            block[0] = (unsigned char)h;
            block[1] = (unsigned char)(h >> 8);
            out_bytes(o, block, 2);
        }
        return;
    }
    for (i = 0; i < n; i += 32)
        out_bytes(o, block, quantize_block(type, x + i, block));
}

static uint64_t data_bytes(const pmpd_build_tensor *t, uint32_t type)
{
    uint64_t n = t->size / 4;
    return type == TEST_GGML_F32 ? 4 * n : type == TEST_GGML_F16 ? 2 * n : type == TEST_GGML_Q8_0 ? n / 32 * 34 : n / 32 * 18;
}

unsigned char *test_gguf_write(const pmpd_build_model *b, test_gguf_type_fn type_of, size_t *size)
{
    gguf_out o = {NULL, 0, 0};
    uint64_t n_kv = 12, offset = 0;
    size_t n_kv_at;
    uint32_t i, d;
    static const unsigned char zeros[32] = {0};
    out_bytes(&o, "GGUF", 4);
    out_u32(&o, 3);
    out_u64(&o, b->n_tensors);
    n_kv_at = o.size;
    out_u64(&o, 0);
    kv_str(&o, "general.architecture", "llama");
    kv_str(&o, "general.name", "test");
    kv_u32(&o, "general.alignment", 32);
    kv_u32(&o, "llama.context_length", b->info.seq_len);
    kv_u32(&o, "llama.embedding_length", b->info.dim);
    kv_u32(&o, "llama.feed_forward_length", b->info.hidden_dim);
    kv_u32(&o, "llama.block_count", b->info.n_layers);
    kv_u32(&o, "llama.attention.head_count", b->info.n_heads);
    kv_u32(&o, "llama.attention.head_count_kv", b->info.n_kv_heads);
    kv_u32(&o, "llama.rope.dimension_count", b->info.head_dim);
    kv_f32(&o, "llama.attention.layer_norm_rms_epsilon", b->info.norm_eps);
    kv_f32(&o, "llama.rope.freq_base", b->info.rope_theta);
    write_tokenizer(&o, b, &n_kv);
    for (i = 0; i < 8; i++)
        o.p[n_kv_at + i] = (unsigned char)(n_kv >> (8 * i));
    for (i = 0; i < b->n_tensors; i++) {
        const pmpd_build_tensor *t = &b->tensors[i];
        uint32_t type = type_of ? type_of(t) : TEST_GGML_F32;
        out_string(&o, t->name, strlen(t->name));
        out_u32(&o, t->n_dims);
        for (d = 0; d < t->n_dims; d++)
            out_u64(&o, t->dims[t->n_dims - 1 - d]);
        out_u32(&o, type);
        out_u64(&o, offset);
        offset += (data_bytes(t, type) + 31) / 32 * 32;
    }
    out_bytes(&o, zeros, (32 - o.size % 32) % 32);
    for (i = 0; i < b->n_tensors; i++) {
        const pmpd_build_tensor *t = &b->tensors[i];
        uint32_t type = type_of ? type_of(t) : TEST_GGML_F32;
        write_data(&o, t, type);
        out_bytes(&o, zeros, (32 - o.size % 32) % 32);
    }
    *size = o.size;
    return o.p;
}
