/* The PQ KV-codebook section parser.  The first input byte picks the
 * model's layer count (1-4), the section's own head_dim field is taken as
 * the model's (up to 64) so that the size and value rules are reached, and
 * the rest is the section.  Whatever the parser accepts is used: the last
 * layer's codebooks drive a small PQ cache through window flushes (batch
 * encoding) and attention over codes and window. */
#include <stdint.h>
#include <string.h>

#include "pmpd_impl/kvcache/pq_cache.h"
#include "pmpd_impl/kvcache/pq_codebook_set.h"

#define FUZZ_KV_MAX_INPUT (1u << 20)
#define FUZZ_KV_MAX_HEAD_DIM 64u
#define FUZZ_KV_TOKENS 7u
#define FUZZ_KV_HEADS 2u

static unsigned char fuzz_kv_input[FUZZ_KV_MAX_INPUT + 64];
static unsigned char fuzz_kv_arena[1u << 16];
static float fuzz_kv_scratch[1u << 17];
static float fuzz_kv_token[2][FUZZ_KV_MAX_HEAD_DIM];
static float fuzz_kv_query[2 * FUZZ_KV_HEADS][FUZZ_KV_MAX_HEAD_DIM];

static void fuzz_kv_use(const pmpd_pq_codebook_set *set, uint32_t n_layers)
{
    pmpd_pq_codebook keys, values;
    pmpd_pq_cache cache;
    pmpd_arena arena;
    size_t floats, t;
    uint32_t d;
    pmpd_pq_codebook_set_layer(set, n_layers - 1, &keys, &values);
    pmpd_arena_init(&arena, fuzz_kv_arena, sizeof fuzz_kv_arena);
    if (pmpd_pq_cache_init(&cache, &keys, &values, 1, FUZZ_KV_TOKENS, 2, &arena) != PMPD_OK ||
        pmpd_pq_attention_scratch_floats(&cache, FUZZ_KV_HEADS, &floats) != PMPD_OK ||
        floats > sizeof fuzz_kv_scratch / sizeof fuzz_kv_scratch[0])
        return;
    for (t = 0; t < FUZZ_KV_TOKENS; t++) {
        for (d = 0; d < keys.layout.dim; d++) {
            fuzz_kv_token[0][d] = (float)((t * 7 + d) % 11) - 5.0f;
            fuzz_kv_token[1][d] = (float)((t * 3 + d) % 5) - 2.0f;
        }
        if (pmpd_pq_cache_append(&cache, fuzz_kv_token[0], fuzz_kv_token[1]) != PMPD_OK)
            return;
        pmpd_pq_cache_attend(&cache, &fuzz_kv_query[0][0], FUZZ_KV_HEADS, t + 1, &fuzz_kv_query[FUZZ_KV_HEADS][0],
                             fuzz_kv_scratch);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *aligned = fuzz_kv_input + (64 - (uintptr_t)fuzz_kv_input % 64) % 64;
    pmpd_pq_codebook_set set;
    pmpd_error err;
    uint32_t n_layers, head_dim, i;
    if (size < 1 || size - 1 > FUZZ_KV_MAX_INPUT)
        return 0;
    memcpy(aligned, data + 1, size - 1);
    n_layers = 1u + data[0] % 4u;
    head_dim = size >= 5 ? (uint32_t)data[1] | (uint32_t)data[2] << 8 | (uint32_t)data[3] << 16 |
                               (uint32_t)data[4] << 24
                         : 8u;
    if (head_dim == 0 || head_dim > FUZZ_KV_MAX_HEAD_DIM)
        head_dim = 8;
    for (i = 0; i < FUZZ_KV_MAX_HEAD_DIM; i++)
        fuzz_kv_query[0][i] = fuzz_kv_query[1][i] = (float)(i % 3) - 1.0f;
    if (pmpd_pq_codebook_set_parse(aligned, size - 1, head_dim, n_layers, &set, &err) == PMPD_OK)
        fuzz_kv_use(&set, n_layers);
    return 0;
}
