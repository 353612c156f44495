/* Activation importance for the nested quantizer: how much each weight
 * column matters, measured as the mean square of the layer's input in
 * that column over calibration text run through the float model.  A
 * rounding error in column c adds about importance[c] * error^2 to the
 * layer's expected output error, which is what the weighted k-means of
 * pmpd_anyprec_quantize minimises. */
#ifndef PMPD_OFFLINE_PRECISION_IMPORTANCE_H
#define PMPD_OFFLINE_PRECISION_IMPORTANCE_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/format/container.h"
#include "pmpd_impl/offline/format/tensor_records.h"

#if PMPD_OFFLINE
typedef struct pmpd_importance_tensor {
    pmpd_tensor_record head; /* name, the model tensor, cols */
    double *sum_squares;  /* [cols] over every input row seen */
    uint64_t rows_seen;
    float *weights;       /* [cols], once finished */
} pmpd_importance_tensor;

typedef struct pmpd_anyprec_importance {
    uint32_t n_tensors, capacity;
    pmpd_importance_tensor *tensors;
    pmpd_status status;   /* first failure inside the collection */
} pmpd_anyprec_importance;

/* Runs every prompt of set followed by its reference continuation through
 * float_model and collects each linear layer's column importance (mean
 * square input, floored at 1e-6 of the tensor's mean so every weight stays
 * positive).  Free with pmpd_anyprec_importance_free, whatever it returns.
 * Errors: session errors, PMPD_ERR_OUT_OF_MEMORY. */
PMPD_INTERNAL pmpd_status pmpd_anyprec_importance_collect(const pmpd_model *float_model,
                                                          const pmpd_calibration_set *set,
                                                          pmpd_anyprec_importance *importance);

/* The finished weights of tensor `name` if they were collected for `cols`
 * columns, else NULL (the quantizer then weighs columns equally). */
PMPD_INTERNAL const float *pmpd_anyprec_importance_find(const pmpd_anyprec_importance *importance, const char *name,
                                                        uint64_t cols);

PMPD_INTERNAL void pmpd_anyprec_importance_free(pmpd_anyprec_importance *importance);
#endif

#endif
