#include "pmpd_impl/offline/precision/calibrate_input.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/core/error.h"
#include "pmpd_impl/weights/format.h"
#include "pmpd_impl/model/model.h"
#include "pmpd_impl/offline/format/from_model.h"
#include "pmpd_impl/offline/import/import.h"

/* The loader's tables for one container (tensor table, layer pointers,
 * tokenizer state): far below this for any model pmpd runs. */
#define CALIBRATE_INPUT_ARENA_BYTES ((size_t)16 << 20)

static const char *calibrate_input_type_name(uint32_t type)
{
    const pmpd_weight_format *f = pmpd_weight_format_of(type);
    return f ? f->name : "of an unknown type";
}

static int calibrate_input_is_float(uint32_t type)
{
    return type == PMPD_TENSOR_F32 || type == PMPD_TENSOR_F16;
}

/* Every layer matrix float (f32 and f16 may mix: both are read as floats)
 * or every one nested; the first that breaks this is named. */
static pmpd_status calibrate_input_classify(const pmpd_model *m, uint32_t *layer_type, pmpd_error *err)
{
    uint32_t l, j;
    *layer_type = m->layers[0].wq->type;
    for (l = 0; l < m->info.n_layers; l++) {
        const pmpd_layer_weights *w = &m->layers[l];
        const pmpd_tensor *mats[7];
        mats[0] = w->wq, mats[1] = w->wk, mats[2] = w->wv, mats[3] = w->wo;
        mats[4] = w->w_gate, mats[5] = w->w_down, mats[6] = w->w_up;
        for (j = 0; j < 7; j++) {
            uint32_t type = mats[j]->type;
            int same_kind = calibrate_input_is_float(type) ? calibrate_input_is_float(*layer_type)
                                                           : type == *layer_type;
            if (!calibrate_input_is_float(type) && type != PMPD_TENSOR_ANYPREC)
                return pmpd_error_set(err, PMPD_ERR_UNSUPPORTED, PMPD_NO_OFFSET,
                                      "layer matrix %.*s is %s: schedules need float (f32, f16) matrices to "
                                      "quantize or nested (anyprec) ones; convert the checkpoint instead",
                                      (int)mats[j]->name_length, mats[j]->name, calibrate_input_type_name(type));
            if (!same_kind)
                return pmpd_error_set(err, PMPD_ERR_UNSUPPORTED, PMPD_NO_OFFSET,
                                      "layer matrix %.*s is %s but %s is %s: float and nested layers do not mix",
                                      (int)mats[j]->name_length, mats[j]->name, calibrate_input_type_name(type),
                                      "the first layer matrix", calibrate_input_type_name(*layer_type));
        }
    }
    return PMPD_OK;
}

static pmpd_status calibrate_input_container(const char *in_path, pmpd_build_model *b, uint32_t *layer_type,
                                             pmpd_error *err)
{
    void *block = malloc(CALIBRATE_INPUT_ARENA_BYTES);
    pmpd_arena arena;
    pmpd_model *model = NULL;
    pmpd_status st;
    pmpd_build_init(b);
    if (!block)
        return pmpd_error_set(err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory");
    pmpd_arena_init(&arena, block, CALIBRATE_INPUT_ARENA_BYTES);
    st = pmpd_model_open_file(in_path, &arena, &model, err);
    if (st == PMPD_OK)
        st = calibrate_input_classify(model, layer_type, err);
    if (st == PMPD_OK)
        st = pmpd_build_from_model(model,
                                   PMPD_BUILD_DROP(PMPD_SECTION_PRECISION_SCHEDULE) |
                                       PMPD_BUILD_DROP(PMPD_SECTION_LEARNED_SCHEDULER),
                                   b, err);
    pmpd_model_close(model);
    free(block);
    return st;
}

PMPD_INTERNAL pmpd_status pmpd_calibrate_input_load(const char *in_path, const char *tokenizer_path,
                                                    pmpd_build_model *b, uint32_t *layer_type, pmpd_error *err)
{
    unsigned char magic[4] = {0, 0, 0, 0};
    pmpd_convert_input failed = PMPD_CONVERT_INPUT_MODEL;
    pmpd_status st;
    FILE *f = fopen(in_path, "rb");
    if (!f)
        return pmpd_error_set(err, PMPD_ERR_NOT_FOUND, PMPD_NO_OFFSET, "cannot open %s", in_path);
    if (fread(magic, 1, 4, f) != 4)
        memset(magic, 0, 4);
    fclose(f);
    if (memcmp(magic, "PMPD", 4) == 0) {
        if (tokenizer_path)
            return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                                  "%s is a .pmpd container, which carries its own tokenizer: drop --tokenizer",
                                  in_path);
        return calibrate_input_container(in_path, b, layer_type, err);
    }
    *layer_type = PMPD_TENSOR_F32;
    pmpd_build_init(b);
    st = pmpd_import_file(in_path, tokenizer_path, 0, b, &failed, err);
    if (st != PMPD_OK) {
        /* Say which file the importer's message is about. */
        char message[PMPD_ERROR_MESSAGE_SIZE];
        if (err) {
            snprintf(message, sizeof message, "%s", err->message);
            pmpd_error_set(err, st, err->offset, "%s: %s",
                           failed == PMPD_CONVERT_INPUT_TOKENIZER ? tokenizer_path : in_path, message);
        }
        pmpd_build_free(b);
    }
    return st;
}

#undef CALIBRATE_INPUT_ARENA_BYTES
