/*
 * Calibration of the PQ KV cache (offline, heap): the float model writes
 * its own calibration text (sampled at temperature 1 from BOS with fixed
 * seeds), its f32 KV cache gives the post-rotary keys and the values, and
 * k-means turns them into the codebook section; a container can then be
 * rewritten with that section added.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd.h"
#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/core/error.h"
#include "pmpd_impl/kvcache/pq_codebook_set.h"
#include "pmpd_impl/model/session.h"
#include "pmpd_impl/offline/format/from_model.h"

/* Enough vectors for 256 centroids per subspace, few enough for minutes. */
#define PQ_CALIBRATE_MAX_VECTORS 65536u

void pmpd_pq_calibration_options_init(pmpd_pq_calibration_options *options)
{
    memset(options, 0, sizeof *options);
    options->key_sub_dim = 2;
    options->value_sub_dim = 2;
    options->per_layer = 1;
    options->n_sequences = 8;
    options->sequence_length = 256;
    options->iterations = 20;
    options->seed = 1;
    options->bits = 8;
}

/* Runs n_sequences sampled texts through an f32 session and copies their
 * keys and values: out_* are [layer][sequence][position][kv_dim]. */
static pmpd_status pq_calibrate_collect(const pmpd_model *model, const pmpd_pq_calibration_options *o, uint32_t length,
                                        float *out_keys, float *out_values)
{
    const pmpd_model_info *info = &model->info;
    size_t kv_dim = (size_t)info->n_kv_heads * info->head_dim, per_sequence = (size_t)length * kv_dim;
    pmpd_session_config config;
    pmpd_sampler_config sampling;
    pmpd_sampler sampler;
    pmpd_session *session = NULL;
    pmpd_arena arena;
    size_t session_bytes, sampler_bytes, layer;
    void *block;
    uint32_t seq, pos;
    pmpd_status st;
    pmpd_session_config_init(&config);
    config.context_length = length;
    config.kv_type = PMPD_KV_F32;
    sampling.temperature = 1.0f;
    sampling.top_k = 0;
    sampling.top_p = 1.0f;
    if ((st = pmpd_session_plan(model, &config, &session_bytes)) != PMPD_OK ||
        (st = pmpd_sampler_plan(info->vocab_size, &sampler_bytes)) != PMPD_OK)
        return st;
    block = malloc(session_bytes + sampler_bytes + PMPD_ARENA_ALIGNMENT);
    if (!block)
        return PMPD_ERR_OUT_OF_MEMORY;
    pmpd_arena_init(&arena, block, session_bytes + sampler_bytes + PMPD_ARENA_ALIGNMENT);
    if ((st = pmpd_session_create(model, &config, &arena, &session)) == PMPD_OK)
        st = pmpd_sampler_init(&sampler, &sampling, info->vocab_size, &arena);
    for (seq = 0; st == PMPD_OK && seq < o->n_sequences; seq++) {
        const float *logits;
        int32_t token = (int32_t)info->bos_id;
        pmpd_rng rng;
        pmpd_rng_seed(&rng, o->seed + seq);
        st = pmpd_session_reset(session);
        if (st == PMPD_OK)
            st = pmpd_session_prefill(session, &token, 1, &logits);
        for (pos = 1; st == PMPD_OK && pos < length; pos++)
            if ((st = pmpd_sampler_sample(&sampler, logits, &rng, &token)) == PMPD_OK)
                st = pmpd_session_decode(session, token, &logits);
        for (layer = 0; st == PMPD_OK && layer < info->n_layers; layer++) {
            size_t to = (layer * o->n_sequences + seq) * per_sequence;
            pmpd_kv_cache_read_layer(&session->kv, (uint32_t)layer, length, out_keys + to, out_values + to);
        }
    }
    pmpd_session_destroy(session);
    free(block);
    return st;
}

/* Every stride-th head vector of [first, first + count), so one codebook
 * trains on at most PQ_CALIBRATE_MAX_VECTORS evenly spread vectors. */
static size_t pq_calibrate_subsample(const float *vectors, size_t count, uint32_t dim, float *out)
{
    size_t stride = (count + PQ_CALIBRATE_MAX_VECTORS - 1) / PQ_CALIBRATE_MAX_VECTORS, i, n = 0;
    for (i = 0; i < count; i += stride, n++)
        memcpy(out + n * dim, vectors + i * dim, dim * sizeof(float));
    return n;
}

