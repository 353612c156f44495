#include "pmpd_impl/offline/weights/encoders.h"

#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/offline/format/from_model.h"
#include "pmpd_impl/offline/format/half.h"
#include "pmpd_impl/offline/precision/anyprec_build.h"
#include "pmpd_impl/offline/quant/build.h"
#include "pmpd_impl/offline/quant/quant.h"
#include "pmpd_impl/weights/format.h"
#include "pmpd_impl/weights/grouped/qformat.h"
#include "pmpd_impl/offline/w8a8/w8a8_build.h"
#include "pmpd_impl/offline/nuq/nuq_build.h"
#include "pmpd_impl/offline/tcq/tcq_build.h"
#include "pmpd_impl/offline/vq/vq_build.h"

/* Nested widths of a conversion: options' or 2:4. */
static void pmpd_weight_anyprec_widths(const pmpd_convert_options *options, unsigned *seed, unsigned *parent)
{
    *seed = options && options->anyprec_seed_bits ? options->anyprec_seed_bits : 2;
    *parent = options && options->anyprec_parent_bits ? options->anyprec_parent_bits : 4;
}

/* The group-quantized type of the embedding and classifier of a nested
 * conversion where they are not nested: options' q4, else q8. */
static uint32_t pmpd_weight_anyprec_vocabulary(const pmpd_convert_options *options)
{
    return options && options->anyprec_vocabulary == PMPD_TENSOR_Q4 ? PMPD_TENSOR_Q4 : PMPD_TENSOR_Q8;
}

static pmpd_status pmpd_encode_float(pmpd_build_model *b, const pmpd_convert_options *options)
{
    return pmpd_build_convert_matrices(b, (uint32_t)options->type);
}

/* The token embedding and classifier become q8 in every group-quantized
 * model (quant/build.c). */
static pmpd_status pmpd_encode_grouped(pmpd_build_model *b, const pmpd_convert_options *options)
{
    return pmpd_quant_build_convert(b, (uint32_t)options->type, options->threads, options->progress,
                                    options->progress_context);
}

static pmpd_status pmpd_encode_anyprec(pmpd_build_model *b, const pmpd_convert_options *options)
{
    unsigned seed, parent;
    pmpd_status status;
    pmpd_weight_anyprec_widths(options, &seed, &parent);
    status = pmpd_anyprec_build_convert(b, seed, parent, NULL, options->threads, options->progress,
                                        options->progress_context);
    if (status == PMPD_OK && options->anyprec_vocabulary == PMPD_TENSOR_ANYPREC)
        status = pmpd_anyprec_build_convert_vocabulary(b, seed, parent, options->threads);
    /* What is left in f32 (the embedding and classifier, unless nesting
     * them was asked and reads fewer bytes) goes to q8, or q4 if asked: in
     * f32 a 32,000-token vocabulary would be most of what a decode step
     * reads. */
    if (status == PMPD_OK)
        status = pmpd_quant_build_convert_vocabulary(b, pmpd_weight_anyprec_vocabulary(options));
    return status;
}

/* W8A8 needs each layer's input range: the float model (b as it is) is
 * opened and run on text it writes itself first.  8 prompts of 8 tokens
 * continued for 24: 256 tokens of activations per layer. */
static pmpd_status pmpd_encode_w8a8(pmpd_build_model *b, const pmpd_convert_options *options)
{
    pmpd_calibration_config config;
    pmpd_w8a8_ranges ranges;
    pmpd_build_opened opened;
    pmpd_status status;
    pmpd_calibration_config_init(&config);
    config.n_prompts = 8;
    config.prompt_length = 8;
    config.output_length = 24;
    memset(&ranges, 0, sizeof ranges);
    status = pmpd_build_open(b, &opened, NULL);
    if (status == PMPD_OK)
        status = pmpd_w8a8_ranges_collect(opened.model, &config, &ranges);
    pmpd_build_close(&opened);
    if (status == PMPD_OK)
        status = pmpd_w8a8_build_convert(b, &ranges, options->w8a8_no_shadow ? 0 : options->w8a8_shadow_tensors,
                                         !options->w8a8_no_shadow, options->progress, options->progress_context);
    pmpd_w8a8_ranges_free(&ranges);
    return status;
}

/* NUQ at options->nuq_bits: one type for the three widths (the tensor
 * header holds the width), so the table of formats keeps one name per type
 * and pmpd-convert spells the width as --type nuq2 / nuq3 / nuq4. */
static unsigned pmpd_nuq_bits_of(const pmpd_convert_options *options)
{
    return options && options->nuq_bits ? options->nuq_bits : PMPD_NUQ_DEFAULT_BITS;
}

/* VQ at options->vq_quarter_bits, as NUQ: --type vq2 ... vq4. */
static unsigned pmpd_vq_quarter_bits_of(const pmpd_convert_options *options)
{
    return options && options->vq_quarter_bits ? options->vq_quarter_bits : PMPD_VQ_DEFAULT_QUARTER_BITS;
}

