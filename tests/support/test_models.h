/* Test helpers that turn the shared llama2.c files into containers in memory
 * (through the offline importers and writer). */
#ifndef PMPD_TEST_MODELS_H
#define PMPD_TEST_MODELS_H

#include <stddef.h>

#include "pmpd.h"
#include "pmpd_impl/offline/format/builder.h"

/* A serialized container: data is 64-byte aligned inside block (free(block)). */
typedef struct test_container {
    void *block;
    unsigned char *data;
    size_t size;
} test_container;

/* Imports ../shared/models/<model> (and <tokenizer> unless NULL) into b.
 * Returns PMPD_OK or the importer's status. */
pmpd_status test_import_shared(const char *model, const char *tokenizer, pmpd_build_model *b);

/* Serializes b into c. */
pmpd_status test_serialize(const pmpd_build_model *b, test_container *c);

/* Both steps: stories260K.bin + tok512.bin as a container. */
pmpd_status test_stories_container(test_container *c);

void test_container_free(test_container *c);

/* A shared checkpoint opened as a model: container and arena owned here. */
typedef struct test_opened_model {
    test_container container;
    void *arena_block;
    pmpd_model *model;
} test_opened_model;

/* Imports ../shared/<model> with <tokenizer>, converts its matrices to type
 * (PMPD_TENSOR_F32: as imported; any other through the converter's row for
 * it, offline/weights/encoders.c), serializes it and opens it from memory with a 1 MiB arena for
 * the model's bookkeeping.  Returns the first failing step's status;
 * test_opened_close releases whatever was made either way. */
pmpd_status test_open_shared(const char *model, const char *tokenizer, uint32_t type, test_opened_model *m);
void test_opened_close(test_opened_model *m);

/* The same from an imported model b (freed here, whatever happens):
 * converted with options (NULL or type f32: as it is), serialized, opened. */
pmpd_status test_open_built(pmpd_build_model *b, const pmpd_convert_options *options, test_opened_model *m);

/* Teacher-forced logits of model over ids, [position][vocab] (malloc'ed):
 * a prefill of the first id, then one decode step per id; each step is a
 * cmocka assertion. */
float *test_forced_logits(const pmpd_model *model, const int32_t *ids, size_t n);

/* stories260K.bin + tok512.bin converted to type and written to path by
 * pmpd_convert_file (pmpd-convert's path). */
pmpd_status test_convert_stories(uint32_t type, const char *path);

/* A container file opened in a malloc'ed 16 MiB arena. */
typedef struct test_opened_file {
    void *block;
    pmpd_model *model;
} test_opened_file;
pmpd_status test_open_file(const char *path, test_opened_file *o);
void test_file_close(test_opened_file *o);

/* The first PMPD_ARENA_ALIGNMENT-aligned byte of a block allocated with
 * PMPD_ARENA_ALIGNMENT bytes to spare, so planned arena figures are exact. */
void *test_aligned(void *block);

/* A session of model (config may be NULL) in a fresh malloc'ed arena of
 * exactly the planned size, so a short plan fails here; each step is a
 * cmocka assertion.  *block is what test_session_close frees. */
pmpd_session *test_session_open(const pmpd_model *model, const pmpd_session_config *config, void **block);
void test_session_close(pmpd_session *s, void *block);

#endif
