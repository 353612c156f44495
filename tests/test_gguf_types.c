/* GGUF tensor types on import: Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_NL,
 * IQ4_XS and BF16 beside the older ones.
 *
 * Two oracles, both written here from the format definitions and not from
 * pmpd's code:
 *   - blocks built by hand with values worked out by hand (zero scales,
 *     extreme f16 scales, negative mins, the bit fields of the K-quant
 *     scales), checked against the importer's block decoders;
 *   - tiny synthetic GGUFs of every type written by pmpd_synth_gguf, whose
 *     bytes this file walks and decodes element by element (spec_value);
 *     pmpd's importer must give the same floats, bit for bit, and the
 *     decoded weights must be close to the f32 file of the same seed (so a
 *     mispacked encoder cannot pass).
 * Floats are formed in the reference's order, one rounding per operation
 * (a product and the sum after it are separate statements so no compiler
 * fuses them).  Bad input: truncated K-quant data. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd_impl/offline/import/ggml_types.h"
#include "pmpd_impl/offline/import/import.h"
#include "tests/support/test_gguf.h"
#include "tests/support/test_support.h"

#define MAX_KEYS 64
#define MAX_TENSORS 128

enum { F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q4_K = 12, Q5_K = 13, Q6_K = 14,
       IQ4_NL = 20, IQ4_XS = 23, BF16 = 30 };

/* ---- The formats, element by element ---- */

