/* Reading back what a KV cache stores (pmpd_kv_cache_read, which the
 * learned precision scheduler uses for its prompt features), in every mode,
 * against oracles computed here: f32 exactly; f16 within half a unit in the
 * last place; int8/int4 within half a quantization step of the row's
 * min-max range; PQ as the nearest centroid per subspace found by brute
 * force for the tokens already coded, and exactly for the recent window. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd.h"
#include "pmpd_impl/model/kv_cache.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

#define KVR_POSITIONS 43 /* several window flushes, and a part-full window */
#define KVR_BITS 4       /* packed codes: two per byte */
#define KVR_KEY_SUB 2
#define KVR_VALUE_SUB 4

typedef struct kvr_fixture {
    test_container container;
    void *arena_block;
    pmpd_arena arena;
    pmpd_model *model;
    float *centroids; /* per layer: key book, then value book */
    size_t key_floats, value_floats;
    float *k, *v;     /* written: [position][kv_dim] per layer, layer-major */
} kvr_fixture;

static int kvr_setup(void **state)
{
    kvr_fixture *f = (kvr_fixture *)calloc(1, sizeof *f);
    pmpd_build_model b;
    const pmpd_model_info *info;
    size_t arena_bytes = (size_t)8 << 20, size, i, count;
    uint32_t n_layers, head_dim;
    unsigned char *section;
    pmpd_error err;
    test_rng rng;
    assert_non_null(f);
    assert_int_equal(test_import_shared("models/stories260K.bin", "models/tok512.bin", &b), PMPD_OK);
    /* stories260K: 5 layers, 4 KV heads of 8 dims. */
    n_layers = 5;
    head_dim = 8;
    f->key_floats = (size_t)(head_dim / KVR_KEY_SUB) * (1u << KVR_BITS) * KVR_KEY_SUB;
    f->value_floats = (size_t)(head_dim / KVR_VALUE_SUB) * (1u << KVR_BITS) * KVR_VALUE_SUB;
    count = n_layers * (f->key_floats + f->value_floats);
    f->centroids = (float *)malloc(count * sizeof(float));
    assert_non_null(f->centroids);
    test_rng_seed(&rng, 7);
    for (i = 0; i < count; i++)
        f->centroids[i] = test_rng_normal(&rng);
    assert_int_equal(pmpd_pq_section_write(head_dim, KVR_KEY_SUB, KVR_VALUE_SUB, KVR_BITS, n_layers, f->centroids,
                                           NULL, 0, &size),
                     PMPD_OK);
    section = (unsigned char *)malloc(size);
    assert_non_null(section);
    assert_int_equal(pmpd_pq_section_write(head_dim, KVR_KEY_SUB, KVR_VALUE_SUB, KVR_BITS, n_layers, f->centroids,
                                           section, size, &size),
                     PMPD_OK);
    assert_int_equal(pmpd_build_add_section(&b, PMPD_SECTION_KV_CODEBOOKS, 1, 0, section, size), PMPD_OK);
    free(section);
    assert_int_equal(test_serialize(&b, &f->container), PMPD_OK);
    pmpd_build_free(&b);
    f->arena_block = malloc(arena_bytes);
    assert_non_null(f->arena_block);
    assert_int_equal(pmpd_arena_init(&f->arena, f->arena_block, arena_bytes), PMPD_OK);
    assert_int_equal(pmpd_model_open_memory(f->container.data, f->container.size, &f->arena, &f->model, &err),
                     PMPD_OK);
    info = pmpd_model_get_info(f->model);
    assert_int_equal(info->n_layers, n_layers);
    assert_int_equal(info->head_dim, head_dim);
    count = (size_t)n_layers * KVR_POSITIONS * info->n_kv_heads * head_dim;
    f->k = (float *)malloc(count * sizeof(float));
    f->v = (float *)malloc(count * sizeof(float));
    assert_non_null(f->k);
    assert_non_null(f->v);
    for (i = 0; i < count; i++) {
        f->k[i] = 2.0f * test_rng_normal(&rng);
        f->v[i] = test_rng_normal(&rng);
    }
    *state = f;
    return 0;
}

static int kvr_teardown(void **state)
{
    kvr_fixture *f = (kvr_fixture *)*state;
    pmpd_model_close(f->model);
    test_container_free(&f->container);
    free(f->arena_block);
    free(f->centroids);
    free(f->k);
    free(f->v);
    free(f);
    return 0;
}

/* A cache of `type` holding every written position: prefill-sized chunks,
 * then single tokens, as sessions write them. */
static void kvr_fill(kvr_fixture *f, uint32_t type, pmpd_kv_cache *cache)
{
    const pmpd_model_info *info = pmpd_model_get_info(f->model);
    size_t kv_dim = (size_t)info->n_kv_heads * info->head_dim, pos = 0;
    uint32_t layer;
    assert_int_equal(pmpd_kv_cache_init(cache, &f->arena, type, info->n_layers, info->n_kv_heads, info->head_dim,
                                        KVR_POSITIONS, f->model, 0),
                     PMPD_OK);
    while (pos < KVR_POSITIONS) {
        size_t n = pos == 0 ? 13 : 1;
        for (layer = 0; layer < info->n_layers; layer++) {
            size_t at = ((size_t)layer * KVR_POSITIONS + pos) * kv_dim;
            pmpd_kv_cache_write(cache, layer, pos, n, f->k + at, f->v + at);
        }
        pos += n;
    }
}