/* TCQ at options->tcq_quarter_bits, one type for every width as NUQ
 * (pmpd-convert --type tcq2.75). */
static unsigned pmpd_tcq_quarter_bits_of(const pmpd_convert_options *options)
{
    return options && options->tcq_quarter_bits ? options->tcq_quarter_bits : PMPD_TCQ_DEFAULT_QUARTER_BITS;
}

/* The formats on rotated rows (NUQ, VQ, TCQ), each matrix encoded alone:
 * every f32 matrix but the token embedding and classifier, which become
 * q8 as with the other quantized types.  Progress counts matrices, but
 * for TCQ, whose Viterbi search reports rows as it goes (on
 * options->threads). */
static pmpd_status pmpd_encode_rotated(pmpd_build_model *b, const pmpd_convert_options *options)
{
    const uint32_t type = (uint32_t)options->type;
    const int by_rows = type == PMPD_TENSOR_TCQ;
    uint64_t total = 0, done = 0, bytes;
    uint32_t i;
    for (i = 0; i < b->n_tensors; i++)
        if (b->tensors[i].n_dims == 2 && b->tensors[i].type == PMPD_TENSOR_F32 &&
            !pmpd_quant_build_is_vocabulary(&b->tensors[i]))
            total += by_rows ? b->tensors[i].dims[0] : 1;
    for (i = 0; i < b->n_tensors; i++) {
        pmpd_build_tensor *t = &b->tensors[i];
        unsigned char *out;
        pmpd_status status;
        if (t->n_dims != 2 || t->type != PMPD_TENSOR_F32 || pmpd_quant_build_is_vocabulary(t))
            continue;
        status = pmpd_weight_stream_bytes(options, type, 2, t->dims, &bytes);
        if (status != PMPD_OK)
            return status;
        if (bytes > SIZE_MAX)
            return PMPD_ERR_OVERFLOW;
        out = (unsigned char *)malloc((size_t)bytes);
        if (!out)
            return PMPD_ERR_OUT_OF_MEMORY;
        /* Builder data are little-endian floats, the host order pmpd supports. */
        if (by_rows)
            status = pmpd_tcq_encode((const float *)(const void *)t->data, (size_t)t->dims[0], (size_t)t->dims[1],
                                     pmpd_tcq_quarter_bits_of(options), PMPD_TCQ_SEED, NULL, options->threads, out,
                                     (size_t)bytes, done, total, options->progress, options->progress_context);
        else
            status = pmpd_weight_encode_matrix(options, type, NULL, (const float *)(const void *)t->data, t->dims[0],
                                               t->dims[1], out, (size_t)bytes);
        if (status != PMPD_OK) {
            free(out);
            return status;
        }
        pmpd_build_replace_data(t, type, out, bytes);
        done += by_rows ? t->dims[0] : 1;
        if (!by_rows && options->progress)
            options->progress(options->progress_context, done, total);
    }
    return pmpd_quant_build_convert(b, PMPD_TENSOR_Q8, options->threads, NULL, NULL);
}

/* The table: one line per weight format the converter writes. */
static const pmpd_weight_encoder pmpd_weight_encoders[] = {
    {PMPD_TENSOR_F32, pmpd_encode_float, 1},      {PMPD_TENSOR_F16, pmpd_encode_float, 1},
    {PMPD_TENSOR_Q8, pmpd_encode_grouped, 1},     {PMPD_TENSOR_Q4, pmpd_encode_grouped, 1},
    {PMPD_TENSOR_Q2CB, pmpd_encode_grouped, 1},   {PMPD_TENSOR_ANYPREC, pmpd_encode_anyprec, 1},
    {PMPD_TENSOR_W8A8, pmpd_encode_w8a8, 0},      {PMPD_TENSOR_NUQ, pmpd_encode_rotated, 1},
    {PMPD_TENSOR_VQ2, pmpd_encode_rotated, 1},    {PMPD_TENSOR_TCQ, pmpd_encode_rotated, 1},
};

PMPD_INTERNAL const pmpd_weight_encoder *pmpd_weight_encoder_of(uint32_t type)
{
    size_t i;
    for (i = 0; i < sizeof pmpd_weight_encoders / sizeof pmpd_weight_encoders[0]; i++)
        if ((uint32_t)pmpd_weight_encoders[i].type == type)
            return &pmpd_weight_encoders[i];
    return NULL;
}

