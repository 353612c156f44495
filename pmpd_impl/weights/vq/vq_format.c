/* The table row of VQ weights (rotated/rotated_format.h): the rotated
 * formats' two steps, the input rotated and quantized once per shared
 * input and then reordered for pairs (vq.h), then the rows split over the
 * pool. */
#include "pmpd_impl/weights/rotated/rotated_format.h"
#include "pmpd_impl/weights/vq/vq.h"

PMPD_ROTATED_FORMAT(vq, PMPD_TENSOR_VQ2, pmpd_weights_vq2, pmpd_vq_pair_order)
