/* Test fixture: a pmpd_model assembled directly from a llama2.c legacy
 * checkpoint, without the container format, so the forward pass can be
 * checked against llama2.c's outputs on its own.  Optionally with f16
 * matrices or a separate (copied) classifier.  Tests only: uses the heap. */
#ifndef TEST_FORWARD_FIXTURE_H
#define TEST_FORWARD_FIXTURE_H

#include <stdlib.h>
#include <string.h>

#include "pmpd.h"
#include "pmpd_impl/model/f16.h"
#include "pmpd_impl/model/model.h"
#include "tests/support/test_support.h"

typedef struct fixture_model {
    pmpd_model model;
    pmpd_tensor *tensors;
    pmpd_layer_weights *layers;
    unsigned char *file;
    void *owned[64];
    int n_owned;
} fixture_model;

static pmpd_tensor *fixture_tensor(fixture_model *f, size_t *next, const float **cursor,
                                   uint64_t rows, uint64_t cols, int as_f16)
{
    pmpd_tensor *t = &f->tensors[(*next)++];
    size_t count = (size_t)(rows * cols), i;
    memset(t, 0, sizeof *t);
    t->n_dims = cols ? 2 : 1;
    t->dims[0] = rows;
    t->dims[1] = cols;
    if (!cols)
        count = (size_t)rows;
    if (as_f16 && cols) {
        uint16_t *h = (uint16_t *)malloc(count * sizeof *h);
        for (i = 0; i < count; i++)
            h[i] = pmpd_f32_to_f16((*cursor)[i]);
        f->owned[f->n_owned++] = h;
        t->type = PMPD_TENSOR_F16;
        t->data = h;
        t->size = count * 2;
    } else {
        t->type = PMPD_TENSOR_F32;
        t->data = *cursor;
        t->size = count * 4;
    }
    *cursor += count;
    return t;
}

/* Loads models/<name> (legacy llama2.c format).  NULL if the file is missing. */
static fixture_model *fixture_load(const char *name, int f16, int separate_classifier)
{
    char path[512], relative[256];
    fixture_model *f = (fixture_model *)calloc(1, sizeof *f);
    pmpd_model_info *info = &f->model.info;
    int32_t header[7];
    size_t size, next = 0;
    const float *base, *cursor;
    uint32_t l, kv_dim, hidden, dim;
    snprintf(relative, sizeof relative, "models/%s", name);
    f->file = test_read_file(test_shared_path(path, sizeof path, relative), &size);
    if (!f->file) {
        free(f);
        return NULL;
    }
    memcpy(header, f->file, sizeof header);
    info->dim = dim = (uint32_t)header[0];
    info->hidden_dim = hidden = (uint32_t)header[1];
    info->n_layers = (uint32_t)header[2];
    info->n_heads = (uint32_t)header[3];
    info->n_kv_heads = (uint32_t)header[4];
    info->vocab_size = (uint32_t)abs(header[5]);
    info->seq_len = (uint32_t)header[6];
    info->head_dim = dim / info->n_heads;
    info->rope_theta = 10000.0f;
    info->norm_eps = 1e-5f;
    info->shared_classifier = header[5] > 0 && !separate_classifier;
    info->bos_id = 1;
    info->eos_id = 2;
    kv_dim = info->n_kv_heads * info->head_dim;

    f->tensors = (pmpd_tensor *)calloc(4 + 9 * info->n_layers, sizeof(pmpd_tensor));
    f->layers = (pmpd_layer_weights *)calloc(info->n_layers, sizeof(pmpd_layer_weights));
    f->model.tensors = f->tensors;
    f->model.layers = f->layers;
    base = (const float *)(const void *)(f->file + sizeof header);
    cursor = base;
    f->model.tok_embedding = fixture_tensor(f, &next, &cursor, info->vocab_size, dim, f16);
    /* llama2.c stores each kind of weight for all layers together. */
#define FIXTURE_PER_LAYER(field, rows, cols)                                                  \
    for (l = 0; l < info->n_layers; l++)                                                      \
        f->layers[l].field = fixture_tensor(f, &next, &cursor, rows, cols, f16);
    FIXTURE_PER_LAYER(attn_norm, dim, 0)
    FIXTURE_PER_LAYER(wq, dim, dim)
    FIXTURE_PER_LAYER(wk, kv_dim, dim)
    FIXTURE_PER_LAYER(wv, kv_dim, dim)
    FIXTURE_PER_LAYER(wo, dim, dim)
    FIXTURE_PER_LAYER(ffn_norm, dim, 0)
    FIXTURE_PER_LAYER(w_gate, hidden, dim)
    FIXTURE_PER_LAYER(w_down, dim, hidden)
    FIXTURE_PER_LAYER(w_up, hidden, dim)
#undef FIXTURE_PER_LAYER
    f->model.final_norm = fixture_tensor(f, &next, &cursor, dim, 0, f16);
    cursor += info->seq_len * info->head_dim; /* the stored RoPE tables */
    if (header[5] < 0) {
        f->model.classifier = fixture_tensor(f, &next, &cursor, info->vocab_size, dim, f16);
    } else if (separate_classifier) {
        cursor = base;
        f->model.classifier = fixture_tensor(f, &next, &cursor, info->vocab_size, dim, f16);
    } else {
        f->model.classifier = f->model.tok_embedding;
    }
    f->model.n_tensors = (uint32_t)next;
    return f;
}

static void fixture_free(fixture_model *f)
{
    int i;
    if (!f)
        return;
    for (i = 0; i < f->n_owned; i++)
        free(f->owned[i]);
    free(f->tensors);
    free(f->layers);
    free(f->file);
    free(f);
}

#endif
