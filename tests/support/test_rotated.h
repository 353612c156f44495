/* Test helpers shared by the rotated formats' tests (test_nuq.c,
 * test_vq.c, test_tcq.c): the malformed-header checks every such tensor
 * gets, and the streamed conversion of stories260K. */
#ifndef PMPD_TEST_ROTATED_H
#define PMPD_TEST_ROTATED_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "tests/support/test_models.h"

/* A format's view of untrusted tensor bytes (pmpd_nuq_view and the like,
 * its matrix dropped). */
typedef pmpd_status (*test_rotated_view)(const void *data, uint64_t size, uint64_t rows, uint64_t cols,
                                         uint64_t base_offset, pmpd_error *err);

/* Fails unless view(data) at base offset 1000 gives status with its error
 * at 1000 + offset (PMPD_NO_OFFSET: any) and a message naming format. */
void test_rotated_expect(test_rotated_view view, const char *format, const unsigned char *data, size_t size,
                         size_t rows, size_t cols, pmpd_status status, uint64_t offset, const char *what);

/* The header checks all rotated formats share, on bad (size + 1 bytes) as
 * copies of good (size bytes, rows x cols, with cols - 1 still a valid
 * shape): good, no header, magic, version, rows, cols, and an entry whose
 * shape disagrees.  bad is left a copy of good. */
void test_rotated_header(test_rotated_view view, const char *format, const unsigned char *good,
                         unsigned char *bad, size_t size, size_t rows, size_t cols);

/* The size and scale checks all rotated formats share (rows >= 5, the
 * scales at byte 64, padded to 64 bytes), on bad as copies of good:
 * truncated, a trailing byte, a NaN and a negative scale, a nonzero
 * padding byte after the scales.  bad is left a copy of good. */
void test_rotated_size_and_scales(test_rotated_view view, const char *format, const unsigned char *good,
                                  unsigned char *bad, size_t size, size_t rows, size_t cols);

/* Converts stories260K (../shared/models/) with options (its tokenizer
 * set here) into a temporary file named for format, opens it into f and
 * removes the file.  Returns the conversion's status (f opened only on
 * PMPD_OK). */
pmpd_status test_rotated_convert_stories(const pmpd_convert_options *options, const char *format,
                                         test_opened_file *f);

/* test_rotated_convert_stories, then checks that every layer matrix
 * (wq, w_down) took options->type and the classifier q8. */
void test_rotated_streamed(const pmpd_convert_options *options, const char *format, test_opened_file *f);

/* stories260K (../shared/models/) imported and converted with options by
 * the converter's rows, as pmpd-convert runs it, opened into o. */
void test_rotated_open_stories(const pmpd_convert_options *options, test_opened_model *o);

/* ||values - W||^2 / ||values||^2 for W the rows x cols tensor of type
 * in data (size bytes), read back row by row through the format table
 * (its row dequantization, not the product kernels). */
double test_rotated_error(uint32_t type, const float *values, size_t rows, size_t cols, const unsigned char *data,
                          size_t size);

/* A tensor an older encoder stored with a larger rotation size than
 * pmpd_hadamard_size(cols) now gives: 5 rows x 192 random normals
 * encoded by the converter's encoder for type at bits (nuq's bits, vq's
 * and tcq's quarter bits), rotation 192, then relabelled as 172 columns
 * (the header's cols field), as a converter before order 44 stored 172
 * columns.  Through the format table it must be accepted, each row equal
 * the first 172 values of the 192-column tensor's row (same codes, signs
 * and rotation), and the product of one token equal the dense product
 * with those rows (int8 activations: within 1% of |w| |x|). */
void test_rotated_older_rotation(uint32_t type, unsigned bits);

/* KL (mean over positions) and top-1 agreement of model's teacher-forced
 * logits on ids[0..n) against ref (n x the vocabulary). */
void test_rotated_score(const pmpd_model *model, const int32_t *ids, size_t n, const float *ref, double *kl,
                        double *top1);

#endif