pmpd_status pmpd_pq_calibrate(const pmpd_model *model, const pmpd_pq_calibration_options *options, void **section,
                              size_t *size)
{
    const pmpd_model_info *info;
    uint32_t length, books, b;
    size_t per_layer, collected, book_floats_k, book_floats_v, samples, bytes;
    float *keys = NULL, *values = NULL, *train = NULL, *centroids = NULL;
    pmpd_status st = PMPD_OK;
    if (!model || !options || !section || !size || options->n_sequences == 0 || options->sequence_length < 2)
        return PMPD_ERR_INVALID_ARGUMENT;
    *section = NULL;
    *size = 0;
    info = &model->info;
    length = options->sequence_length < info->seq_len ? options->sequence_length : info->seq_len;
    books = options->per_layer ? info->n_layers : 1;
    if (options->bits < 1 || options->bits > 8)
        return PMPD_ERR_INVALID_ARGUMENT;
    book_floats_k = (size_t)info->head_dim << options->bits;
    book_floats_v = book_floats_k;
    if (!pmpd_checked_mul3((size_t)options->n_sequences * length, info->n_kv_heads, info->head_dim, &per_layer) ||
        !pmpd_checked_mul(per_layer, info->n_layers, &collected) ||
        !pmpd_checked_mul(collected, sizeof(float), &bytes))
        return PMPD_ERR_OVERFLOW;
    keys = (float *)malloc(bytes);
    values = (float *)malloc(bytes);
    train = (float *)malloc((size_t)PQ_CALIBRATE_MAX_VECTORS * info->head_dim * sizeof(float));
    centroids = (float *)malloc((book_floats_k + book_floats_v) * books * sizeof(float));
    if (!keys || !values || !train || !centroids)
        st = PMPD_ERR_OUT_OF_MEMORY;
    if (st == PMPD_OK)
        st = pq_calibrate_collect(model, options, length, keys, values);
    for (b = 0; st == PMPD_OK && b < books; b++) {
        /* A shared book trains on every layer's vectors, a layer's on its own. */
        size_t first = options->per_layer ? (size_t)b * per_layer : 0;
        size_t count = (options->per_layer ? per_layer : collected) / info->head_dim;
        float *book = centroids + (size_t)b * (book_floats_k + book_floats_v);
        samples = pq_calibrate_subsample(keys + first, count, info->head_dim, train);
        st = pmpd_pq_train_codebook(train, samples, info->head_dim, options->key_sub_dim, options->bits,
                                    options->iterations, options->seed * 2 + b, book);
        if (st == PMPD_OK) {
            samples = pq_calibrate_subsample(values + first, count, info->head_dim, train);
            st = pmpd_pq_train_codebook(train, samples, info->head_dim, options->value_sub_dim, options->bits,
                                        options->iterations, options->seed * 2 + 1 + b, book + book_floats_k);
        }
    }
    if (st == PMPD_OK)
        st = pmpd_pq_section_write(info->head_dim, options->key_sub_dim, options->value_sub_dim, options->bits, books,
                                   centroids, NULL, 0, size);
    if (st == PMPD_OK && !(*section = malloc(*size)))
        st = PMPD_ERR_OUT_OF_MEMORY;
    if (st == PMPD_OK)
        st = pmpd_pq_section_write(info->head_dim, options->key_sub_dim, options->value_sub_dim, options->bits, books,
                                   centroids, *section, *size, size);
    if (st != PMPD_OK) {
        free(*section);
        *section = NULL;
        *size = 0;
    }
    free(keys);
    free(values);
    free(train);
    free(centroids);
    return st;
}

/* The container again, every tensor and section copied, the codebook
 * section replaced by the new one, checked by the runtime loader and
 * written to OUT.tmp and renamed, so a failure leaves nothing behind.  err
 * names what failed. */
static pmpd_status pq_calibrate_rebuild(const pmpd_model *model, const void *section, size_t size, const char *out_path,
                                        pmpd_error *err)
{
    pmpd_build_model b;
    pmpd_build_opened copy;
    pmpd_status st = pmpd_build_from_model(model, PMPD_BUILD_DROP(PMPD_SECTION_KV_CODEBOOKS), &b, err);
    memset(&copy, 0, sizeof copy);
    if (st != PMPD_OK)
        return st;
    st = pmpd_build_add_section(&b, PMPD_SECTION_KV_CODEBOOKS, PMPD_PQ_SECTION_VERSION, 0, section, size);
    if (st != PMPD_OK)
        pmpd_error_set(err, st, PMPD_NO_OFFSET, "cannot add the codebook section");
    if (st == PMPD_OK)
        st = pmpd_build_open(&b, &copy, err);
    if (st == PMPD_OK)
        st = pmpd_build_opened_write(&copy, out_path, err);
    pmpd_build_close(&copy);
    pmpd_build_free(&b);
    return st;
}

pmpd_status pmpd_pq_calibrate_file(const char *in_path, const char *out_path,
                                   const pmpd_pq_calibration_options *options, pmpd_error *err)
{
    pmpd_arena arena;
    pmpd_model *model = NULL;
    void *arena_block, *section = NULL;
    size_t section_size = 0, arena_bytes = (size_t)64 << 20;
    pmpd_status st;
    if (!in_path || !out_path || !options)
        return PMPD_ERR_INVALID_ARGUMENT;
    arena_block = malloc(arena_bytes);
    if (!arena_block)
        return PMPD_ERR_OUT_OF_MEMORY;
    pmpd_arena_init(&arena, arena_block, arena_bytes);
    st = pmpd_model_open_file(in_path, &arena, &model, err);
    if (st == PMPD_OK && (st = pmpd_pq_calibrate(model, options, &section, &section_size)) != PMPD_OK)
        pmpd_error_set(err, st, PMPD_NO_OFFSET,
                       st == PMPD_ERR_INVALID_ARGUMENT ? "calibration options out of range (bits 1-8, sequences >= 1, "
                                                         "length >= 2)"
                                                       : "sampling the calibration texts or training failed");
    if (st == PMPD_OK)
        st = pq_calibrate_rebuild(model, section, section_size, out_path, err);
    if (model)
        pmpd_model_close(model);
    free(section);
    free(arena_block);
    return st;
}

#undef PQ_CALIBRATE_MAX_VECTORS
