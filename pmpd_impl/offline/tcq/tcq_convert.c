/* The error figure of an encoded TCQ matrix (tcq_build.h); whole models
 * go through the rotated formats' loop (offline/weights/encoders.c). */
#include "pmpd_impl/offline/tcq/tcq_build.h"

#include <stdlib.h>


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
