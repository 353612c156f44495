/* Offline TCQ (weights/tcq/tcq.h): the value table's k-means, the
 * trellis search (Viterbi over the 2^L states of a bitshift trellis) and
 * the encoder of float matrices. */
#ifndef PMPD_OFFLINE_TCQ_BUILD_H
#define PMPD_OFFLINE_TCQ_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/offline/format/builder.h"
#include "pmpd_impl/offline/ldlq/ldlq.h"
#include "pmpd_impl/weights/tcq/tcq.h"

#if PMPD_OFFLINE

/* The k-means the runtime's table (weights/tcq/tcq_table.c) was made
 * with: this seed, 2^20 samples, 64 iterations. */
#define PMPD_TCQ_TABLE_SEED UINT64_C(0x7463713531320a00)
#define PMPD_TCQ_TABLE_SAMPLES ((size_t)1 << 20)
#define PMPD_TCQ_TABLE_ITERATIONS 64

/* Lloyd's k-means of samples 2-D standard normal points (synth/normal.c
 * from state seed) into the symmetric codebook of tcq.h (the 8 images of
 * PMPD_TCQ_TABLE_REPS representatives), written as the table's 512
 * entries, table[2 j] and table[2 j + 1] entry j's values; mse (may be
 * NULL) gets the final mean squared error per coordinate against the
 * whole codebook.  Errors:
 * PMPD_ERR_INVALID_ARGUMENT (fewer samples than centroids),
 * PMPD_ERR_OUT_OF_MEMORY. */
PMPD_INTERNAL pmpd_status pmpd_tcq_build_table(uint64_t seed, size_t samples, unsigned iterations, float *table,
                                               double *mse);

/* The seed of every matrix's signs: NUQ's (offline/nuq/nuq_build.h), so
 * that matrices reading one input share one rotation whichever of the two
 * formats each is in. */
#define PMPD_TCQ_SEED UINT64_C(0x6e75713230323521)

/* Default width of a conversion (options->tcq_quarter_bits 0): 2 bits. */
#define PMPD_TCQ_DEFAULT_QUARTER_BITS 8

/* Bytes of a rows x cols tensor at quarter_bits (6..16).  Errors:
 * PMPD_ERR_INVALID_ARGUMENT (zero dimension, a width outside 6..16, more
 * than 2^17 columns), PMPD_ERR_OVERFLOW. */
PMPD_INTERNAL pmpd_status pmpd_tcq_size(uint64_t rows, uint64_t cols, unsigned quarter_bits, uint64_t *bytes);

/* Encodes values (rows x cols host floats, finite) into out (size bytes,
 * pmpd_tcq_size of it) on threads threads (0: one per core; the output is
 * the same for any count); progress (may be NULL) hears rows done_before +
 * rows done, of total, from the calling thread.  Each row: rotated, scaled
 * to the width's gain, each 256-column sequence searched (tail-biting
 * two-pass Viterbi; a sequence whose real columns end early enough that
 * its window never wraps, as padding leaves, an open search), then the
 * row scale set to the least-squares optimum for the values found.
 * ldlq (may be NULL) searches each sequence for LDLQ's target instead
 * (offline/ldlq/ldlq.h: the earlier sequences' errors fed forward; block
 * PMPD_TCQ_SEQUENCE, n the rotation size) and fits the scale in H's norm.
 * Errors: PMPD_ERR_INVALID_ARGUMENT (a size that does not match, a width
 * or shape pmpd_tcq_size refuses, a factor of another size or block),
 * PMPD_ERR_OUT_OF_MEMORY (a thread that
 * cannot start leaves its rows to the others). */
PMPD_INTERNAL pmpd_status pmpd_tcq_encode(const float *values, size_t rows, size_t cols, unsigned quarter_bits,
                                          uint64_t seed, const pmpd_ldlq *ldlq, unsigned threads, unsigned char *out,
                                          size_t size,
                                          uint64_t done_before, uint64_t total,
                                          void (*progress)(void *context, uint64_t done, uint64_t total),
                                          void *context);

/* A valid rows x cols tensor at quarter_bits into out (size bytes,
 * pmpd_tcq_size of it) with random bitstreams and scales in [0.5, 1.5)
 * from seed (also its sign seed): every bitstream is a valid code, so
 * kernel tests and timings need no search.  Errors:
 * PMPD_ERR_INVALID_ARGUMENT (as pmpd_tcq_encode). */
PMPD_INTERNAL pmpd_status pmpd_tcq_random(size_t rows, size_t cols, unsigned quarter_bits, uint64_t seed,
                                          unsigned char *out, size_t size);

#endif /* PMPD_OFFLINE */

#endif
