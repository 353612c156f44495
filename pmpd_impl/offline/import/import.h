/* Importers of foreign model files into a pmpd_build_model (offline).
 * Each validates the whole input and reports the first problem through err
 * with the byte offset in that input. */
#ifndef PMPD_OFFLINE_IMPORT_IMPORT_H
#define PMPD_OFFLINE_IMPORT_IMPORT_H

#include <stddef.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/offline/format/builder.h"

#if PMPD_OFFLINE

/* llama2.c checkpoint, legacy (7 int32 header fields) or version 1 ("ak42"). */
PMPD_INTERNAL pmpd_status pmpd_import_llama2c(const unsigned char *data, size_t size, pmpd_build_model *out, pmpd_error *err);

/* llama2.c tokenizer.bin with vocab_size entries (0: as many as the file
 * holds, which must then end exactly after the last one). */
PMPD_INTERNAL pmpd_status pmpd_import_llama2c_tokenizer(const unsigned char *data, size_t size, uint32_t vocab_size,
                                          pmpd_vocab *out, pmpd_error *err);

/* GGUF v2/v3 file of architecture llama or qwen2, with its tokenizer if present. */
PMPD_INTERNAL pmpd_status pmpd_import_gguf(const unsigned char *data, size_t size, pmpd_build_model *out, pmpd_error *err);

/* pmpd_import_gguf on the first head_size bytes of a file of file_size
 * bytes, leaving the tensors unloaded (pmpd_build_add_unloaded: the caller
 * sets out->source to the file).  *short_read is set when the parse needed
 * bytes past head (the status then is that failure): read more of the
 * file into head and call again with a fresh out. */
PMPD_INTERNAL pmpd_status pmpd_import_gguf_unloaded(const unsigned char *head, size_t head_size, uint64_t file_size,
                                                    int *short_read, pmpd_build_model *out, pmpd_error *err);

/* What gguf.c found of a "gpt2" (byte-level BPE) tokenizer's metadata:
 * offsets into data of each array's first element (arrays already bounds
 * checked by the metadata walk), for gguf_bpe.c to turn into a vocabulary. */
typedef struct pmpd_gguf_bpe_input {
    const unsigned char *data;
    size_t size;
    size_t tokens_at;             /* tokenizer.ggml.tokens: n_tokens strings */
    uint64_t n_tokens;
    int has_types;                /* tokenizer.ggml.token_type: n_types int32 */
    size_t types_at;
    uint64_t n_types;
    uint32_t types_element;
    int has_merges;               /* tokenizer.ggml.merges: n_merges strings */
    size_t merges_at;
    uint64_t n_merges;
    uint32_t merges_element;
    uint64_t merges_key_at;
    int has_pre;                  /* tokenizer.ggml.pre */
    const unsigned char *pre;
    uint64_t pre_length;
    uint64_t pre_at;
    uint32_t eot_id;              /* PMPD_TOK2_NO_TOKEN when absent */
    int add_bos, add_eos;         /* -1 when absent */
} pmpd_gguf_bpe_input;

/* Builds the byte-level BPE vocabulary: pieces of normal tokens turned from
 * the byte-level alphabet into raw bytes, merges resolved to token ids.
 * Refuses (with err at the offending offset): tokens that are not valid
 * UTF-8 or, for normal tokens, not in the byte-level alphabet; unknown token
 * types; missing or malformed merges, or merges naming missing tokens; a
 * missing or unknown pre-tokenizer (the message names it). */
PMPD_INTERNAL pmpd_status pmpd_import_gguf_bpe_vocab(const pmpd_gguf_bpe_input *in, pmpd_bpe_vocab *out,
                                                     pmpd_error *err);
/* Sets b->info.features from the optional tensors a GGUF import brought
 * (Q/K/V biases, rope_freqs.weight) and refuses tensors pmpd would have to
 * ignore: other biases, fused QKV, rope_freqs with NeoX rope
 * (PMPD_ERR_UNSUPPORTED, naming the tensor), biases missing from a layer
 * (PMPD_ERR_FORMAT_MISSING). */
PMPD_INTERNAL pmpd_status pmpd_import_gguf_features(pmpd_build_model *b, uint32_t rope_style, pmpd_error *err);

/* Reads a whole file into a new malloc'ed buffer (*data, *size bytes).
 * Errors: PMPD_ERR_NOT_FOUND (cannot open), PMPD_ERR_IO; err names path. */
PMPD_INTERNAL pmpd_status pmpd_import_read_file(const char *path, unsigned char **data, size_t *size, pmpd_error *err);

/* Imports the llama2.c checkpoint or GGUF file at in_path (told apart by
 * its first bytes) into b (initialized by the caller) and, when
 * tokenizer_path is not NULL, replaces its vocabulary with that llama2.c
 * tokenizer.bin.  With unloaded, a GGUF file's tensors stay in the file
 * (b->source) until read.  *failed_input is set to
 * PMPD_CONVERT_INPUT_TOKENIZER once the tokenizer is being read (so a
 * failure names the right file). */
PMPD_INTERNAL pmpd_status pmpd_import_file(const char *in_path, const char *tokenizer_path, int unloaded,
                                           pmpd_build_model *b, pmpd_convert_input *failed_input, pmpd_error *err);

/* Checks hyperparameters an importer read (the same rules the loader
 * applies); field_offset names the input offset for messages. */
PMPD_INTERNAL pmpd_status pmpd_import_check_hparams(const pmpd_model_info *h, uint64_t field_offset, pmpd_error *err);

#endif /* PMPD_OFFLINE */
#endif
