/* The containers linked into the image: defined in the generated C files
 * (embed-model.sh).  The float model checks the plain path against
 * llama2.c; the full-stack one (nested weights with the learned scheduler,
 * PQ KV codebooks: pmpd-convert's pipeline) is what a board would run. */
#ifndef FIRMWARE_MODEL_BLOB_H
#define FIRMWARE_MODEL_BLOB_H

#include <stddef.h>

extern const unsigned char firmware_float_blob[];
extern const size_t firmware_float_blob_size;
extern const unsigned char firmware_full_blob[];
extern const size_t firmware_full_blob_size;

#endif
