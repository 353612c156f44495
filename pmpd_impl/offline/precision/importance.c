/* Column importance from the float model's activations (importance.h). */
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/model/session.h"
#include "pmpd_impl/offline/precision/calibration_session.h"
#include "pmpd_impl/offline/precision/importance.h"

static pmpd_importance_tensor *importance_entry(pmpd_anyprec_importance *imp, const pmpd_tensor *w)
{
    int created;
    pmpd_importance_tensor *e = (pmpd_importance_tensor *)pmpd_tensor_record_of(
        (void **)&imp->tensors, &imp->n_tensors, &imp->capacity, sizeof *imp->tensors, w, &created);
    if (e && created)
        e->sum_squares = (double *)calloc((size_t)e->head.cols, sizeof(double));
    return e && e->sum_squares ? e : NULL;
}

static void importance_observe(void *context, const pmpd_tensor *w, const float *x, size_t n_tokens)
{
    pmpd_anyprec_importance *imp = (pmpd_anyprec_importance *)context;
    pmpd_importance_tensor *e;
    size_t t, c;
    if (imp->status != PMPD_OK)
        return;
    e = importance_entry(imp, w);
    if (!e) {
        imp->status = PMPD_ERR_OUT_OF_MEMORY;
        return;
    }
    for (t = 0; t < n_tokens; t++, x += e->head.cols)
        for (c = 0; c < e->head.cols; c++)
            e->sum_squares[c] += (double)x[c] * x[c];
    e->rows_seen += n_tokens;
}

static pmpd_status importance_finish(pmpd_importance_tensor *e)
{
    double mean = 0.0, floor;
    uint64_t c;
    e->weights = (float *)malloc((size_t)e->head.cols * sizeof(float));
    if (!e->weights)
        return PMPD_ERR_OUT_OF_MEMORY;
    for (c = 0; c < e->head.cols; c++)
        mean += e->sum_squares[c] / (double)e->rows_seen;
    mean /= (double)e->head.cols;
    /* A column that never fired still gets a little weight: the quantizer
     * wants every weight positive, and the calibration text may simply
     * have missed what excites it. */
    floor = mean > 0.0 ? 1e-6 * mean : 1.0;
    for (c = 0; c < e->head.cols; c++) {
        double w = e->sum_squares[c] / (double)e->rows_seen;
        e->weights[c] = (float)(w > floor ? w : floor);
    }
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_anyprec_importance_collect(const pmpd_model *float_model,
                                                          const pmpd_calibration_set *set,
                                                          pmpd_anyprec_importance *importance)
{
    uint32_t i;
    pmpd_status st;
    memset(importance, 0, sizeof *importance);
    st = pmpd_calibration_observe(float_model, set, 1, importance_observe, importance, &importance->status);
    for (i = 0; i < importance->n_tensors && st == PMPD_OK; i++)
        st = importance_finish(&importance->tensors[i]);
    return st;
}

PMPD_INTERNAL const float *pmpd_anyprec_importance_find(const pmpd_anyprec_importance *importance, const char *name,
                                                        uint64_t cols)
{
    uint32_t i;
    if (!importance)
        return NULL;
    for (i = 0; i < importance->n_tensors; i++)
        if (strcmp(importance->tensors[i].head.name, name) == 0 && importance->tensors[i].head.cols == cols)
            return importance->tensors[i].weights;
    return NULL;
}

PMPD_INTERNAL void pmpd_anyprec_importance_free(pmpd_anyprec_importance *importance)
{
    uint32_t i;
    for (i = 0; i < importance->n_tensors; i++) {
        free(importance->tensors[i].sum_squares);
        free(importance->tensors[i].weights);
    }
    free(importance->tensors);
    memset(importance, 0, sizeof *importance);
}
