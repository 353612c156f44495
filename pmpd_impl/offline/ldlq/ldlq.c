/* LDLQ's factor and row rounding (ldlq.h). */
#include "pmpd_impl/offline/ldlq/ldlq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The unit upper triangular V and diagonal d of H = V diag(d) V^T, V
 * [n][n] (row-major, its strict upper part written), d [n]: Cholesky
 * from the last column back, so that each d_j is what column j adds once
 * every later column is known (the order LDLQ rounds in, reversed). */
static int ldlq_udu(const double *h, size_t n, double *v, double *d)
{
    size_t i, j, k;
    for (j = n; j-- > 0;) {
        const double *vj = v + j * n;
        double dj = h[j * n + j];
        for (k = j + 1; k < n; k++)
            dj -= vj[k] * vj[k] * d[k];
        if (!(dj > 0.0) || !isfinite(dj))
            return 0;
        d[j] = dj;
        for (i = 0; i < j; i++) {
            double *vi = v + i * n;
            double s = h[i * n + j];
            for (k = j + 1; k < n; k++)
                s -= vi[k] * vj[k] * d[k];
            vi[j] = s / dj;
        }
    }
    return 1;
}

/* U's columns of block [b0, b1) from V: U[i][B] = V[i][B] V_BB^-1 for the
 * rows i < b0 (V_BB unit upper triangular: forward substitution along the
 * row, into row: b1 - b0 doubles). */
static void ldlq_block_feedback(const double *v, size_t n, size_t b0, size_t b1, double *row, float *u)
{
    size_t i, c, k;
    for (i = 0; i < b0; i++)
        for (c = b0; c < b1; c++) {
            double s = v[i * n + c];
            for (k = b0; k < c; k++)
                s -= row[k - b0] * v[k * n + c];
            row[c - b0] = s;
            u[i * n + c] = (float)s;
        }
}

PMPD_INTERNAL pmpd_status pmpd_ldlq_factor(const double *hessian, size_t n, size_t block, pmpd_ldlq *f)
{
    double *h, *v, *d, *row, mean = 0.0;
    size_t i, b0;
    int ok;
    memset(f, 0, sizeof *f);
    if (n == 0 || block == 0)
        return PMPD_ERR_INVALID_ARGUMENT;
    if (n > SIZE_MAX / sizeof(double) / n)
        return PMPD_ERR_OVERFLOW;
    for (i = 0; i < n; i++)
        mean += hessian[i * n + i];
    mean /= (double)n;
    if (!(mean > 0.0) || !isfinite(mean))
        return PMPD_ERR_INVALID_ARGUMENT;
    h = (double *)malloc(n * n * sizeof *h);
    v = (double *)calloc(n * n, sizeof *v);
    d = (double *)malloc(n * sizeof *d);
    row = (double *)malloc((n < block ? n : block) * sizeof *row);
    f->hessian = (float *)malloc(n * n * sizeof *f->hessian);
    f->feedback = (float *)calloc(n * n, sizeof *f->feedback);
    if (!h || !v || !d || !row || !f->hessian || !f->feedback) {
        free(h);
        free(v);
        free(d);
        free(row);
        pmpd_ldlq_free(f);
        return PMPD_ERR_OUT_OF_MEMORY;
    }
    memcpy(h, hessian, n * n * sizeof *h);
    for (i = 0; i < n; i++)
        h[i * n + i] += PMPD_LDLQ_DAMPING * mean;
    for (i = 0; i < n * n; i++)
        f->hessian[i] = (float)h[i];
    ok = ldlq_udu(h, n, v, d);
    for (b0 = 0; ok && b0 < n; b0 += block)
        ldlq_block_feedback(v, n, b0, n - b0 < block ? n : b0 + block, row, f->feedback);
    free(h);
    free(v);
    free(d);
    free(row);
    if (!ok) {
        pmpd_ldlq_free(f);
        return PMPD_ERR_INVALID_ARGUMENT;
    }
    f->n = n;
    f->block = block;
    return PMPD_OK;
}

PMPD_INTERNAL void pmpd_ldlq_free(pmpd_ldlq *f)
{
    free(f->hessian);
    free(f->feedback);
    memset(f, 0, sizeof *f);
}

PMPD_INTERNAL void pmpd_ldlq_row(const pmpd_ldlq *f, size_t n, size_t block, const float *v, pmpd_ldlq_round round,
                                 void *context, float *target, float *q)
{
    size_t b0, k, j;
    memcpy(target, v, n * sizeof *target);
    for (b0 = 0; b0 < n; b0 += block) {
        const size_t b1 = n - b0 < block ? n : b0 + block;
        round(context, b0, b1, target + b0, q + b0);
        if (!f)
            continue;
        for (k = b0; k < b1; k++) {
            const float e = v[k] - q[k], *u = f->feedback + k * n;
            if (e == 0.0f)
                continue;
            for (j = b1; j < n; j++)
                target[j] += e * u[j];
        }
    }
}

PMPD_INTERNAL double pmpd_ldlq_rescale(const pmpd_ldlq *f, const float *v, const float *q)
{
    double vhq = 0.0, qhq = 0.0;
    size_t i, j;
    for (i = 0; i < f->n; i++) {
        const float *h = f->hessian + i * f->n;
        double hq = 0.0;
        for (j = 0; j < f->n; j++)
            hq += (double)h[j] * q[j];
        vhq += (double)v[i] * hq;
        qhq += (double)q[i] * hq;
    }
    return qhq > 0.0 && vhq > 0.0 && isfinite(vhq / qhq) ? vhq / qhq : 1.0;
}