static const int iq4_table[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static float half_at(const unsigned char *p)
{
    return test_half_value((uint16_t)(p[0] | p[1] << 8));
}

static uint32_t u32_at(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static float f32_bits(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Weights and bytes per block of each type. */
static void block_shape(uint32_t type, unsigned *weights, unsigned *bytes)
{
    switch (type) {
    case F32: *weights = 1; *bytes = 4; return;
    case F16: case BF16: *weights = 1; *bytes = 2; return;
    case Q4_0: case IQ4_NL: *weights = 32; *bytes = 2 + 16; return;
    case Q4_1: *weights = 32; *bytes = 4 + 16; return;
    case Q5_0: *weights = 32; *bytes = 2 + 4 + 16; return;
    case Q5_1: *weights = 32; *bytes = 4 + 4 + 16; return;
    case Q8_0: *weights = 32; *bytes = 2 + 32; return;
    case Q4_K: *weights = 256; *bytes = 4 + 12 + 128; return;
    case Q5_K: *weights = 256; *bytes = 4 + 12 + 32 + 128; return;
    case Q6_K: *weights = 256; *bytes = 128 + 64 + 16 + 2; return;
    case IQ4_XS: *weights = 256; *bytes = 2 + 2 + 4 + 128; return;
    default: fail_msg("unexpected ggml type %u", (unsigned)type);
    }
}

/* The 4-bit value of weight j of a 32-weight group whose 16 bytes start at
 * p: the first 16 weights are the low nibbles, the next 16 the high ones. */
static int nibble32(const unsigned char *p, unsigned j)
{
    return j < 16 ? p[j] & 15 : p[j - 16] >> 4;
}

/* 6-bit scale (which 0) or min (which 1) of group g of a Q4_K/Q5_K block's
 * 12 scale bytes: bytes 0-3 scales 0-3, 4-7 mins 0-3 (low 6 bits each);
 * groups 4-7 keep their low 4 bits in bytes 8-11 (scale low nibble, min high
 * nibble) and their top 2 bits in the spare top bits of bytes 0-3 (scales)
 * and 4-7 (mins). */
static unsigned k_field(const unsigned char *s, unsigned g, int which)
{
    if (g < 4)
        return s[g + 4u * (unsigned)which] & 63u;
    return (unsigned)((s[g + 4] >> (4 * which)) & 15) | (unsigned)(s[g - 4 + 4u * (unsigned)which] >> 6) << 4;
}

/* Weight j of a block of a type. */
static float spec_value(uint32_t type, const unsigned char *b, unsigned j)
{
    float d, m, t;
    unsigned g, l;
    int q;
    switch (type) {
    case F32: return f32_bits(u32_at(b));
    case F16: return half_at(b);
    case BF16: return f32_bits((uint32_t)(b[0] | b[1] << 8) << 16);
    case Q4_0: return (float)(nibble32(b + 2, j) - 8) * half_at(b);
    case Q4_1:
        t = (float)nibble32(b + 4, j) * half_at(b);
        return t + half_at(b + 2);
    case Q5_0:
        q = nibble32(b + 6, j) + (int)((u32_at(b + 2) >> j) & 1) * 16;
        return (float)(q - 16) * half_at(b);
    case Q5_1:
        q = nibble32(b + 8, j) + (int)((u32_at(b + 4) >> j) & 1) * 16;
        t = (float)q * half_at(b);
        return t + half_at(b + 2);
    case Q8_0: return (float)(int8_t)b[2 + j] * half_at(b);
    case IQ4_NL: return half_at(b) * (float)iq4_table[nibble32(b + 2, j)];
    case Q4_K:
    case Q5_K: {
        const unsigned char *qs = b + (type == Q4_K ? 16 : 48);
        g = j / 32;
        l = j % 32;
        q = g % 2 ? qs[32 * (g / 2) + l] >> 4 : qs[32 * (g / 2) + l] & 15;
        if (type == Q5_K && (b[16 + l] >> g) & 1)
            q += 16;
        d = half_at(b) * (float)k_field(b + 4, g, 0);
        m = half_at(b + 2) * (float)k_field(b + 4, g, 1);
        t = d * (float)q;
        return t - m;
    }
    case Q6_K: {
        /* Per 128 weights: 64 low-nibble bytes, 32 bytes of 2-bit pairs.
         * Quarter k of a half uses bytes l (k 0, 2) or l + 32 (k 1, 3), low
         * nibbles for k < 2, and bits 2k, 2k + 1 of pair byte l. */
        unsigned half = j / 128, k = j % 128 / 32;
        const unsigned char *low = b + 64 * half, *pairs = b + 128 + 32 * half;
        l = j % 32;
        q = (k < 2 ? low[l + 32 * (k % 2)] & 15 : low[l + 32 * (k % 2)] >> 4) | ((pairs[l] >> (2 * k)) & 3) << 4;
        d = half_at(b + 208) * (float)(int8_t)b[192 + j / 16];
        return d * (float)(q - 32);
    }
    case IQ4_XS: {
        unsigned scales_high = (unsigned)(b[2] | b[3] << 8);
        int ls;
        g = j / 32;
        ls = (int)((b[4 + g / 2] >> (4 * (g % 2))) & 15) | (int)((scales_high >> (2 * g)) & 3) << 4;
        d = half_at(b) * (float)(ls - 32);
        return d * (float)iq4_table[nibble32(b + 8 + 16 * g, j % 32)];
    }
    default: fail_msg("unexpected ggml type %u", (unsigned)type); return 0;
    }
}

/* ---- Hand-built blocks ---- */

static void expect_decoded(uint32_t type, const unsigned char *block, unsigned j, float want)
{
    const pmpd_ggml_type_info *info = pmpd_ggml_type_find(type);
    float out[256];
    assert_non_null(info);
    assert_non_null(info->decode);
    info->decode(block, out);
    if (memcmp(&out[j], &want, 4) != 0)
        fail_msg("%s weight %u: got %a, want %a", info->name, j, (double)out[j], (double)want);
    /* The test's own decoder agrees with the hand-worked value too. */
    assert_true(spec_value(type, block, j) == want);
}

/* f16 bits used below: 1.0 0x3C00, 0.5 0x3800, 0.25 0x3400, 2.0 0x4000,
 * -2.0 0xC000, -1.5 0xBE00, 65504 (largest) 0x7BFF, 2^-24 (smallest) 0x0001,
 * 1/32 0x2800. */
static void put16(unsigned char *p, unsigned bits)
{
    p[0] = (unsigned char)bits;
    p[1] = (unsigned char)(bits >> 8);
}

static void test_hand_blocks_32(void **state)
{
    unsigned char b[64];
    unsigned j;
    (void)state;
    /* All zero: every type gives +0 everywhere (Q4_1: 0 * q + 0). */
    memset(b, 0, sizeof b);
    for (j = 0; j < 32; j++) {
        expect_decoded(Q4_1, b, j, 0.0f);
        expect_decoded(Q5_0, b, j, -0.0f); /* (0 - 16) * +0 */
        expect_decoded(Q5_1, b, j, 0.0f);
    }
    /* Q4_1: d 0.25, m -1.5; weight 3 nibble 5 -> 1.25 - 1.5; weight 19 (high
     * nibble of byte 3) 15 -> 3.75 - 1.5. */
    memset(b, 0, sizeof b);
    put16(b, 0x3400);
    put16(b + 2, 0xBE00);
    b[4 + 3] = 0xF5;
    expect_decoded(Q4_1, b, 3, -0.25f);
    expect_decoded(Q4_1, b, 19, 2.25f);
    expect_decoded(Q4_1, b, 0, -1.5f);
    /* Q5_0: d 0.5; weight 20 = high nibble of byte 4 (9) with fifth bit 20
     * set: 25 - 16 = 9 -> 4.5; weight 4 = low nibble 3, bit 4 clear: -6.5. */
    memset(b, 0, sizeof b);
    put16(b, 0x3800);
    b[2 + 2] = 0x10; /* bit 20 of the u32 at 2 */
    b[6 + 4] = 0x93;
    expect_decoded(Q5_0, b, 20, 4.5f);
    expect_decoded(Q5_0, b, 4, -6.5f);
    /* Q5_1: d 1, m -16; weight 31 = high nibble 15 of byte 15, bit 31 set:
     * 31 - 16 = 15; weight 0: 0 - 16. */
    memset(b, 0, sizeof b);
    put16(b, 0x3C00);
    put16(b + 2, 0xCC00); /* -16 */
    b[4 + 3] = 0x80;
    b[8 + 15] = 0xF0;
    expect_decoded(Q5_1, b, 31, 15.0f);
    expect_decoded(Q5_1, b, 0, -16.0f);
    /* IQ4_NL: d 2; nibble 15 -> 2 * 113, nibble 0 -> 2 * -127, nibble 8 -> 2. */
    memset(b, 0, sizeof b);
    put16(b, 0x4000);
    b[2] = 0x0F;
    b[2 + 1] = 0x08;
    expect_decoded(IQ4_NL, b, 0, 226.0f);
    expect_decoded(IQ4_NL, b, 16, -254.0f);
    expect_decoded(IQ4_NL, b, 1, 2.0f);
    /* Largest f16 scale: Q4_0 nibble 0 -> -8 * 65504; Q8_0 -128 * 65504. */
    memset(b, 0, sizeof b);
    put16(b, 0x7BFF);
    expect_decoded(Q4_0, b, 7, -524032.0f);
    b[2 + 9] = 0x80;
    expect_decoded(Q8_0, b, 9, -8384512.0f);
    /* BF16: 0x3F80 = 1, 0xC2F7 = -123.5, 0x0001 the smallest subnormal 2^-133. */
    put16(b, 0x3F80);
    expect_decoded(BF16, b, 0, 1.0f);
    put16(b, 0xC2F7);
    expect_decoded(BF16, b, 0, -123.5f);
    put16(b, 0x0001);
    expect_decoded(BF16, b, 0, ldexpf(1.0f, -133));
}

static void test_hand_blocks_k(void **state)
{
    unsigned char b[256];
    unsigned j;
    (void)state;
    /* All zero: Q4_K/Q5_K give 0 * q - 0 * m = +0; Q6_K (0 * 0) * -32 = -0. */
    memset(b, 0, sizeof b);
    for (j = 0; j < 256; j += 17) {
        expect_decoded(Q4_K, b, j, 0.0f);
        expect_decoded(Q5_K, b, j, 0.0f);
        expect_decoded(Q6_K, b, j, -0.0f);
        /* IQ4_XS: the group scale 0 * (0 - 32) is -0; times table[0] = -127: +0. */
        expect_decoded(IQ4_XS, b, j, 0.0f);
    }
    /* Q4_K: d 1, dmin 0.5.  Group 0: scale 1, min 0; weight 0 nibble 15 -> 15.
     * Group 5 (high nibbles of bytes 64..95): scale 33 (0b100001), min 63
     * (0b111111): byte 9 = 0xF1, top bits 0b10 on byte 1 and 0b11 on byte 5.
     * Weight 160 + 2 has nibble 7: 33 * 7 - 0.5 * 63 = 199.5.  Group 1 reads
     * byte 1 & 63 = 0 and byte 5 & 63 = 0 despite those top bits: 0. */
    memset(b, 0, sizeof b);
    put16(b, 0x3C00);
    put16(b + 2, 0x3800);
    b[4 + 0] = 1;
    b[4 + 9] = 0xF1;
    b[4 + 1] = 0x80;
    b[4 + 5] = 0xC0;
    b[16 + 0] = 0x0F;
    b[16 + 64 + 2] = 0x70;
    b[16 + 32] = 0xFF; /* group 2 low nibbles, group 3 high: scale 0, min 0 */
    expect_decoded(Q4_K, b, 0, 15.0f);
    expect_decoded(Q4_K, b, 162, 199.5f);
    expect_decoded(Q4_K, b, 161, -31.5f);
    expect_decoded(Q4_K, b, 33, 0.0f);
    expect_decoded(Q4_K, b, 64, 0.0f);
    /* Negative dmin -2, group 3 min 3 (byte 7): weights become 0 + 6. */
    put16(b + 2, 0xC000);
    b[4 + 7] = 3;
    expect_decoded(Q4_K, b, 96 + 5, 6.0f);
    /* Q5_K: the same scales; the fifth bit of weight l of group g is bit g of
     * byte 16 + l.  Group 5 weight 2: nibble 7 + 16 -> 33 * 23 + 2 * 63. */
    memset(b, 0, sizeof b);
    put16(b, 0x3C00);
    put16(b + 2, 0xC000);
    b[4 + 9] = 0xF1;
    b[4 + 1] = 0x80;
    b[4 + 5] = 0xC0;
    b[16 + 2] = 1u << 5;
    b[48 + 64 + 2] = 0x70;
    expect_decoded(Q5_K, b, 162, 885.0f);
    expect_decoded(Q5_K, b, 2, 0.0f);
    /* Q6_K: d 65504 (largest f16), scale of weights 16..31 = -128; weight 16
     * stored 0 (low nibble 0, pair 0) -> 65504 * -128 * -32 = 2^28 - 2^17 =
     * 268304384, exact.  d 2^-24, scale 127: weight 255 (second half,
     * quarter 3, l 31: high nibble of byte 64 + 63, pair bits 6-7 of byte
     * 128 + 63) stored 63 -> 2^-24 * 127 * 31. */
    memset(b, 0, sizeof b);
    put16(b + 208, 0x7BFF);
    b[192 + 1] = 0x80;
    expect_decoded(Q6_K, b, 16, 268304384.0f);
    put16(b + 208, 0x0001);
    b[192 + 15] = 127;
    b[64 + 63] = 0xF0;
    b[128 + 63] = 0xC0;
    expect_decoded(Q6_K, b, 255, ldexpf(127.0f * 31.0f, -24));
    /* Weight 128 + 32 + 4 (second half, quarter 1): low nibble of byte
     * 64 + 36, bits 2-3 of byte 128 + 32 + 4; stored 0x25 = 37 -> 5 * scale. */
    put16(b + 208, 0x3C00);
    b[192 + 10] = (unsigned char)(int8_t)-3;
    b[64 + 36] = 0x05;
    b[128 + 32 + 4] = 0x08;
    expect_decoded(Q6_K, b, 164, -15.0f);
    /* IQ4_XS: d 1/32.  Group 0 scale 0 (stored; -32 applied) -> -1 per
     * table unit: nibble 0 -> 127.  Group 7 scale 63 (low nibble 15 in the
     * high half of byte 4 + 3, top bits 14-15 of the u16 at 2) -> 31/32 per
     * unit: weight 255 (high nibble of its last byte) 15 -> 31/32 * 113. */
    memset(b, 0, sizeof b);
    put16(b, 0x2800);
    b[4 + 3] = 0xF0;
    put16(b + 2, 0xC000);
    b[8 + 16 * 7 + 15] = 0xF0;
    expect_decoded(IQ4_XS, b, 0, 127.0f);
    expect_decoded(IQ4_XS, b, 255, 31.0f / 32.0f * 113.0f);
}

/* ---- Synthetic files ---- */

typedef struct tensor_info {
    char name[64];
    uint32_t n_dims, type;
    uint64_t ne[2];
    const unsigned char *data;
} tensor_info;

typedef struct gguf_file {
    unsigned char *bytes;
    size_t size;
    uint32_t file_type; /* general.file_type */
    uint64_t n_tensors;
    tensor_info tensors[MAX_TENSORS];
} gguf_file;

static uint64_t u64_at(const unsigned char *p)
{
    return u32_at(p) | (uint64_t)u32_at(p + 4) << 32;
}

/* Bytes of a metadata value (the generator writes types 4-9 only). */
static size_t value_size(uint32_t type, const unsigned char *p)
{
    size_t i, n, at;
    switch (type) {
    case 4: case 5: case 6: return 4;
    case 7: return 1;
    case 8: return 8 + (size_t)u64_at(p);
    case 9:
        n = (size_t)u64_at(p + 4);
        for (i = 0, at = 12; i < n; i++)
            at += value_size(u32_at(p), p + at);
        return at;
    default: fail_msg("unexpected metadata type %u", (unsigned)type); return 0;
    }
}

static void gguf_open(const char *path, gguf_file *g)
{
    size_t at = 24, data_start;
    uint64_t i, d, n_kv;
    memset(g, 0, sizeof *g);
    g->bytes = test_read_file(path, &g->size);
    assert_non_null(g->bytes);
    g->n_tensors = u64_at(g->bytes + 8);
    n_kv = u64_at(g->bytes + 16);
    assert_true(g->n_tensors <= MAX_TENSORS && n_kv <= MAX_KEYS);
    for (i = 0; i < n_kv; i++) {
        size_t key_length = (size_t)u64_at(g->bytes + at);
        int is_file_type = key_length == 17 && memcmp(g->bytes + at + 8, "general.file_type", 17) == 0;
        at += 8 + key_length;
        if (is_file_type)
            g->file_type = u32_at(g->bytes + at + 4);
        at += 4 + value_size(u32_at(g->bytes + at), g->bytes + at + 4);
    }
    for (i = 0; i < g->n_tensors; i++) {
        tensor_info *t = &g->tensors[i];
        size_t n = (size_t)u64_at(g->bytes + at);
        assert_true(n < sizeof t->name);
        memcpy(t->name, g->bytes + at + 8, n);
        at += 8 + n;
        t->n_dims = u32_at(g->bytes + at);
        at += 4;
        t->ne[1] = 1;
        for (d = 0; d < t->n_dims; d++, at += 8)
            t->ne[d] = u64_at(g->bytes + at);
        t->type = u32_at(g->bytes + at);
        t->data = (const unsigned char *)(size_t)u64_at(g->bytes + at + 4); /* offset for now */
        at += 12;
    }
    data_start = (at + 31) / 32 * 32;
    for (i = 0; i < g->n_tensors; i++)
        g->tensors[i].data = g->bytes + data_start + (size_t)g->tensors[i].data;
}

static const tensor_info *gguf_tensor(const gguf_file *g, const char *name)
{
    uint64_t i;
    for (i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0)
            return &g->tensors[i];
    fail_msg("no tensor %s", name);
    return NULL;
}

static float element(const tensor_info *t, uint64_t i)
{
    unsigned weights, bytes;
    block_shape(t->type, &weights, &bytes);
    return spec_value(t->type, t->data + i / weights * bytes, (unsigned)(i % weights));
}

#define LAYERS 8

static void generate(const char *path, pmpd_ggml_type type, gguf_file *g)
{
    static char tokenizer[512];
    pmpd_synth_options o;
    pmpd_synth_options_default(&o);
    o.dim = 256;
    o.hidden_dim = 256;
    o.n_layers = LAYERS;
    o.n_heads = 4;
    o.n_kv_heads = 2;
    o.seq_len = 64;
    o.type = type;
    o.tokenizer_path = test_shared_path(tokenizer, sizeof tokenizer, "models/tok512.bin");
    assert_int_equal(pmpd_synth_gguf(path, &o, NULL, NULL), PMPD_OK);
    gguf_open(path, g);
}

/* The type the file must hold for a matrix: the requested type, or under
 * the Q4_K_M mix Q6_K for output.weight and for attn_v / ffn_down of layers
 * 0 (< 8/8), 7 (>= 7*8/8), 3 and 6 ((l - 8/8) % 3 == 2), Q4_K elsewhere. */
static uint32_t expected_type(pmpd_ggml_type requested, const char *name)
{
    static const int more_bits[LAYERS] = {1, 0, 0, 1, 0, 0, 1, 1};
    unsigned layer;
    if (requested != PMPD_GGML_MIX_Q4_K_M)
        return (uint32_t)requested;
    if (strcmp(name, "output.weight") == 0)
        return Q6_K;
    if (sscanf(name, "blk.%u.", &layer) == 1 && (strstr(name, ".attn_v.") || strstr(name, ".ffn_down.")))
        return more_bits[layer] ? Q6_K : Q4_K;
    return Q4_K;
}

/* Largest error allowed against the f32 weights, as a share of the largest
 * |weight| of the block: half a step of the type's grid, widened for the
 * rounding of its scales (quality is not the point: a misplaced bit field
 * gives errors of the order of the weights themselves). */
static double allowed_error(uint32_t type)
{
    switch (type) {
    case BF16: return 1.0 / 256;
    case Q8_0: return 1.0 / 200;
    case Q6_K: return 1.0 / 28; /* the top level clamped: a 32nd, and the int8 scale rounding */
    case Q5_0: case Q5_1: case Q5_K: return 1.0 / 14; /* Q5_0 clamps the top level: a sixteenth */
    case Q4_0: return 1.0 / 7;                           /* likewise, an eighth */
    case Q4_1: case Q4_K: return 1.0 / 9;
    case IQ4_NL: case IQ4_XS: return 1.0 / 6;
    default: fail_msg("no bound for type %u", (unsigned)type); return 0;
    }
}

/* llama.cpp's enum llama_ftype for each file (K types alone are its "_S"). */
static uint32_t expected_file_type(pmpd_ggml_type requested)
{
    switch ((int)requested) {
    case BF16: return 32;
    case Q4_0: return 2;
    case Q4_1: return 3;
    case Q5_0: return 8;
    case Q5_1: return 9;
    case Q8_0: return 7;
    case IQ4_NL: return 25;
    case Q4_K: return 14;
    case Q5_K: return 16;
    case Q6_K: return 18;
    case IQ4_XS: return 30;
    case PMPD_GGML_MIX_Q4_K_M: return 15;
    default: fail_msg("no file type for %d", (int)requested); return 0;
    }
}

static void check_type(pmpd_ggml_type requested, const gguf_file *ref)
{
    gguf_file g;
    pmpd_build_model b;
    pmpd_error err;
    uint64_t i, j;
    generate("build/test_gguf_types.gguf", requested, &g);
    assert_int_equal(g.n_tensors, ref->n_tensors);
    assert_int_equal(g.file_type, expected_file_type(requested));
    pmpd_build_init(&b);
    assert_int_equal(pmpd_import_gguf(g.bytes, g.size, &b, &err), PMPD_OK);
    for (i = 0; i < g.n_tensors; i++) {
        const tensor_info *t = &g.tensors[i], *r = gguf_tensor(ref, t->name);
        const pmpd_build_tensor *got = pmpd_build_find(&b, t->name);
        uint64_t n = t->ne[0] * t->ne[1];
        unsigned weights, bytes;
        assert_non_null(got);
        assert_int_equal(got->size, 4 * n);
        assert_int_equal(t->type, t->n_dims == 1 ? F32 : expected_type(requested, t->name));
        block_shape(t->type, &weights, &bytes);
        for (j = 0; j < n; j++) {
            float want = element(t, j), have;
            memcpy(&have, got->data + 4 * j, 4);
            if (memcmp(&have, &want, 4) != 0)
                fail_msg("%s (type %u) weight %llu: imported %a, decoded here %a", t->name, (unsigned)t->type,
                         (unsigned long long)j, (double)have, (double)want);
        }
        if (t->n_dims == 1)
            continue;
        for (j = 0; j < n; j += weights) {
            double amax = 0;
            uint64_t k;
            for (k = j; k < j + weights; k++)
                amax = fabs((double)element(r, k)) > amax ? fabs((double)element(r, k)) : amax;
            for (k = j; k < j + weights; k++) {
                double e = fabs((double)element(t, k) - element(r, k));
                if (e > amax * allowed_error(t->type))
                    fail_msg("%s (type %u) weight %llu: %g for %g, error %g of block max %g", t->name,
                             (unsigned)t->type, (unsigned long long)k, (double)element(t, k), (double)element(r, k),
                             e, amax);
            }
        }
    }
    pmpd_build_free(&b);
    free(g.bytes);
    remove("build/test_gguf_types.gguf");
}

static void test_synthetic_files(void **state)
{
    static const pmpd_ggml_type types[] = {
        PMPD_GGML_BF16, PMPD_GGML_Q4_0, PMPD_GGML_Q4_1, PMPD_GGML_Q5_0, PMPD_GGML_Q5_1, PMPD_GGML_Q8_0,
        PMPD_GGML_IQ4_NL, PMPD_GGML_Q4_K, PMPD_GGML_Q5_K, PMPD_GGML_Q6_K, PMPD_GGML_IQ4_XS, PMPD_GGML_MIX_Q4_K_M,
    };
    gguf_file ref;
    /* Under sanitizers (PMPD_TEST_REDUCED) every other type, under
     * emulation every sixth: the decoders are plain C, the native run
     * checks them all, and the mix still brings Q4_K and Q6_K. */
    const size_t step = test_emulated() ? 6 : test_reduced() ? 2 : 1;
    size_t k;
    (void)state;
    generate("build/test_gguf_types_f32.gguf", PMPD_GGML_F32, &ref);
    for (k = 0; k < sizeof types / sizeof types[0]; k += step)
        check_type(types[k], &ref);
    if (test_reduced())
        check_type(PMPD_GGML_MIX_Q4_K_M, &ref);
    free(ref.bytes);
    remove("build/test_gguf_types_f32.gguf");
}

/* A K-quant file cut short: the last tensor (output.weight, Q6_K) runs
 * past the end; a row length that is no multiple of 256 is refused. */
static void test_bad_k_files(void **state)
{
    gguf_file g;
    pmpd_build_model b;
    pmpd_error err;
    unsigned char *copy;
    size_t cut = 1;
    (void)state;
    generate("build/test_gguf_types_bad.gguf", PMPD_GGML_MIX_Q4_K_M, &g);
    /* The last tensor's data ends within the file's final 32-byte padding. */
    while (cut < 64) {
        copy = (unsigned char *)malloc(g.size - cut);
        memcpy(copy, g.bytes, g.size - cut);
        pmpd_build_init(&b);
        if (pmpd_import_gguf(copy, g.size - cut, &b, &err) != PMPD_OK) {
            assert_int_equal(err.code, PMPD_ERR_FORMAT_BOUNDS);
            if (!strstr(err.message, "output.weight data") || !strstr(err.message, "past the end"))
                fail_msg("message: %s", err.message);
            pmpd_build_free(&b);
            free(copy);
            break;
        }
        pmpd_build_free(&b);
        free(copy);
        cut++;
    }
    assert_true(cut < 64);
    free(g.bytes);
    remove("build/test_gguf_types_bad.gguf");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_blocks_32),
        cmocka_unit_test(test_hand_blocks_k),
        cmocka_unit_test(test_synthetic_files),
        cmocka_unit_test(test_bad_k_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
