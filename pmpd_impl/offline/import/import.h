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

/* GGUF v3 file of Llama architecture, with its tokenizer if present. */
PMPD_INTERNAL pmpd_status pmpd_import_gguf(const unsigned char *data, size_t size, pmpd_build_model *out, pmpd_error *err);

/* Reads a whole file into a new malloc'ed buffer (*data, *size bytes).
 * Errors: PMPD_ERR_NOT_FOUND (cannot open), PMPD_ERR_IO; err names path. */
PMPD_INTERNAL pmpd_status pmpd_import_read_file(const char *path, unsigned char **data, size_t *size, pmpd_error *err);

/* Checks hyperparameters an importer read (the same rules the loader
 * applies); field_offset names the input offset for messages. */
PMPD_INTERNAL pmpd_status pmpd_import_check_hparams(const pmpd_model_info *h, uint64_t field_offset, pmpd_error *err);

#endif /* PMPD_OFFLINE */
#endif
