/* pmpd_convert_file: detect the input kind, import, optionally replace the
 * tokenizer, convert the matrices, check the result with the runtime
 * loader, and write it atomically (OUT.tmp, then rename). */
#include "pmpd_impl/offline/import/import.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/core/error.h"
#include "pmpd_impl/format/le.h"
#include "pmpd_impl/offline/format/atomic_file.h"
#include "pmpd_impl/offline/weights/encoders.h"

#define CONVERT_CHUNK (1u << 20)

PMPD_INTERNAL pmpd_status pmpd_import_read_file(const char *path, unsigned char **data, size_t *size, pmpd_error *err)
{
    FILE *f = fopen(path, "rb");
    long length;
    *data = NULL;
    *size = 0;
    if (!f)
        return pmpd_error_set(err, PMPD_ERR_NOT_FOUND, PMPD_NO_OFFSET, "cannot open %s", path);
    if (fseek(f, 0, SEEK_END) != 0 || (length = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return pmpd_error_set(err, PMPD_ERR_IO, PMPD_NO_OFFSET, "cannot size %s", path);
    }
    *data = (unsigned char *)malloc(length ? (size_t)length : 1);
    if (!*data || fread(*data, 1, (size_t)length, f) != (size_t)length) {
        fclose(f);
        free(*data);
        *data = NULL;
        return pmpd_error_set(err, PMPD_ERR_IO, PMPD_NO_OFFSET, "cannot read %s", path);
    }
    fclose(f);
    *size = (size_t)length;
    return PMPD_OK;
}

static void convert_drop_tokenizer(pmpd_build_model *b)
{
    uint32_t i;
    for (i = 0; i < b->n_sections; i++) {
        if (b->sections[i].kind == PMPD_SECTION_TOKENIZER) {
            free(b->sections[i].data);
            b->sections[i] = b->sections[--b->n_sections];
            return;
        }
    }
}

/* Opens the serialized container with the runtime loader, so the converter
 * never writes a file the runtime would refuse. */
static pmpd_status convert_verify(const pmpd_build_model *b, const unsigned char *data, size_t size, pmpd_error *err)
{
    size_t arena_size = 65536 + (size_t)b->n_tensors * 512 + (size_t)b->info.n_layers * 256;
    void *memory = malloc(arena_size);
    pmpd_arena arena;
    pmpd_model *model;
    pmpd_status status;
    if (!memory)
        return pmpd_error_set(err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory");
    pmpd_arena_init(&arena, memory, arena_size);
    status = pmpd_model_open_memory(data, size, &arena, &model, err);
    if (status == PMPD_OK)
        pmpd_model_close(model);
    free(memory);
    return status;
}

static pmpd_status convert_write(const char *path, const unsigned char *data, size_t size,
                                 const pmpd_convert_options *options, pmpd_error *err)
{
    pmpd_atomic_file out;
    size_t done = 0;
    pmpd_status status = pmpd_atomic_open(&out, path, err);
    if (status != PMPD_OK)
        return status;
    while (done < size) {
        size_t chunk = size - done < CONVERT_CHUNK ? size - done : CONVERT_CHUNK;
        if (fwrite(data + done, 1, chunk, out.f) != chunk)
            break;
        done += chunk;
        if (options && options->progress)
            options->progress(options->progress_context, done, size);
    }
    if (done != size)
        status = pmpd_error_set(err, PMPD_ERR_IO, done, "cannot write %s: %s", out.tmp, strerror(errno));
    return pmpd_atomic_finish(&out, status, err);
}

PMPD_INTERNAL pmpd_status pmpd_import_file(const char *in_path, const char *tokenizer_path, pmpd_build_model *b,
                                           pmpd_convert_input *failed_input, pmpd_error *err)
{
    unsigned char *data;
    size_t size;
    pmpd_vocab vocab;
    pmpd_status status = pmpd_import_read_file(in_path, &data, &size, err);
    if (status != PMPD_OK)
        return status;
    if (size >= 4 && memcmp(data, "GGUF", 4) == 0)
        status = pmpd_import_gguf(data, size, b, err);
    else
        status = pmpd_import_llama2c(data, size, b, err);
    free(data);
    if (status != PMPD_OK || !tokenizer_path)
        return status;
    *failed_input = PMPD_CONVERT_INPUT_TOKENIZER;
    status = pmpd_import_read_file(tokenizer_path, &data, &size, err);
    if (status != PMPD_OK)
        return status;
    status = pmpd_import_llama2c_tokenizer(data, size, b->info.vocab_size, &vocab, err);
    free(data);
    if (status != PMPD_OK)
        return status;
    convert_drop_tokenizer(b);
    status = pmpd_build_add_vocab(b, &vocab);
    pmpd_vocab_free(&vocab);
    if (status != PMPD_OK)
        return pmpd_error_set(err, status, PMPD_NO_OFFSET, "cannot store the tokenizer");
    return PMPD_OK;
}

pmpd_status pmpd_convert_file(const char *in_path, const char *out_path, const pmpd_convert_options *options,
                              pmpd_convert_summary *summary, pmpd_error *err)
{
    pmpd_convert_summary local;
    pmpd_convert_options defaults;
    const pmpd_weight_encoder *encoder;
    pmpd_build_model b;
    void *block = NULL;
    unsigned char *data;
    size_t size;
    uint32_t i;
    pmpd_status status;
    if (!summary)
        summary = &local;
    memset(summary, 0, sizeof *summary);
    pmpd_error_clear(err);
    if (!in_path || !out_path)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET, "input and output paths are required");
    if (!options) {
        memset(&defaults, 0, sizeof defaults); /* f32, no tokenizer file, no progress */
        options = &defaults;
    }
    encoder = pmpd_weight_encoder_of((uint32_t)options->type);
    if (!encoder)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                              "output type %u is not a weight format the converter writes",
                              (unsigned)options->type);
    pmpd_build_init(&b);
    status = pmpd_import_file(in_path, options->tokenizer_path, &b, &summary->failed_input, err);
    if (status == PMPD_OK) {
        summary->failed_input = PMPD_CONVERT_INPUT_MODEL;
        status = encoder->convert(&b, options);
        if (status == PMPD_OK)
            status = pmpd_build_serialize(&b, &block, &data, &size);
        if (status != PMPD_OK)
            pmpd_error_set(err, status, PMPD_NO_OFFSET, "cannot build the container");
    }
    if (status == PMPD_OK) {
        status = convert_verify(&b, data, size, err);
        if (status != PMPD_OK && err)
            err->offset = PMPD_NO_OFFSET; /* an offset in the unwritten output means nothing to the user */
    }
    if (status == PMPD_OK) {
        summary->failed_input = PMPD_CONVERT_INPUT_OUTPUT;
        status = convert_write(out_path, data, size, options, err);
    }
    if (status == PMPD_OK) {
        summary->n_tensors = b.n_tensors;
        summary->bytes = size;
        for (i = 0; i < b.n_tensors; i++) {
            uint64_t count = 1;
            uint32_t d;
            for (d = 0; d < b.tensors[i].n_dims; d++)
                count *= b.tensors[i].dims[d];
            summary->parameters += count;
        }
    }
    free(block);
    pmpd_build_free(&b);
    return status;
}

#undef CONVERT_CHUNK
