/* Layout constants of the .pmpd container, shared by the loader and the
 * offline writer.  docs/models.md, "File format", is the specification;
 * these numbers must agree with it. */
#ifndef PMPD_FORMAT_CONTAINER_H
#define PMPD_FORMAT_CONTAINER_H

#define PMPD_CONTAINER_MAGIC "PMPD"
#define PMPD_CONTAINER_VERSION 1u
#define PMPD_CONTAINER_ALIGNMENT 64u

/* Header: fixed 128 bytes. */
#define PMPD_HDR_MAGIC 0
#define PMPD_HDR_VERSION 4
#define PMPD_HDR_HEADER_SIZE 8
#define PMPD_HDR_FLAGS 12
#define PMPD_HDR_FILE_SIZE 16
#define PMPD_HDR_N_TENSORS 24
#define PMPD_HDR_N_SECTIONS 28
#define PMPD_HDR_DIM 32
#define PMPD_HDR_HIDDEN_DIM 36
#define PMPD_HDR_N_LAYERS 40
#define PMPD_HDR_N_HEADS 44
#define PMPD_HDR_N_KV_HEADS 48
#define PMPD_HDR_HEAD_DIM 52
#define PMPD_HDR_VOCAB_SIZE 56
#define PMPD_HDR_SEQ_LEN 60
#define PMPD_HDR_ROPE_THETA 64
#define PMPD_HDR_NORM_EPS 68
#define PMPD_HDR_SHARED_CLASSIFIER 72
#define PMPD_HDR_BOS_ID 76
#define PMPD_HDR_EOS_ID 80
#define PMPD_HDR_ROPE_STYLE 84 /* pmpd_rope_style; zero in files written before it existed */
#define PMPD_HDR_FEATURES 88   /* PMPD_MODEL_* bits; likewise zero before */
#define PMPD_HDR_RESERVED 92   /* 32 zero bytes */
#define PMPD_HDR_CRC 124       /* CRC-32 of bytes [0,124) then the directory */
#define PMPD_HEADER_SIZE 128u

/* Tensor directory entry: 136 bytes. */
#define PMPD_TENSOR_NAME_MAX 64u
#define PMPD_TE_NAME 0         /* name bytes, zero padded */
#define PMPD_TE_NAME_LENGTH 64
#define PMPD_TE_TYPE 68
#define PMPD_TE_N_DIMS 72
#define PMPD_TE_CRC 76
#define PMPD_TE_DIMS 80        /* 4 x u64, outermost first, unused ones zero */
#define PMPD_TE_OFFSET 112
#define PMPD_TE_SIZE 120
#define PMPD_TE_RESERVED 128   /* 8 zero bytes */
#define PMPD_TENSOR_ENTRY_SIZE 136u

/* Section directory entry: 32 bytes. */
#define PMPD_SE_KIND 0
#define PMPD_SE_VERSION 4
#define PMPD_SE_FLAGS 8
#define PMPD_SE_CRC 12
#define PMPD_SE_OFFSET 16
#define PMPD_SE_SIZE 24
#define PMPD_SECTION_ENTRY_SIZE 32u

/* Limits that keep every count proportional to the input. */
#define PMPD_MAX_TENSORS 65536u
#define PMPD_MAX_SECTIONS 256u
#define PMPD_MAX_HPARAM (1u << 24)
#define PMPD_KNOWN_FEATURES (PMPD_MODEL_QKV_BIAS | PMPD_MODEL_ROPE_FREQS)

/* Versions of the section layouts this build reads (see the sections' own
 * parsers for the layouts). */
#define PMPD_PRECISION_SCHEDULE_VERSION 1u
#define PMPD_LEARNED_SCHEDULER_VERSION 1u
#define PMPD_KV_CODEBOOKS_VERSION 1u

/* Tokenizer section, version 1. */
#define PMPD_TOKENIZER_VERSION 1u
#define PMPD_TOK_N_TOKENS 0
#define PMPD_TOK_MAX_TOKEN_LENGTH 4
#define PMPD_TOK_FLAGS 8
#define PMPD_TOK_BLOB_SIZE 12
#define PMPD_TOK_HEADER_SIZE 16u    /* then f32 scores[n], u32 offsets[n+1], u32 sorted[n], blob */
#define PMPD_TOK_FLAG_SPACE_PREFIX 1u
#define PMPD_TOK_MAX_PIECE 65536u

/* Tokenizer section, version 2: byte-level BPE (GGUF's "gpt2" model).  A
 * 48-byte header -- the four version 1 fields at the same offsets, then
 * these -- followed by u32 offsets[n+1], u32 sorted[n] (as version 1),
 * u32 special[n_special] (the ids of control, user-defined and unknown
 * tokens, longest piece first, ties by id), u32 merges[n_merges][4]
 * (left id, right id, merged id, rank; increasing (left, right)), u8
 * types[n] (GGUF's token types), zero padding to a multiple of 4, then the
 * blob.  Pieces of normal tokens are raw bytes: the byte-level alphabet is
 * undone offline, so decoding points into the blob. */
#define PMPD_TOKENIZER_VERSION_BPE 2u
#define PMPD_TOK2_MODEL 16
#define PMPD_TOK2_PRE 20
#define PMPD_TOK2_N_MERGES 24
#define PMPD_TOK2_N_SPECIAL 28
#define PMPD_TOK2_EOT_ID 32
#define PMPD_TOK2_RESERVED 36       /* 12 zero bytes */
#define PMPD_TOK2_HEADER_SIZE 48u
#define PMPD_TOK2_MODEL_BPE 2u      /* 1 is reserved for SentencePiece-style, which uses version 1 */
#define PMPD_TOK_FLAG_ADD_BOS 2u    /* version 2: the model adds BOS (tokenizer.ggml.add_bos_token) */
#define PMPD_TOK_FLAG_ADD_EOS 4u    /* version 2: the model adds EOS */
#define PMPD_TOK2_NO_TOKEN 0xFFFFFFFFu
#define PMPD_TOK2_MAX_MERGES (1u << 24)
#define PMPD_TOK2_MERGE_SIZE 16u
/* GGUF token types (llama.cpp's llama_token_type). */
#define PMPD_TOKEN_TYPE_NORMAL 1u
#define PMPD_TOKEN_TYPE_UNKNOWN 2u
#define PMPD_TOKEN_TYPE_CONTROL 3u
#define PMPD_TOKEN_TYPE_USER_DEFINED 4u
#define PMPD_TOKEN_TYPE_UNUSED 5u
#define PMPD_TOKEN_TYPE_BYTE 6u

#endif
