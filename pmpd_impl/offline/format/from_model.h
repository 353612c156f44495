/* A loaded container back into a model under construction (offline,
 * heap): how the tools that add sections to an existing .pmpd keep
 * everything else byte for byte, and how a model being built is opened
 * with the runtime loader to run it. */
#ifndef PMPD_OFFLINE_FORMAT_FROM_MODEL_H
#define PMPD_OFFLINE_FORMAT_FROM_MODEL_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/offline/format/builder.h"

#if PMPD_OFFLINE

/* Bit k of a drop mask drops sections of kind k (kinds below 32). */
#define PMPD_BUILD_DROP(kind) (1u << (kind))

/* Fills b (initialized here) with copies of every tensor of model, in order
 * (nested tensors through their own header), and every section whose kind
 * is not in drop_mask, with its version and flags.  err names the tensor
 * or section that could not be copied.  On failure b is freed. */
PMPD_INTERNAL pmpd_status pmpd_build_from_model(const pmpd_model *model, uint32_t drop_mask, pmpd_build_model *b,
                                                pmpd_error *err);

/* A model under construction, serialized and opened in memory. */
typedef struct pmpd_build_opened {
    void *block;         /* the serialized container (free) */
    unsigned char *data;
    size_t size;
    void *arena_block;   /* the model's tables */
    pmpd_model *model;
} pmpd_build_opened;

/* Serializes b and opens it with the runtime loader, so what runs is what
 * would be written.  pmpd_build_close(o) releases it, whatever this
 * returned. */
PMPD_INTERNAL pmpd_status pmpd_build_open(const pmpd_build_model *b, pmpd_build_opened *o, pmpd_error *err);
PMPD_INTERNAL void pmpd_build_close(pmpd_build_opened *o);

/* Writes the serialized container of o to path through "<path>.tmp". */
PMPD_INTERNAL pmpd_status pmpd_build_opened_write(const pmpd_build_opened *o, const char *path, pmpd_error *err);

#endif
#endif