/* The centroid nearest to x (dim floats) per subspace, lowest index on ties. */
static void kvr_nearest(const float *book, uint32_t dim, uint32_t sub_dim, const float *x, float *out)
{
    uint32_t s, c, j, n_centroids = 1u << KVR_BITS;
    for (s = 0; s < dim / sub_dim; s++) {
        const float *best = NULL;
        double best_distance = 0.0;
        for (c = 0; c < n_centroids; c++) {
            const float *centroid = book + ((size_t)s * n_centroids + c) * sub_dim;
            double distance = 0.0;
            for (j = 0; j < sub_dim; j++) {
                double d = (double)x[s * sub_dim + j] - centroid[j];
                distance += d * d;
            }
            if (!best || distance < best_distance) {
                best = centroid;
                best_distance = distance;
            }
        }
        memcpy(out + s * sub_dim, best, sub_dim * sizeof(float));
    }
}

/* Largest allowed |read - written| for one element of the row x. */
static double kvr_bound(uint32_t type, const float *x, uint32_t dim, float element)
{
    float lo = x[0], hi = x[0];
    uint32_t i;
    for (i = 1; i < dim; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    switch (type) {
    case PMPD_KV_F32: return 0.0;
    case PMPD_KV_F16: return fabs(element) / 2048.0 + 1e-7;
    case PMPD_KV_INT8: return 0.5 * (hi - lo) / 255.0 * 1.001 + 1e-6;
    default: return 0.5 * (hi - lo) / 15.0 * 1.001 + 1e-6;
    }
}

static void kvr_check_rows(uint32_t type, const float *written, const float *read, uint32_t dim)
{
    uint32_t i;
    for (i = 0; i < dim; i++)
        assert_true(fabs((double)read[i] - written[i]) <= kvr_bound(type, written, dim, written[i]));
}

static void kvr_check_mode(void **state, uint32_t type)
{
    kvr_fixture *f = (kvr_fixture *)*state;
    const pmpd_model_info *info = pmpd_model_get_info(f->model);
    size_t kv_dim = (size_t)info->n_kv_heads * info->head_dim, pos;
    size_t window = info->head_dim, n_recent = (KVR_POSITIONS - 1) % window + 1;
    pmpd_arena_mark mark = pmpd_arena_save(&f->arena);
    pmpd_kv_cache cache;
    uint32_t layer, head;
    float key[64], value[64], want_key[64], want_value[64];
    kvr_fill(f, type, &cache);
    for (layer = 0; layer < info->n_layers; layer++) {
        const float *key_book = f->centroids + layer * (f->key_floats + f->value_floats);
        const float *value_book = key_book + f->key_floats;
        for (pos = 0; pos < KVR_POSITIONS; pos++) {
            for (head = 0; head < info->n_kv_heads; head++) {
                size_t at = ((size_t)layer * KVR_POSITIONS + pos) * kv_dim + (size_t)head * info->head_dim;
                pmpd_kv_cache_read(&cache, layer, pos, head, key, value);
                if (type == PMPD_KV_PQ && pos < KVR_POSITIONS - n_recent) {
                    kvr_nearest(key_book, info->head_dim, KVR_KEY_SUB, f->k + at, want_key);
                    kvr_nearest(value_book, info->head_dim, KVR_VALUE_SUB, f->v + at, want_value);
                    assert_memory_equal(key, want_key, info->head_dim * sizeof(float));
                    assert_memory_equal(value, want_value, info->head_dim * sizeof(float));
                } else {
                    uint32_t exact = type == PMPD_KV_PQ ? PMPD_KV_F32 : type;
                    kvr_check_rows(exact, f->k + at, key, info->head_dim);
                    kvr_check_rows(exact, f->v + at, value, info->head_dim);
                }
            }
        }
    }
    pmpd_arena_restore(&f->arena, mark);
}

static void test_read_f32(void **state) { kvr_check_mode(state, PMPD_KV_F32); }
static void test_read_f16(void **state) { kvr_check_mode(state, PMPD_KV_F16); }
static void test_read_int8(void **state) { kvr_check_mode(state, PMPD_KV_INT8); }
static void test_read_int4(void **state) { kvr_check_mode(state, PMPD_KV_INT4); }
static void test_read_pq(void **state) { kvr_check_mode(state, PMPD_KV_PQ); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_f32),  cmocka_unit_test(test_read_f16), cmocka_unit_test(test_read_int8),
        cmocka_unit_test(test_read_int4), cmocka_unit_test(test_read_pq),
    };
    return cmocka_run_group_tests(tests, kvr_setup, kvr_teardown);
}
