/* pmpd_convert_file: detect the input kind, import, optionally replace the
 * tokenizer, convert the matrices, check the result with the runtime
 * loader, and write it atomically (OUT.tmp, then rename).  Formats whose
 * encoder takes one matrix at a time stream: a GGUF input's tensors stay in
 * the file until the writer reaches them, so memory holds one tensor, not
 * the model; the others (nested, w8a8) convert the whole model in memory. */
#include "pmpd_impl/offline/import/import.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/core/error.h"
#include "pmpd_impl/format/le.h"
#include "pmpd_impl/offline/format/atomic_file.h"
#include "pmpd_impl/offline/ldlq/hessian.h"
#include "pmpd_impl/offline/nuq/nuq_build.h"
#include "pmpd_impl/offline/palette/plan.h"
#include "pmpd_impl/offline/weights/encoders.h"
#include "platform/platform.h"

#define CONVERT_CHUNK (1u << 20)
/* The first read of a GGUF file for its metadata and tensor infos (a Llama 3
 * vocabulary and its merges take about 8 MiB); doubled while short. */
#define CONVERT_GGUF_HEAD ((size_t)16 << 20)

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

/* Imports the GGUF file f (file_size bytes) with its tensors left in it:
 * reads the head of the file, larger each time the parse runs past it.
 * b owns f from the start (the import compares tensors through it), so
 * pmpd_build_free closes it. */
