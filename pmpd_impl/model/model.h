/*
 * The in-memory model: what the container loader produces and the rest of
 * the runtime reads.  After a successful open every field here has been
 * validated (shapes agree with the hyperparameters, data lies inside the
 * container and is 64-byte aligned, norms are finite), so no later code
 * re-checks.  All arrays live in the arena given to the open call; tensor
 * data points into the container bytes (zero-copy).
 *
 * Matrices are row-major with dims[0] = rows = output features and
 * dims[1] = cols = input features (y = W x, y[r] = sum_c W[r][c] x[c]);
 * for quantized types the byte layout of a row is the type's own.
 */
#ifndef PMPD_MODEL_MODEL_H
#define PMPD_MODEL_MODEL_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "platform/platform.h"
#include "pmpd_impl/tokenizer/tokenizer.h"

#define PMPD_TENSOR_MAX_DIMS 4

typedef struct pmpd_tensor {
    const char *name;       /* not NUL-terminated inside the file: use name_length */
    uint32_t name_length;
    uint32_t type;          /* pmpd_tensor_type */
    uint32_t n_dims;
    uint64_t dims[PMPD_TENSOR_MAX_DIMS];
    const void *data;       /* aligned to 64 bytes */
    uint64_t size;          /* bytes */
} pmpd_tensor;

/* A typed, versioned blob (tokenizer, schedules, codebooks, ...). */
typedef struct pmpd_section {
    uint32_t kind;          /* pmpd_section_kind */
    uint32_t version;
    uint32_t flags;
    const void *data;
    uint64_t size;
} pmpd_section;

typedef struct pmpd_layer_weights {
    const pmpd_tensor *attn_norm;  /* [dim] f32 */
    const pmpd_tensor *wq;         /* [n_heads*head_dim][dim] */
    const pmpd_tensor *wk;         /* [n_kv_heads*head_dim][dim] */
    const pmpd_tensor *wv;         /* [n_kv_heads*head_dim][dim] */
    const pmpd_tensor *wo;         /* [dim][n_heads*head_dim] */
    const pmpd_tensor *ffn_norm;   /* [dim] f32 */
    const pmpd_tensor *w_gate;     /* [hidden][dim]  (llama2.c w1) */
    const pmpd_tensor *w_down;     /* [dim][hidden]  (llama2.c w2) */
    const pmpd_tensor *w_up;       /* [hidden][dim]  (llama2.c w3) */
    /* Optional (PMPD_MODEL_QKV_BIAS), NULL otherwise; they stay last: the
     * loader counts the required slots above. */
    const pmpd_tensor *bq;         /* [n_heads*head_dim] f32 */
    const pmpd_tensor *bk;         /* [n_kv_heads*head_dim] f32 */
    const pmpd_tensor *bv;         /* [n_kv_heads*head_dim] f32 */
} pmpd_layer_weights;

struct pmpd_model {
    pmpd_model_info info;
    const unsigned char *bytes;    /* the whole container */
    size_t byte_count;
    pmpd_mapped_file mapping;      /* set when the loader mapped a file */
    uint32_t n_tensors;
    pmpd_tensor *tensors;
    uint32_t n_sections;
    pmpd_section *sections;
    const pmpd_tensor *tok_embedding;  /* [vocab][dim] */
    const pmpd_tensor *final_norm;     /* [dim] f32 */
    const pmpd_tensor *classifier;     /* [vocab][dim]; == tok_embedding when shared */
    pmpd_layer_weights *layers;        /* n_layers entries */
    const pmpd_tensor *rope_freqs;     /* [head_dim/2] f32 > 0 (PMPD_MODEL_ROPE_FREQS), or NULL */
    pmpd_tokenizer tokenizer;          /* n_tokens == 0 when the container has none */
    const char *chat_template;         /* validated UTF-8, not NUL-terminated; NULL when absent */
    uint32_t chat_template_length;
};

#endif
