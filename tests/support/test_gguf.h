/* A small GGUF v3 writer for tests: turns a pmpd_build_model (f32 tensors)
 * into GGUF bytes with a chosen ggml type per tensor, quantizing with its own
 * code, so importer tests and fuzz seeds need no external tool. */
#ifndef PMPD_TEST_GGUF_H
#define PMPD_TEST_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd_impl/offline/format/builder.h"

#define TEST_GGML_F32 0u
#define TEST_GGML_F16 1u
#define TEST_GGML_Q4_0 2u
#define TEST_GGML_Q8_0 8u

/* Chooses the ggml type of tensor index i (NULL: all f32). */
typedef uint32_t (*test_gguf_type_fn)(const pmpd_build_tensor *t);

/* Writes b (with its tokenizer section, if any, as tokenizer.ggml.* with
 * spaces spelled U+2581) into a malloc'ed buffer.  Returns NULL on failure. */
unsigned char *test_gguf_write(const pmpd_build_model *b, test_gguf_type_fn type_of, size_t *size);

/* The value element i of f32 tensor t takes after writing it as type and
 * decoding by the definition of that type. */
float test_gguf_expected(const pmpd_build_tensor *t, uint32_t type, uint64_t i);

/* IEEE binary16 bits to float, by the definition of the format. */
float test_half_value(uint16_t bits);

#endif