static pmpd_status convert_import_unloaded(FILE *f, uint64_t file_size, pmpd_build_model *b, pmpd_error *err)
{
    size_t size = file_size < CONVERT_GGUF_HEAD ? (size_t)file_size : CONVERT_GGUF_HEAD, have = 0;
    unsigned char *head = NULL;
    int short_read = 1;
    pmpd_status status = PMPD_OK;
    while (status == PMPD_OK && short_read) {
        unsigned char *grown = (unsigned char *)realloc(head, size ? size : 1);
        if (!grown) {
            status = pmpd_error_set(err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory");
            break;
        }
        head = grown;
        if (fread(head + have, 1, size - have, f) != size - have) {
            status = pmpd_error_set(err, PMPD_ERR_IO, have, "cannot read the GGUF file");
            break;
        }
        have = size;
        b->source = NULL; /* a fresh b for each parse, keeping f */
        pmpd_build_free(b);
        b->source = f;
        status = pmpd_import_gguf_unloaded(head, size, file_size, &short_read, b, err);
        if (status == PMPD_OK || !short_read || size == file_size)
            break;
        status = PMPD_OK;
        size = size > file_size / 2 ? (size_t)file_size : 2 * size;
    }
    free(head);
    b->source = f;
    return status;
}

/* The model in_path: a GGUF file's tensors left unloaded when asked, every
 * other input read whole. */
static pmpd_status convert_import_model(const char *in_path, int unloaded, pmpd_build_model *b, pmpd_error *err)
{
    unsigned char *data, magic[4] = {0, 0, 0, 0};
    size_t size;
    long length;
    pmpd_status status;
    if (unloaded) {
        FILE *f = fopen(in_path, "rb");
        if (!f)
            return pmpd_error_set(err, PMPD_ERR_NOT_FOUND, PMPD_NO_OFFSET, "cannot open %s", in_path);
        if (fread(magic, 1, 4, f) == 4 && memcmp(magic, "GGUF", 4) == 0) {
            if (fseek(f, 0, SEEK_END) != 0 || (length = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
                fclose(f);
                return pmpd_error_set(err, PMPD_ERR_IO, PMPD_NO_OFFSET, "cannot size %s", in_path);
            }
            return convert_import_unloaded(f, (uint64_t)length, b, err);
        }
        fclose(f);
    }
    status = pmpd_import_read_file(in_path, &data, &size, err);
    if (status != PMPD_OK)
        return status;
    if (size >= 4 && memcmp(data, "GGUF", 4) == 0)
        status = pmpd_import_gguf(data, size, b, err);
    else
        status = pmpd_import_llama2c(data, size, b, err);
    free(data);
    return status;
}

PMPD_INTERNAL pmpd_status pmpd_import_file(const char *in_path, const char *tokenizer_path, int unloaded,
                                           pmpd_build_model *b, pmpd_convert_input *failed_input, pmpd_error *err)
{
    unsigned char *data;
    size_t size;
    pmpd_vocab vocab;
    pmpd_status status = convert_import_model(in_path, unloaded, b, err);
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

typedef struct convert_stream_context {
    const pmpd_convert_options *options;
    uint32_t n_tensors;
    const pmpd_build_model *b;
    const pmpd_palette_plan *plan; /* with budget_bits: each tensor's type; else NULL */
    const pmpd_hessian_set *hessians; /* with ldlq_sequences: the inputs' LDLQ factors; else NULL */
} convert_stream_context;

static uint32_t convert_stream_type(void *context, const pmpd_build_tensor *t)
{
    const convert_stream_context *c = (const convert_stream_context *)context;
    return c->plan ? pmpd_palette_plan_type(c->plan, c->b, t) : pmpd_weight_stream_type(c->options, t);
}

/* With a plan: each tensor's encoder options (its palette entry's nuq, vq or tcq width). */
static const pmpd_convert_options *convert_stream_options(void *context, const pmpd_build_tensor *t)
{
    const convert_stream_context *c = (const convert_stream_context *)context;
    return pmpd_palette_plan_options(c->plan, c->b, t);
}

/* With LDLQ: the factor of tensor t's input for type's blocks. */
static const pmpd_ldlq *convert_stream_ldlq(void *context, const pmpd_build_tensor *t, uint32_t type)
{
    const convert_stream_context *c = (const convert_stream_context *)context;
    const size_t block = pmpd_weight_ldlq_block(type);
    return block && t->n_dims == 2 ? pmpd_hessian_factor(c->hessians, t->name, t->dims[1], block) : NULL;
}

static void convert_stream_written(void *context, uint32_t index, const pmpd_build_tensor *t, uint32_t type,
                                   uint64_t done, uint64_t total)
{
    const convert_stream_context *c = (const convert_stream_context *)context;
    pmpd_convert_tensor_report report;
    if (!c->options->tensor_written) {
        if (c->options->progress)
            c->options->progress(c->options->progress_context, done, total);
        return;
    }
    report.index = index;
    report.n_tensors = c->n_tensors;
    report.name = t->name;
    report.source_type = t->source_type ? t->source_type->name : "F32";
    report.type = (pmpd_tensor_type)type;
    report.bytes_done = done;
    report.bytes_total = total;
    c->options->tensor_written(c->options->progress_context, &report);
}

/* Checks the written file with the runtime loader before it is renamed into
 * place: through a mapping (pages the kernel can drop, so the check needs
 * no memory the size of the model), or, on a port without one, a copy. */
static pmpd_status convert_verify_file(const pmpd_build_model *b, const char *path, pmpd_error *err)
{
    pmpd_mapped_file view;
    unsigned char *copy = NULL;
    uint64_t size = 0;
    pmpd_status status = pmpd_platform_map_file(path, &view);
    if (status == PMPD_ERR_UNSUPPORTED && (status = pmpd_platform_file_size(path, &size)) == PMPD_OK) {
        /* The loader wants the container 64-byte aligned, as a mapping is. */
        if (size < SIZE_MAX - PMPD_CONTAINER_ALIGNMENT)
            copy = (unsigned char *)malloc((size_t)size + PMPD_CONTAINER_ALIGNMENT);
        status = copy ? PMPD_OK : PMPD_ERR_OUT_OF_MEMORY;
        if (copy) {
            unsigned char *aligned =
                copy + (PMPD_CONTAINER_ALIGNMENT - (uintptr_t)copy % PMPD_CONTAINER_ALIGNMENT) % PMPD_CONTAINER_ALIGNMENT;
            view.data = aligned;
            view.size = (size_t)size;
            status = pmpd_platform_read_file(path, aligned, view.size);
        }
    }
    if (status != PMPD_OK) {
        free(copy);
        return pmpd_error_set(err, status, PMPD_NO_OFFSET, "cannot reopen %s to check it", path);
    }
    status = convert_verify(b, view.data, view.size, err);
    if (copy)
        free(copy);
    else
        pmpd_platform_unmap_file(&view);
    return status;
}

/* Encodes and writes b one tensor at a time into out_path (atomically). */
static pmpd_status convert_stream(const pmpd_build_model *b, const pmpd_palette_plan *plan,
                                  const pmpd_hessian_set *hessians, const char *out_path,
                                  const pmpd_convert_options *options, pmpd_convert_summary *summary, pmpd_error *err)
{
    convert_stream_context context;
    pmpd_build_stream how;
    pmpd_atomic_file out;
    uint64_t size = 0;
    int writing = 1;
    pmpd_status status = pmpd_atomic_open(&out, out_path, err);
    if (status != PMPD_OK) {
        summary->failed_input = PMPD_CONVERT_INPUT_OUTPUT;
        return status;
    }
    context.options = options;
    context.n_tensors = b->n_tensors;
    context.b = b;
    context.plan = plan;
    context.hessians = hessians;
    how.type_of = convert_stream_type;
    how.row_block = pmpd_weight_row_block;
    how.tensor_bytes = pmpd_weight_stream_bytes;
    how.encode = pmpd_weight_encode_matrix;
    how.options = options;
    how.options_of = plan ? convert_stream_options : NULL;
    how.ldlq_of = hessians ? convert_stream_ldlq : NULL;
    how.written = convert_stream_written;
    how.context = &context;
    how.chunk_bytes = 0;
    status = pmpd_build_write_stream(b, out.f, &how, &size, &writing, err);
    if (status == PMPD_OK) {
        status = convert_verify_file(b, out.tmp, err);
        if (status != PMPD_OK && err)
            err->offset = PMPD_NO_OFFSET; /* an offset in the removed output means nothing to the user */
    }
    status = pmpd_atomic_finish(&out, status, err);
    if (status != PMPD_OK && writing)
        summary->failed_input = PMPD_CONVERT_INPUT_OUTPUT;
    summary->bytes = size;
    return status;
}

/* The bit allocation (offline/palette/plan.h), reported to the caller,
 * then the stream with each group's format. */
static pmpd_status convert_allocated(const pmpd_build_model *b, const pmpd_hessian_set *hessians,
                                     const char *out_path, const pmpd_convert_options *options,
                                     pmpd_convert_summary *summary, pmpd_error *err)
{
    pmpd_palette_plan plan;
    pmpd_status status = pmpd_palette_plan_make(b, options, NULL, hessians, &plan, err);
    if (status == PMPD_OK && options->allocated)
        options->allocated(options->progress_context, &plan.report);
    if (status == PMPD_OK)
        status = convert_stream(b, &plan, hessians, out_path, options, summary, err);
    pmpd_palette_plan_free(&plan);
    return status;
}

/* Converts the whole model in memory, serializes, checks and writes it
 * (the formats whose encoder needs every matrix at once). */
static pmpd_status convert_in_memory(pmpd_build_model *b, const pmpd_weight_encoder *encoder, const char *out_path,
                                     const pmpd_convert_options *options, pmpd_convert_summary *summary,
                                     pmpd_error *err)
{
    void *block = NULL;
    unsigned char *data = NULL;
    size_t size = 0;
    pmpd_status status = encoder->convert(b, options);
    if (status == PMPD_OK)
        status = pmpd_build_serialize(b, &block, &data, &size);
    if (status != PMPD_OK)
        pmpd_error_set(err, status, PMPD_NO_OFFSET, "cannot build the container");
    if (status == PMPD_OK) {
        status = convert_verify(b, data, size, err);
        if (status != PMPD_OK && err)
            err->offset = PMPD_NO_OFFSET; /* an offset in the unwritten output means nothing to the user */
    }
    if (status == PMPD_OK) {
        summary->failed_input = PMPD_CONVERT_INPUT_OUTPUT;
        status = convert_write(out_path, data, size, options, err);
    }
    summary->bytes = size;
    free(block);
    return status;
}

/* The sequences LDLQ's moments are measured on: their own seed ("ldlq"),
 * so they are not the sensitivity's. */
#define CONVERT_LDLQ_SEED UINT64_C(0x6c646c71)
#define CONVERT_LDLQ_LENGTH 128u

/* With options->ldlq_sequences: the moments of b's layer inputs, factored
 * for every rotated format the conversion may write (the type, or the
 * palette's entries). */
static pmpd_status convert_hessians(const pmpd_build_model *b, const pmpd_convert_options *options, int allocating,
                                    pmpd_hessian_set *set, pmpd_error *err)
{
    static const pmpd_tensor_type defaults[] = {PMPD_TENSOR_Q8, PMPD_TENSOR_Q4, PMPD_TENSOR_Q2CB};
    const pmpd_tensor_type *types = !allocating ? &options->type : options->palette ? options->palette : defaults;
    const uint32_t n = !allocating ? 1 : options->palette ? options->n_palette : 3;
    int cpus = pmpd_platform_cpu_count();
    unsigned threads = options->threads ? options->threads : cpus > 0 ? (unsigned)cpus : 1;
    char *text = NULL;
    uint64_t size = 0;
    uint32_t i;
    pmpd_status status = PMPD_OK;
    if (threads > pmpd_max_threads())
        threads = pmpd_max_threads();
    if (options->ldlq_text_path) {
        /* Its start is read: 16 bytes a token the windows need (at least
         * 1 MiB) covers any tokenizer's text; the tokenizer's scratch is
         * 24 bytes a byte. */
        uint64_t enough = (uint64_t)options->ldlq_sequences *
                          (options->ldlq_length ? options->ldlq_length : CONVERT_LDLQ_LENGTH) * 16;
        enough = enough > (1u << 20) ? enough : (1u << 20);
        status = pmpd_platform_file_size(options->ldlq_text_path, &size);
        if (status == PMPD_OK && size > enough)
            size = enough;
        text = status == PMPD_OK ? (char *)malloc((size_t)size + 1) : NULL;
        if (status == PMPD_OK && !text)
            status = PMPD_ERR_OUT_OF_MEMORY;
        if (status == PMPD_OK)
            status = pmpd_platform_read_file(options->ldlq_text_path, text, (size_t)size);
        if (status != PMPD_OK) {
            free(text);
            return pmpd_error_set(err, status, PMPD_NO_OFFSET, "cannot read LDLQ's calibration text %s",
                                  options->ldlq_text_path);
        }
    }
    status = pmpd_hessian_collect(b, options->ldlq_sequences,
                                  options->ldlq_length ? options->ldlq_length : CONVERT_LDLQ_LENGTH, text, (size_t)size,
                                  CONVERT_LDLQ_SEED, threads, set, err);
    free(text);
    for (i = 0; i < n && status == PMPD_OK; i++)
        if (pmpd_weight_ldlq_block((uint32_t)types[i]))
            status = pmpd_hessian_factors(set, pmpd_weight_ldlq_block((uint32_t)types[i]), PMPD_NUQ_SEED, err);
    return status;
}

pmpd_status pmpd_convert_file(const char *in_path, const char *out_path, const pmpd_convert_options *options,
                              pmpd_convert_summary *summary, pmpd_error *err)
{
    pmpd_convert_summary local;
    pmpd_convert_options defaults;
    const pmpd_weight_encoder *encoder;
    pmpd_build_model b;
    pmpd_hessian_set hessians;
    uint32_t i;
    int allocating, ldlq;
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
    if ((options->budget_bits != 0.0 && !(options->budget_bits > 0.0)) ||
        (options->budget_latency_us != 0.0 && !(options->budget_latency_us > 0.0)))
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET, "the bit or latency budget must be positive");
    if (options->anyprec_vocabulary != PMPD_TENSOR_F32 && options->anyprec_vocabulary != PMPD_TENSOR_Q8 &&
        options->anyprec_vocabulary != PMPD_TENSOR_Q4 && options->anyprec_vocabulary != PMPD_TENSOR_ANYPREC)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                              "anyprec_vocabulary %u is not q8, q4 or anyprec", (unsigned)options->anyprec_vocabulary);
    allocating = options->budget_bits > 0.0 || options->budget_latency_us > 0.0;
    /* keep-closest and the bit allocation pick per tensor among the
     * formats that stream. */
    encoder = pmpd_weight_encoder_of(options->keep_closest || allocating ? PMPD_TENSOR_F32
                                                                                        : (uint32_t)options->type);
    if (!encoder)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                              "output type %u is not a weight format the converter writes",
                              (unsigned)options->type);
    ldlq = options->ldlq_sequences > 0 && !options->keep_closest &&
           (allocating || pmpd_weight_ldlq_block((uint32_t)options->type) != 0);
    if (ldlq && allocating && options->palette_gaussian)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                              "Gaussian error estimates are data-free: with LDLQ every candidate is measured");
    pmpd_build_init(&b);
    memset(&hessians, 0, sizeof hessians);
    /* The allocation and LDLQ run the float model: its tensors must be in
     * memory. */
    status = pmpd_import_file(in_path, options->tokenizer_path, encoder->streams && !allocating && !ldlq, &b,
                              &summary->failed_input, err);
    if (status == PMPD_OK) {
        summary->failed_input = PMPD_CONVERT_INPUT_MODEL;
        if (ldlq)
            status = convert_hessians(&b, options, allocating, &hessians, err);
    }
    if (status == PMPD_OK)
        status = allocating        ? convert_allocated(&b, ldlq ? &hessians : NULL, out_path, options, summary, err)
                 : encoder->streams ? convert_stream(&b, NULL, ldlq ? &hessians : NULL, out_path, options, summary, err)
                                    : convert_in_memory(&b, encoder, out_path, options, summary, err);
    pmpd_hessian_free(&hessians);
    if (status == PMPD_OK) {
        summary->n_tensors = b.n_tensors;
        for (i = 0; i < b.n_tensors; i++) {
            uint64_t count = 1;
            uint32_t d;
            for (d = 0; d < b.tensors[i].n_dims; d++)
                count *= b.tensors[i].dims[d];
            summary->parameters += count;
        }
    } else {
        summary->bytes = 0;
    }
    pmpd_build_free(&b);
    return status;
}

#undef CONVERT_LDLQ_SEED
#undef CONVERT_LDLQ_LENGTH
#undef CONVERT_CHUNK
#undef CONVERT_GGUF_HEAD
