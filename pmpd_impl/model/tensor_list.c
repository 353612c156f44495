/* Read-only views of an open model's tensor table, so tools can describe a
 * model (types, counts, bytes) without reaching into runtime internals. */
#include <string.h>

#include "pmpd_impl/model/model.h"

uint32_t pmpd_model_tensor_count(const pmpd_model *model)
{
    return model ? model->n_tensors : 0;
}

pmpd_status pmpd_model_tensor_at(const pmpd_model *model, uint32_t index, pmpd_tensor_desc *desc)
{
    const pmpd_tensor *t;
    uint32_t d;
    if (!model || !desc || index >= model->n_tensors)
        return PMPD_ERR_INVALID_ARGUMENT;
    t = &model->tensors[index];
    memset(desc, 0, sizeof *desc);
    desc->name = t->name;
    desc->name_length = t->name_length;
    desc->type = t->type;
    desc->n_dims = t->n_dims;
    for (d = 0; d < t->n_dims && d < 4; d++)
        desc->dims[d] = t->dims[d];
    desc->bytes = t->size;
    return PMPD_OK;
}

uint64_t pmpd_model_container_bytes(const pmpd_model *model)
{
    return model ? (uint64_t)model->byte_count : 0;
}
