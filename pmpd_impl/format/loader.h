/* Container loader internals shared with the fuzz harnesses and the rest of
 * the runtime. */
#ifndef PMPD_FORMAT_LOADER_H
#define PMPD_FORMAT_LOADER_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/model/model.h"

/* Open flag: skip the CRC comparisons.  Only for fuzzing, so mutated inputs
 * reach the checks behind the checksums; every other check still runs. */
#define PMPD_LOAD_SKIP_CHECKSUMS 1u

/* pmpd_model_open_memory with flags. */
PMPD_INTERNAL pmpd_status pmpd_container_open(const void *data, size_t size, pmpd_arena *arena, unsigned flags,
                                              pmpd_model **out, pmpd_error *err);

/* The tensor called name, or NULL. */
PMPD_INTERNAL const pmpd_tensor *pmpd_model_find_tensor(const pmpd_model *model, const char *name);

/* The section of the given kind (at most one per kind), or NULL. */
PMPD_INTERNAL const pmpd_section *pmpd_model_find_section(const pmpd_model *model, uint32_t kind);

#endif
