/* The table row of TCQ weights (rotated/rotated_format.h): the rotated
 * input prepared as NUQ's (int8 per block of 32), then the rows split over
 * the pool in blocks of 4 (model/linear.c runs the two steps, once for q,
 * k and v together: matrices with one input width and one sign seed share
 * the rotation). */
#include "pmpd_impl/weights/rotated/rotated_format.h"
#include "pmpd_impl/weights/tcq/tcq.h"

PMPD_ROTATED_FORMAT(tcq, PMPD_TENSOR_TCQ, pmpd_weights_tcq, PMPD_ROTATED_KEEP_ORDER)