PMPD_INTERNAL uint32_t pmpd_weight_stream_type(const pmpd_convert_options *options, const pmpd_build_tensor *t)
{
    if (t->n_dims != 2)
        return PMPD_TENSOR_F32;
    if (options->keep_closest)
        return t->source_type ? t->source_type->closest : PMPD_TENSOR_F32;
    if (options->type == PMPD_TENSOR_ANYPREC && pmpd_quant_build_is_vocabulary(t)) {
        unsigned seed, parent;
        pmpd_weight_anyprec_widths(options, &seed, &parent);
        if (options->anyprec_vocabulary == PMPD_TENSOR_ANYPREC &&
            pmpd_anyprec_build_nests_vocabulary(t->dims[0], t->dims[1], parent))
            return PMPD_TENSOR_ANYPREC;
        return pmpd_weight_anyprec_vocabulary(options);
    }
    if ((pmpd_qformat_is_quantized((uint32_t)options->type) || options->type == PMPD_TENSOR_ANYPREC ||
         options->type == PMPD_TENSOR_NUQ || options->type == PMPD_TENSOR_VQ2 || options->type == PMPD_TENSOR_TCQ) &&
        pmpd_quant_build_is_vocabulary(t))
        return PMPD_TENSOR_Q8;
    return (uint32_t)options->type;
}

PMPD_INTERNAL pmpd_status pmpd_weight_stream_bytes(const pmpd_convert_options *options, uint32_t type,
                                                   uint32_t n_dims, const uint64_t *dims, uint64_t *bytes)
{
    unsigned seed, parent;
    if (type == PMPD_TENSOR_NUQ)
        return n_dims == 2 ? pmpd_nuq_size(dims[0], dims[1], pmpd_nuq_bits_of(options), bytes)
                           : PMPD_ERR_INVALID_ARGUMENT;
    if (type == PMPD_TENSOR_VQ2)
        return n_dims == 2 ? pmpd_vq_size(dims[0], dims[1], pmpd_vq_quarter_bits_of(options), bytes)
                           : PMPD_ERR_INVALID_ARGUMENT;
    if (type == PMPD_TENSOR_TCQ)
        return n_dims == 2 ? pmpd_tcq_size(dims[0], dims[1], pmpd_tcq_quarter_bits_of(options), bytes)
                           : PMPD_ERR_INVALID_ARGUMENT;
    if (type != PMPD_TENSOR_ANYPREC)
        return pmpd_weight_tensor_bytes(type, n_dims, dims, bytes);
    if (n_dims != 2)
        return PMPD_ERR_INVALID_ARGUMENT;
    pmpd_weight_anyprec_widths(options, &seed, &parent);
    return pmpd_anyprec_size(dims[0], dims[1], seed, parent, bytes);
}

PMPD_INTERNAL pmpd_status pmpd_weight_encode_matrix(const pmpd_convert_options *options, uint32_t type,
                                                    const pmpd_ldlq *ldlq, const float *values, uint64_t rows,
                                                    uint64_t cols, unsigned char *out, size_t size)
{
    uint64_t j;
    if (rows > SIZE_MAX || cols > SIZE_MAX || (ldlq && pmpd_weight_ldlq_block(type) == 0))
        return PMPD_ERR_INVALID_ARGUMENT;
    if (type == PMPD_TENSOR_ANYPREC) {
        unsigned seed, parent;
        pmpd_weight_anyprec_widths(options, &seed, &parent);
        memset(out, 0, size); /* the quantizer writes bits into zeroed slices */
        return pmpd_anyprec_build_matrix(values, rows, cols, NULL, seed, parent, options ? options->threads : 0, out,
                                         size);
    }
    if (type == PMPD_TENSOR_NUQ)
        return pmpd_nuq_encode(values, (size_t)rows, (size_t)cols, pmpd_nuq_bits_of(options), PMPD_NUQ_SEED, ldlq,
                               out, size);
    if (type == PMPD_TENSOR_VQ2)
        return pmpd_vq_encode(values, (size_t)rows, (size_t)cols, pmpd_vq_quarter_bits_of(options), PMPD_NUQ_SEED,
                              ldlq, out, size);
    if (type == PMPD_TENSOR_TCQ)
        return pmpd_tcq_encode(values, (size_t)rows, (size_t)cols, pmpd_tcq_quarter_bits_of(options), PMPD_TCQ_SEED,
                               ldlq, options ? options->threads : 0, out, size, 0, 0, NULL, NULL);
    if (type != PMPD_TENSOR_F16)
        return pmpd_quant_matrix(type, values, (size_t)rows, (size_t)cols, options ? options->threads : 0, out, size);
    if (cols == 0 || size / 2 / cols != rows)
        return PMPD_ERR_INVALID_ARGUMENT;
    for (j = 0; j < rows * cols; j++) {
        uint16_t h = pmpd_float_to_half(values[j]);
        out[2 * j] = (unsigned char)h;
        out[2 * j + 1] = (unsigned char)(h >> 8);
    }
    return PMPD_OK;
}

PMPD_INTERNAL size_t pmpd_weight_ldlq_block(uint32_t type)
{
    return type == PMPD_TENSOR_NUQ ? 1 : type == PMPD_TENSOR_VQ2 ? 2 : type == PMPD_TENSOR_TCQ ? PMPD_TCQ_SEQUENCE : 0;
}

PMPD_INTERNAL uint64_t pmpd_weight_row_block(uint32_t type)
{
    return type == PMPD_TENSOR_Q8 || type == PMPD_TENSOR_Q4 ? PMPD_QROWS : type == PMPD_TENSOR_F16 ? 1 : 0;
}
