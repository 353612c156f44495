/* Offline half of the table of weight formats (weights/format.h): for each
 * format, how the converter turns a float model's matrices into it.  One
 * row per format in encoders.c; the encoder itself lives with the other
 * offline code of its technique (offline/quant, offline/precision). */
#ifndef PMPD_OFFLINE_WEIGHTS_ENCODERS_H
#define PMPD_OFFLINE_WEIGHTS_ENCODERS_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/offline/format/builder.h"

#if PMPD_OFFLINE

typedef struct pmpd_weight_encoder {
    pmpd_tensor_type type;
    /* Converts the float matrices of b (all of them f32 on entry) to the
     * format; options gives widths and progress.  Errors:
     * PMPD_ERR_OUT_OF_MEMORY, PMPD_ERR_OVERFLOW, PMPD_ERR_INVALID_ARGUMENT. */
    pmpd_status (*convert)(pmpd_build_model *b, const pmpd_convert_options *options);
} pmpd_weight_encoder;

/* The encoder of a type, or NULL for a type the converter cannot write. */
PMPD_INTERNAL const pmpd_weight_encoder *pmpd_weight_encoder_of(uint32_t type);

#endif /* PMPD_OFFLINE */

#endif
