/* The parts of the synthetic GGUF generator (offline): the tensor plan,
 * the weight stream, ggml's block encodings and a streaming GGUF writer. */
#ifndef PMPD_OFFLINE_SYNTH_SYNTH_H
#define PMPD_OFFLINE_SYNTH_SYNTH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/offline/format/builder.h"

#if PMPD_OFFLINE

#define PMPD_SYNTH_ALIGNMENT 32u
#define PMPD_SYNTH_STD 0.02f

/* ---- ggml_blocks.c: llama.cpp's row encodings ---- */

/* Weights per block of a ggml type (1 for F32 and F16). */
PMPD_INTERNAL uint32_t pmpd_ggml_block_size(pmpd_ggml_type type);

/* Bytes of a row of n weights (n a multiple of the block size). */
PMPD_INTERNAL uint64_t pmpd_ggml_row_bytes(pmpd_ggml_type type, uint64_t n);

/* Encodes n floats as type into out (pmpd_ggml_row_bytes bytes). */
PMPD_INTERNAL void pmpd_ggml_encode_row(pmpd_ggml_type type, const float *x, size_t n, unsigned char *out);

/* Helpers the block encoders share. */
/* Stores f as little-endian f16 at p; returns the value decoding will see. */
PMPD_INTERNAL float pmpd_ggml_put_half(unsigned char *p, float f);
/* The weight of largest magnitude among n, with its sign (the first on ties). */
PMPD_INTERNAL float pmpd_ggml_signed_max(const float *x, int n);
/* round(x / step) clamped to lo..hi (0 clamped when step is 0). */
PMPD_INTERNAL int pmpd_ggml_level(float x, float step, int lo, int hi);
/* Index of IQ4_NL's table entry nearest x. */
PMPD_INTERNAL int pmpd_ggml_nearest_iq4(float x);

/* ---- ggml_kblocks.c: one 256-weight super-block each ---- */
PMPD_INTERNAL void pmpd_ggml_q4_k_block(const float *x, unsigned char *out);
PMPD_INTERNAL void pmpd_ggml_q5_k_block(const float *x, unsigned char *out);
PMPD_INTERNAL void pmpd_ggml_q6_k_block(const float *x, unsigned char *out);
PMPD_INTERNAL void pmpd_ggml_iq4_xs_block(const float *x, unsigned char *out);

/* ---- tensor_types.c: which type each matrix gets ---- */

/* The type of matrix `name` (layer `layer` of n_layers; ignored for
 * tensors outside the layers) under the requested type or mix; tied: no
 * output.weight, the embedding is the classifier. */
PMPD_INTERNAL pmpd_ggml_type pmpd_synth_matrix_type(pmpd_ggml_type requested, const char *name, uint32_t layer,
                                                    uint32_t n_layers, int tied);
/* The ggml name of a type or mix ("Q4_K", "Q4_K_M"); NULL if neither. */
PMPD_INTERNAL const char *pmpd_synth_type_name(pmpd_ggml_type type);

/* ---- normal.c: the weight stream ---- */

/* The generator state of tensor `index` under `seed`: each tensor draws
 * from its own stream, so leaving out one (--tied) changes no other. */
PMPD_INTERNAL uint64_t pmpd_synth_stream(uint64_t seed, uint32_t index);

/* Fills out with n draws from normal(0, std), advancing *state. */
PMPD_INTERNAL void pmpd_synth_normal(uint64_t *state, float std, float *out, size_t n);

/* ---- plan.c: which tensors, in which order, where ---- */

/* What a tensor's values are. */
typedef enum pmpd_synth_fill {
    PMPD_SYNTH_FILL_NORMAL = 0,   /* draws from normal(0, std) */
    PMPD_SYNTH_FILL_ONES = 1,     /* RMSNorm weights */
    PMPD_SYNTH_FILL_ROPE_FREQS = 2 /* Llama 3.1's rope frequency factors */
} pmpd_synth_fill;

typedef struct pmpd_synth_tensor {
    char name[32];
    uint32_t fill;          /* pmpd_synth_fill */
    uint32_t n_dims;        /* 1 for vectors (F32), 2 for matrices */
    uint64_t ne[2];         /* ggml order: ne[0] is the row length */
    pmpd_ggml_type type;
    uint64_t offset;        /* from the start of the data, aligned */
    uint64_t bytes;
} pmpd_synth_tensor;

typedef struct pmpd_synth_plan {
    pmpd_synth_tensor *tensors; /* malloc'ed */
    uint32_t n_tensors;
    uint64_t data_bytes;        /* the data section, padding included */
    uint64_t parameters;
} pmpd_synth_plan;

/* Checks the shape against the type (err says what is impossible) and
 * lists the tensors of a Llama model with vocab_size tokens. */
PMPD_INTERNAL pmpd_status pmpd_synth_plan_make(const pmpd_synth_options *o, uint32_t vocab_size, pmpd_synth_plan *plan,
                                               pmpd_error *err);
PMPD_INTERNAL void pmpd_synth_plan_free(pmpd_synth_plan *plan);

