/* splitmix64: the library's one seedable mixer.  Nearby states give
 * unrelated outputs, so it seeds the sampler's generator and drives the
 * offline trainers' sampling. */
#ifndef PMPD_CORE_SPLITMIX_H
#define PMPD_CORE_SPLITMIX_H

#include <stdint.h>

#include "pmpd_impl/core/config.h"

/* Advances *state and returns the next 64 mixed bits. */
PMPD_INTERNAL uint64_t pmpd_splitmix64_next(uint64_t *state);

/* The next output as a double uniform in [0, 1) (its top 53 bits). */
PMPD_INTERNAL double pmpd_splitmix64_unit(uint64_t *state);

#endif
