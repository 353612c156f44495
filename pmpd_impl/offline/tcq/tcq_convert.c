/* TCQ in the converter (tcq_build.h): whole models, and the error figure
 * of an encoded matrix. */
#include "pmpd_impl/offline/tcq/tcq_build.h"

#include <stdlib.h>

#include "pmpd_impl/offline/quant/build.h"

PMPD_INTERNAL double pmpd_tcq_encoded_error(const float *values, size_t rows, size_t cols,
                                            const unsigned char *data)
{
    pmpd_tcq_matrix m;
    float *w = (float *)malloc(cols * sizeof *w);
    double error = 0, energy = 0;
    size_t r, c;
    if (!w)
        return -1.0;
    pmpd_tcq_bind(data, rows, cols, &m);
    for (r = 0; r < rows; r++) {
        pmpd_tcq_row(&m, r, w);
        for (c = 0; c < cols; c++) {
            double d = (double)values[r * cols + c] - w[c];
            error += d * d;
            energy += (double)values[r * cols + c] * values[r * cols + c];
        }
    }
    free(w);
    return energy > 0 ? error / energy : 0.0;
}

/* The matrices TCQ takes: every f32 matrix but the vocabulary's. */
static int tcq_takes(const pmpd_build_tensor *t)
{
    return t->n_dims == 2 && t->type == PMPD_TENSOR_F32 && !pmpd_quant_build_is_vocabulary(t);
}

PMPD_INTERNAL pmpd_status pmpd_tcq_build_convert(pmpd_build_model *b, unsigned quarter_bits, unsigned threads,
                                                 void (*progress)(void *context, uint64_t done, uint64_t total),
                                                 void *context)
{
    uint64_t total = 0, done = 0, bytes;
    uint32_t i;
    for (i = 0; i < b->n_tensors; i++)
        if (tcq_takes(&b->tensors[i]))
            total += b->tensors[i].dims[0];
    for (i = 0; i < b->n_tensors; i++) {
        pmpd_build_tensor *t = &b->tensors[i];
        unsigned char *out;
        pmpd_status status;
        if (!tcq_takes(t))
            continue;
        status = pmpd_tcq_size(t->dims[0], t->dims[1], quarter_bits, &bytes);
        if (status != PMPD_OK)
            return status;
        if (bytes > SIZE_MAX)
            return PMPD_ERR_OVERFLOW;
        out = (unsigned char *)malloc((size_t)bytes);
        if (!out)
            return PMPD_ERR_OUT_OF_MEMORY;
        /* Builder data are little-endian floats, the host order pmpd supports. */
        status = pmpd_tcq_encode((const float *)(const void *)t->data, (size_t)t->dims[0], (size_t)t->dims[1],
                                 quarter_bits, PMPD_TCQ_SEED, threads, out, (size_t)bytes, done, total, progress,
                                 context);
        if (status != PMPD_OK) {
            free(out);
            return status;
        }
        done += t->dims[0];
        pmpd_build_replace_data(t, PMPD_TENSOR_TCQ, out, bytes);
    }
    /* The embedding and classifier, all that is left in f32. */
    return pmpd_quant_build_convert(b, PMPD_TENSOR_Q8, NULL, NULL);
}
