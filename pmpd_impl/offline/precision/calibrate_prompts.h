/* Calibration sets from a user's prompt file (offline, heap). */
#ifndef PMPD_OFFLINE_PRECISION_CALIBRATE_PROMPTS_H
#define PMPD_OFFLINE_PRECISION_CALIBRATE_PROMPTS_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"

#if PMPD_OFFLINE

/* Tokenizes each line of path with model's tokenizer (BOS first), cuts it
 * to BOS + config->prompt_length tokens (shorter lines are skipped), deals
 * the lines in turn to the training, validation and test sets, and lets
 * model continue each for config->output_length tokens.  Errors:
 * PMPD_ERR_NOT_FOUND (file), PMPD_ERR_INVALID_ARGUMENT (a set got no long
 * enough line, named in err), those of pmpd_calibration_set_from_prompts. */
PMPD_INTERNAL pmpd_status pmpd_calibration_sets_from_file(const pmpd_model *model, const char *path,
                                                          const pmpd_calibration_config *config,
                                                          pmpd_calibration_set sets[3], pmpd_error *err);

#endif
#endif
