/* The container linked into the image: defined in the generated model_blob.c. */
#ifndef FIRMWARE_MODEL_BLOB_H
#define FIRMWARE_MODEL_BLOB_H

#include <stddef.h>

extern const unsigned char firmware_model_blob[];
extern const size_t firmware_model_blob_size;

#endif
