/* The table row of NUQ weights (rotated/rotated_format.h): the input
 * rotated once, x' = H (x o s), and quantized to int8 per block of 32, then
 * the rows split over the pool in blocks of 4 (model/linear.c runs the two
 * steps, once for q, k and v together: matrices with one input width and
 * one sign seed share the rotation). */
#include "pmpd_impl/weights/nuq/nuq.h"
#include "pmpd_impl/weights/rotated/rotated_format.h"

PMPD_ROTATED_FORMAT(nuq, PMPD_TENSOR_NUQ, pmpd_weights_nuq, PMPD_ROTATED_KEEP_ORDER)
