/* What pmpd-calibrate starts from: a checkpoint, or a .pmpd container whose
 * layer matrices are float or already nested (offline, heap). */
#ifndef PMPD_OFFLINE_PRECISION_CALIBRATE_INPUT_H
#define PMPD_OFFLINE_PRECISION_CALIBRATE_INPUT_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/offline/format/builder.h"

#if PMPD_OFFLINE

/* Loads in_path into b (initialized here; freed on failure): a container
 * (told by its magic) is copied tensor for tensor, every section kept but
 * the static schedule and learned scheduler; anything else is imported as
 * a checkpoint with tokenizer_path.  *layer_type receives the type of the
 * layer matrices (PMPD_TENSOR_F32 for checkpoints).  Errors: the loader's
 * and importers', PMPD_ERR_INVALID_ARGUMENT (a tokenizer given for a
 * container), PMPD_ERR_UNSUPPORTED (layer matrices neither float nor
 * nested, or a mix of float and nested), each named in err. */
PMPD_INTERNAL pmpd_status pmpd_calibrate_input_load(const char *in_path, const char *tokenizer_path,
                                                    pmpd_build_model *b, uint32_t *layer_type, pmpd_error *err);

#endif
#endif
