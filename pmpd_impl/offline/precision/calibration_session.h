/* A session in its own heap block, as the offline calibration tools run
 * them (calibrate.c, learned_train.c). */
#ifndef PMPD_OFFLINE_PRECISION_CALIBRATION_SESSION_H
#define PMPD_OFFLINE_PRECISION_CALIBRATION_SESSION_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/model/session.h"

#if PMPD_OFFLINE
typedef struct pmpd_calibration_session {
    void *block; /* malloc'ed arena behind the session */
    pmpd_session *session;
} pmpd_calibration_session;

/* A default-configured session of model for context tokens.  Whatever it
 * returns, pmpd_calibration_session_close releases what was made. */
PMPD_INTERNAL pmpd_status pmpd_calibration_session_open(const pmpd_model *model, uint32_t context,
                                                        pmpd_calibration_session *cs);
/* The same with n_threads threads (0 = 1), for tools that run many
 * evaluations of a larger model (palette/sensitivity.c). */
PMPD_INTERNAL pmpd_status pmpd_calibration_session_open_threads(const pmpd_model *model, uint32_t context,
                                                                unsigned n_threads, pmpd_calibration_session *cs);
PMPD_INTERNAL void pmpd_calibration_session_close(pmpd_calibration_session *cs);

/* Runs every prompt of set followed by its reference continuation through
 * model (one prefill each, on n_threads threads, 0 = 1) with observer
 * seeing every linear layer's input (session.h: pmpd_linear_observer);
 * stops early once *observer_status (may be NULL) is not PMPD_OK, and
 * returns it then.  What the calibration observers share (column
 * importance, W8A8 input ranges, LDLQ's second moments).  Errors: session
 * errors, PMPD_ERR_OUT_OF_MEMORY. */
PMPD_INTERNAL pmpd_status pmpd_calibration_observe(const pmpd_model *model, const pmpd_calibration_set *set,
                                                   unsigned n_threads, pmpd_linear_observer observer, void *context,
                                                   const pmpd_status *observer_status);
#endif

#endif
