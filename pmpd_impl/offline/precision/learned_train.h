/* The learned scheduler's backward pass, shared with its gradient test. */
#ifndef PMPD_OFFLINE_PRECISION_LEARNED_TRAIN_H
#define PMPD_OFFLINE_PRECISION_LEARNED_TRAIN_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/precision/learned_scheduler.h"

#if PMPD_OFFLINE
/* Adds the cross-entropy gradient of one classification (trace from
 * pmpd_learned_classify on the same x) for `label` to grad, a block laid
 * out like the parameters.  work holds N + H + 2*M*D + T floats. */
PMPD_INTERNAL void pmpd_learned_backward(const pmpd_learned_view *v, const pmpd_learned_params *p, const float *x,
                                         size_t t_count, const pmpd_learned_trace *trace, uint32_t label,
                                         float *grad, float *work);
#endif
#endif
