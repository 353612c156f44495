/* The plain 4-bit GEMV that nested weights are judged against, timed in the
 * same run and on the same shape as the any-precision rows. */
#ifndef PMPD_EXAMPLES_BENCH_ANYPREC_Q4_H
#define PMPD_EXAMPLES_BENCH_ANYPREC_Q4_H

#include "examples/common/bench.h"

/* Seconds per q4 GEMV of rows x cols (activation quantization included,
 * weights streamed from RAM) with the single-thread pool and with all;
 * 0, or -1 after printing why. */
int bench_anyprec_q4_seconds(const bench_context *ctx, pmpd_pool *single, pmpd_pool *all, uint32_t rows,
                             uint32_t cols, double *one, double *every);

#endif
