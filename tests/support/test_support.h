/* Helpers shared by the cmocka tests. */
#ifndef PMPD_TEST_SUPPORT_H
#define PMPD_TEST_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"

/* Directory holding models/ and vectors/ (default ../shared, relative to the
 * repository root where `make` runs the tests; override with PMPD_SHARED). */
const char *test_shared_dir(void);

/* 1 when PMPD_TEST_REDUCED is set to anything but "" or "0": make check
 * sets it for its sanitizer and emulated runs, where tests shrink their
 * sizes (the native run keeps the full ones). */
int test_reduced(void);

/* 1 when PMPD_TEST_EMULATED is set likewise: make check sets it where the
 * tests run under qemu (RUN), tens of times slower than natively.  Tests
 * leave out there the heaviest work that depends on nothing the target
 * changes (offline encoders, planners); the native and sanitizer runs keep
 * it. */
int test_emulated(void);

/* Worker stacks for the tests that run products and sessions on small
 * ones: PMPD_WORKER_STACK_BYTES, or 16 times it in sanitizer builds, whose
 * instrumented frames are several times larger. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TEST_SANITIZED 1
#endif
#endif
#ifdef TEST_SANITIZED
#define TEST_WORKER_STACK_BYTES (16u * PMPD_WORKER_STACK_BYTES)
#else
#define TEST_WORKER_STACK_BYTES PMPD_WORKER_STACK_BYTES
#endif

/* Writes "<shared>/<relative>" into out; returns out. */
char *test_shared_path(char *out, size_t out_size, const char *relative);

/* Reads a whole file into a malloc'ed buffer (tests may use the heap).
 * Returns NULL if it cannot; *size receives the length. */
unsigned char *test_read_file(const char *path, size_t *size);

/* Reads up to max whitespace-separated token ids from the shared file
 * vectors/<name> (llama2.c's greedy runs); returns the count, 0 if the file
 * cannot be read. */
size_t test_read_vector_ids(const char *name, int32_t *ids, size_t max);

/* The greedy choice among n logits: the index of the largest, the lowest
 * index on ties. */
int32_t test_argmax(const float *logits, size_t n);

/* KL(p_ref || p_got) of the softmax distributions of two logit vectors of
 * length n, in double precision. */
double test_softmax_kl(const float *ref, const float *got, size_t n);

/* Reference attention in double precision: for each of `heads` queries
 * (q: [heads][dim]) over rows t < n of k and v (row t at t * row_stride
 * floats), out[h][d] = sum_t softmax_t(q_h·k_t / sqrt(dim)) v_t[d]. */
void test_softmax_attention(const float *q, size_t heads, size_t dim, const float *k, const float *v,
                            size_t row_stride, size_t n, double *out);

/* Deterministic pseudo-random numbers for test data (xorshift64*). */
typedef struct test_rng {
    uint64_t state;
} test_rng;

void test_rng_seed(test_rng *rng, uint64_t seed);
uint32_t test_rng_u32(test_rng *rng);
/* Uniform in [-1, 1). */
float test_rng_uniform(test_rng *rng);
/* Standard normal (Box-Muller). */
float test_rng_normal(test_rng *rng);

/* GPT-2's byte-level spelling of byte b, written by the rule itself
 * (printable Latin-1 bytes stand for themselves, the others in order for
 * U+0100, U+0101, ...) into out (2 bytes); returns its length. */
size_t test_byte_level_piece(unsigned b, char *out);

#endif