/* ---- gguf_out.c: a GGUF stream; the first write error sticks ---- */

typedef struct pmpd_gguf_out {
    FILE *f;            /* NULL: only count bytes and keys (to size the header) */
    uint64_t written;
    uint64_t n_keys;    /* metadata entries written */
    int failed;         /* 0, or the errno of the first failed write (-1: none set) */
} pmpd_gguf_out;

PMPD_INTERNAL void pmpd_gguf_bytes(pmpd_gguf_out *o, const void *data, size_t n);
PMPD_INTERNAL void pmpd_gguf_u32(pmpd_gguf_out *o, uint32_t v);
PMPD_INTERNAL void pmpd_gguf_u64(pmpd_gguf_out *o, uint64_t v);
PMPD_INTERNAL void pmpd_gguf_string(pmpd_gguf_out *o, const char *s, size_t n);
/* Zero bytes up to the next multiple of PMPD_SYNTH_ALIGNMENT. */
PMPD_INTERNAL void pmpd_gguf_pad(pmpd_gguf_out *o);

/* Metadata entries: key, value type, value. */
PMPD_INTERNAL void pmpd_gguf_kv_u32(pmpd_gguf_out *o, const char *key, uint32_t v);
PMPD_INTERNAL void pmpd_gguf_kv_f32(pmpd_gguf_out *o, const char *key, float v);
PMPD_INTERNAL void pmpd_gguf_kv_bool(pmpd_gguf_out *o, const char *key, int v);
PMPD_INTERNAL void pmpd_gguf_kv_string(pmpd_gguf_out *o, const char *key, const char *v);
/* The head of an array entry; count elements of element_type follow. */
PMPD_INTERNAL void pmpd_gguf_kv_array(pmpd_gguf_out *o, const char *key, uint32_t element_type, uint64_t count);

enum { PMPD_GGUF_UINT32 = 4, PMPD_GGUF_INT32 = 5, PMPD_GGUF_FLOAT32 = 6, PMPD_GGUF_BOOL = 7, PMPD_GGUF_STRING = 8,
       PMPD_GGUF_ARRAY = 9 };

/* ---- arch.c: the architecture variants (defaults for zero options) ---- */

PMPD_INTERNAL const char *pmpd_synth_arch(const pmpd_synth_options *o);
PMPD_INTERNAL uint32_t pmpd_synth_head_dim(const pmpd_synth_options *o);
PMPD_INTERNAL float pmpd_synth_rope_theta(const pmpd_synth_options *o);
PMPD_INTERNAL float pmpd_synth_norm_eps(const pmpd_synth_options *o);
PMPD_INTERNAL float pmpd_synth_std(const pmpd_synth_options *o);
/* 1 when the architecture has Q/K/V biases (qwen2). */
PMPD_INTERNAL int pmpd_synth_has_biases(const pmpd_synth_options *o);
/* PMPD_ERR_INVALID_ARGUMENT (err says why) for a variant that cannot be written. */
PMPD_INTERNAL pmpd_status pmpd_synth_arch_check(const pmpd_synth_options *o, pmpd_error *err);
/* <arch>.attention.key_length / value_length (when head_dim is not
 * dim / n_heads), rope dimension, rope base and RMSNorm epsilon. */
PMPD_INTERNAL void pmpd_synth_arch_metadata(pmpd_gguf_out *out, const pmpd_synth_options *o);
/* head_dim / 2 divisors of the rotary frequencies, as Llama 3.1's GGUFs carry. */
PMPD_INTERNAL void pmpd_synth_rope_factors(const pmpd_synth_options *o, float *out);

/* ---- vocab_gguf.c: a llama2.c vocabulary as tokenizer.ggml.* ---- */

PMPD_INTERNAL void pmpd_synth_write_vocab(pmpd_gguf_out *o, const pmpd_vocab *v);

/* ---- vocab_gpt2.c: a byte-level BPE vocabulary file as tokenizer.ggml.* ---- */

typedef struct pmpd_synth_gpt2 {
    unsigned char *file;
    uint32_t n_tokens, n_merges;
    uint32_t *token_offsets, *merge_offsets; /* n + 1 each */
    char *token_blob, *merge_blob;           /* GGUF texts */
    int32_t *types;
    char pre[64];
    uint32_t bos_id, eos_id, eot_id;         /* eot 0xFFFFFFFF: none */
    int add_bos;                             /* -1: not stated */
} pmpd_synth_gpt2;

PMPD_INTERNAL pmpd_status pmpd_synth_load_gpt2(const char *path, pmpd_synth_gpt2 *g, pmpd_error *err);
PMPD_INTERNAL void pmpd_synth_gpt2_free(pmpd_synth_gpt2 *g);
/* pre, when not NULL, replaces the file's pre-tokenizer name. */
PMPD_INTERNAL void pmpd_synth_write_vocab_gpt2(pmpd_gguf_out *o, const pmpd_synth_gpt2 *g, const char *pre);

#endif /* PMPD_OFFLINE */
#endif
