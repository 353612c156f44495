/*
 * q2cb codebook learning (seed 003, section 5): every group of 32 weights
 * is scaled so its largest magnitude maps to the codebook range (+-64),
 * and the shapes of the scaled groups are clustered into 16 families, each
 * with one 4-level int8 codebook:
 *
 *   phase 1  each group's own best 4 levels (a tiny 1-D k-means) are its
 *            "shape"; k-means over the shapes gives 16 families;
 *   phase 2  per family, a 1-D 4-level k-means over all the scaled values
 *            of its groups gives the family's codebook;
 *   reassign every group picks the codebook (and refits its scale by least
 *            squares) with the smallest squared error; phase 2 and the
 *            reassignment alternate a few rounds.
 *
 * Levels are rounded to integers in [-64, 64] at the end (qformat.h).
 * Learning looks at no more than PMPD_Q2CB_LEARN_GROUPS groups spread over
 * the tensor; the final assignment covers every group.
 */
#include "pmpd_impl/offline/quant/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/model/f16.h"
#include "pmpd_impl/offline/parallel/parallel.h"

#define PMPD_Q2CB_LEARN_GROUPS 65536
#define PMPD_Q2CB_ROUNDS 4
#define PMPD_Q2CB_LLOYD_STEPS 8
#define PMPD_Q2CB_SCALE_STEPS 3
/* Groups (learning) and row blocks (packing) a thread takes at a time. */
#define PMPD_Q2CB_GROUPS_PER_STEP 1024
#define PMPD_Q2CB_BLOCKS_PER_STEP 16

typedef struct pmpd_q2cb_fit {
    const float *w;
    size_t cols, groups_per_row;
    size_t n_groups;       /* groups taking part in learning */
    size_t stride;         /* learning uses every stride-th group of the tensor */
    float *scale;          /* per learning group: value = scale * level */
    float *shape;          /* per learning group: 4 sorted levels (phase 1) */
    unsigned char *family; /* per learning group: codebook index */
    float levels[PMPD_Q2CB_CODEBOOKS][PMPD_Q2CB_LEVELS];
    unsigned threads;      /* as pmpd_parallel_run's */
} pmpd_q2cb_fit;

/* The values of tensor group gi (row-major over rows, then groups). */
static const float *pmpd_q2cb_values(const float *w, size_t cols, size_t groups_per_row, size_t gi,
                                     size_t *n)
{
    size_t r = gi / groups_per_row, g = gi % groups_per_row;
    *n = cols - g * PMPD_QGROUP < PMPD_QGROUP ? cols - g * PMPD_QGROUP : PMPD_QGROUP;
    return w + r * cols + g * PMPD_QGROUP;
}

/* Index of the level nearest x; levels sorted ascending: the number of
 * midpoints below x (sorted too, so that is where a walk up the levels
 * would stop).  Counted without branches: a walk's branches, as random as
 * the weights, took most of a q2cb conversion's time. */
static unsigned pmpd_q2cb_nearest(const float lv[PMPD_Q2CB_LEVELS], float x)
{
    return (unsigned)(x > 0.5f * (lv[0] + lv[1])) + (unsigned)(x > 0.5f * (lv[1] + lv[2])) +
           (unsigned)(x > 0.5f * (lv[2] + lv[3]));
}

static void pmpd_q2cb_sort4(float lv[PMPD_Q2CB_LEVELS])
{
    size_t i, j;
    for (i = 1; i < PMPD_Q2CB_LEVELS; i++)
        for (j = i; j > 0 && lv[j - 1] > lv[j]; j--) {
            float t = lv[j];
            lv[j] = lv[j - 1];
            lv[j - 1] = t;
        }
}

/* Largest magnitude of n values scaled into +-64 (0 for an all-zero group). */
static float pmpd_q2cb_natural_scale(const float *v, size_t n)
{
    float amax = 0.0f;
    size_t k;
    for (k = 0; k < n; k++)
        amax = fabsf(v[k]) > amax ? fabsf(v[k]) : amax;
    return amax / (float)PMPD_Q2CB_LEVEL_LIMIT;
}

/* Phase 1 shape: the 4-level 1-D k-means of one group's scaled values,
 * started from its quantiles. */
static void pmpd_q2cb_group_shape(const float *v, size_t n, float scale, float lv[PMPD_Q2CB_LEVELS])
{
    float x[PMPD_QGROUP];
    size_t k, j, step;
    for (k = 0; k < n; k++) {
        x[k] = scale > 0.0f ? v[k] / scale : 0.0f;
        for (j = k; j > 0 && x[j - 1] > x[j]; j--) {
            float t = x[j];
            x[j] = x[j - 1];
            x[j - 1] = t;
        }
    }
    for (j = 0; j < PMPD_Q2CB_LEVELS; j++)
        lv[j] = x[(2 * j + 1) * n / (2 * PMPD_Q2CB_LEVELS)];
    for (step = 0; step < PMPD_Q2CB_LLOYD_STEPS; step++) {
        float sum[PMPD_Q2CB_LEVELS] = {0};
        size_t count[PMPD_Q2CB_LEVELS] = {0};
        for (k = 0; k < n; k++) {
            unsigned i = pmpd_q2cb_nearest(lv, x[k]);
            sum[i] += x[k];
            count[i]++;
        }
        for (j = 0; j < PMPD_Q2CB_LEVELS; j++)
            if (count[j])
                lv[j] = sum[j] / (float)count[j];
        pmpd_q2cb_sort4(lv);
    }
}

/* Fits one group to the levels lv: alternates nearest-level indices and
 * the least-squares scale, starting from *scale.  Returns the squared
 * error and leaves the scale in *scale and the indices in idx (if given). */
static double pmpd_q2cb_fit_group(const float *v, size_t n, const float lv[PMPD_Q2CB_LEVELS], float *scale,
                                  unsigned char idx[PMPD_QGROUP], int round_scale_to_f16)
{
    float s = *scale;
    double error = 0.0;
    size_t k, step;
    for (step = 0; step <= PMPD_Q2CB_SCALE_STEPS && s > 0.0f; step++) {
        double vl = 0.0, ll = 0.0;
        float inverse = 1.0f / s;
        for (k = 0; k < n; k++) {
            float level = lv[pmpd_q2cb_nearest(lv, v[k] * inverse)];
            vl += (double)v[k] * level;
            ll += (double)level * level;
        }
        if (step == PMPD_Q2CB_SCALE_STEPS || ll == 0.0 || vl <= 0.0)
            break;
        s = (float)(vl / ll);
    }
    if (round_scale_to_f16)
        s = pmpd_f16_to_f32(pmpd_f32_to_f16(s));
    for (k = 0; k < n; k++) {
        unsigned i = s > 0.0f ? pmpd_q2cb_nearest(lv, v[k] / s) : 0;
        double d = (double)v[k] - (double)s * lv[i];
        error += d * d;
        if (idx)
            idx[k] = (unsigned char)i;
    }
    if (idx)
        for (k = n; k < PMPD_QGROUP; k++)
            idx[k] = 0;
    *scale = s;
    return error;
}

/* Best codebook for a group; updates *scale, returns the codebook. */
static unsigned pmpd_q2cb_best(const float levels[][PMPD_Q2CB_LEVELS], const float *v, size_t n,
                               float *scale, int round_scale_to_f16)
{
    double best_error = HUGE_VAL;
    float natural = pmpd_q2cb_natural_scale(v, n), best_scale = 0.0f;
    unsigned c, best = 0;
    for (c = 0; c < PMPD_Q2CB_CODEBOOKS; c++) {
        float s = natural;
        double e = pmpd_q2cb_fit_group(v, n, levels[c], &s, NULL, round_scale_to_f16);
        if (e < best_error) {
            best_error = e;
            best = c;
            best_scale = s;
        }
    }
    *scale = best_scale;
    return best;
}

/* Phase 1: k-means of the group shapes into the 16 families, seeded with
 * shapes spread evenly through the learning set (deterministic). */
static void pmpd_q2cb_families(pmpd_q2cb_fit *fit)
{
    size_t gi, c, j, step;
    for (c = 0; c < PMPD_Q2CB_CODEBOOKS; c++)
        memcpy(fit->levels[c], fit->shape + 4 * ((c * fit->n_groups) / PMPD_Q2CB_CODEBOOKS),
               sizeof fit->levels[c]);
    for (step = 0; step < PMPD_Q2CB_LLOYD_STEPS; step++) {
        double sum[PMPD_Q2CB_CODEBOOKS][PMPD_Q2CB_LEVELS];
        size_t count[PMPD_Q2CB_CODEBOOKS];
        memset(sum, 0, sizeof sum);
        memset(count, 0, sizeof count);
        for (gi = 0; gi < fit->n_groups; gi++) {
            const float *shape = fit->shape + 4 * gi;
            double best = HUGE_VAL;
            unsigned best_c = 0;
            for (c = 0; c < PMPD_Q2CB_CODEBOOKS; c++) {
                double d = 0.0;
                for (j = 0; j < PMPD_Q2CB_LEVELS; j++)
                    d += (double)(shape[j] - fit->levels[c][j]) * (shape[j] - fit->levels[c][j]);
                if (d < best) {
                    best = d;
                    best_c = (unsigned)c;
                }
            }
            fit->family[gi] = (unsigned char)best_c;
            for (j = 0; j < PMPD_Q2CB_LEVELS; j++)
                sum[best_c][j] += shape[j];
            count[best_c]++;
        }
        for (c = 0; c < PMPD_Q2CB_CODEBOOKS; c++)
            if (count[c])
                for (j = 0; j < PMPD_Q2CB_LEVELS; j++)
                    fit->levels[c][j] = (float)(sum[c][j] / (double)count[c]);
    }
}

/* Phase 2: per family, 1-D 4-level k-means over the scaled values of all
 * its groups, started from the current codebook. */
static void pmpd_q2cb_family_codebooks(pmpd_q2cb_fit *fit)
{
    size_t gi, c, j, k, step, n;
    for (step = 0; step < PMPD_Q2CB_LLOYD_STEPS; step++) {
        double sum[PMPD_Q2CB_CODEBOOKS][PMPD_Q2CB_LEVELS];
        size_t count[PMPD_Q2CB_CODEBOOKS][PMPD_Q2CB_LEVELS];
        memset(sum, 0, sizeof sum);
        memset(count, 0, sizeof count);
        for (gi = 0; gi < fit->n_groups; gi++) {
            const float *v = pmpd_q2cb_values(fit->w, fit->cols, fit->groups_per_row, gi * fit->stride, &n);
            const float *lv = fit->levels[fit->family[gi]];
            float s = fit->scale[gi];
            if (s <= 0.0f)
                continue;
            for (k = 0; k < n; k++) {
                float x = v[k] / s;
                unsigned i = pmpd_q2cb_nearest(lv, x);
                sum[fit->family[gi]][i] += x;
                count[fit->family[gi]][i]++;
            }
        }
        for (c = 0; c < PMPD_Q2CB_CODEBOOKS; c++) {
            for (j = 0; j < PMPD_Q2CB_LEVELS; j++)
                if (count[c][j])
                    fit->levels[c][j] = (float)(sum[c][j] / (double)count[c][j]);
            pmpd_q2cb_sort4(fit->levels[c]);
        }
    }
}

static void pmpd_q2cb_round_levels(float levels[][PMPD_Q2CB_LEVELS], signed char *out)
{
    size_t c, j;
    for (c = 0; c < PMPD_Q2CB_CODEBOOKS; c++) {
        for (j = 0; j < PMPD_Q2CB_LEVELS; j++) {
            float x = levels[c][j];
            x = x < -PMPD_Q2CB_LEVEL_LIMIT ? -PMPD_Q2CB_LEVEL_LIMIT : x > PMPD_Q2CB_LEVEL_LIMIT ? PMPD_Q2CB_LEVEL_LIMIT : x;
            levels[c][j] = (float)lrintf(x);
        }
        pmpd_q2cb_sort4(levels[c]);
        for (j = 0; j < PMPD_Q2CB_LEVELS; j++)
            out[c * PMPD_Q2CB_LEVELS + j] = (signed char)levels[c][j];
    }
}

/* Learning groups [begin, end): their natural scales and shapes. */
static pmpd_status pmpd_q2cb_shapes(void *context, unsigned worker, uint64_t begin, uint64_t end)
{
    pmpd_q2cb_fit *fit = (pmpd_q2cb_fit *)context;
    size_t gi, n;
    (void)worker;
    for (gi = (size_t)begin; gi < end; gi++) {
        const float *v = pmpd_q2cb_values(fit->w, fit->cols, fit->groups_per_row, gi * fit->stride, &n);
        fit->scale[gi] = pmpd_q2cb_natural_scale(v, n);
        pmpd_q2cb_group_shape(v, n, fit->scale[gi], fit->shape + 4 * gi);
    }
    return PMPD_OK;
}

/* Learning groups [begin, end) reassigned to their best codebooks. */
static pmpd_status pmpd_q2cb_reassign(void *context, unsigned worker, uint64_t begin, uint64_t end)
{
    pmpd_q2cb_fit *fit = (pmpd_q2cb_fit *)context;
    size_t gi, n;
    (void)worker;
    for (gi = (size_t)begin; gi < end; gi++) {
        const float *v = pmpd_q2cb_values(fit->w, fit->cols, fit->groups_per_row, gi * fit->stride, &n);
        fit->family[gi] =
            (unsigned char)pmpd_q2cb_best((const float(*)[PMPD_Q2CB_LEVELS])fit->levels, v, n, &fit->scale[gi], 0);
    }
    return PMPD_OK;
}

/* Each group's steps touch only its own entries, so the threads (the
 * per-group work, not the families' sums, which stay in order on one)
 * leave the result as one thread makes it. */
static pmpd_status pmpd_q2cb_learn(pmpd_q2cb_fit *fit)
{
    const pmpd_parallel_work shapes = {pmpd_q2cb_shapes, NULL, fit}, reassign = {pmpd_q2cb_reassign, NULL, fit};
    size_t round;
    pmpd_status status = pmpd_parallel_run(fit->threads, fit->n_groups, PMPD_Q2CB_GROUPS_PER_STEP, &shapes, NULL);
    if (status != PMPD_OK)
        return status;
    pmpd_q2cb_families(fit);
    for (round = 0; round < PMPD_Q2CB_ROUNDS && status == PMPD_OK; round++) {
        pmpd_q2cb_family_codebooks(fit);
        status = pmpd_parallel_run(fit->threads, fit->n_groups, PMPD_Q2CB_GROUPS_PER_STEP, &reassign, NULL);
    }
    return status;
}

typedef struct pmpd_q2cb_packing {
    const float *w;
    size_t rows, cols, groups_per_row;
    const float (*levels)[PMPD_Q2CB_LEVELS];
    unsigned char *body; /* zeroed */
} pmpd_q2cb_packing;

/* Packs every group of row blocks [begin, end) with its best rounded
 * codebook. */
static pmpd_status pmpd_q2cb_pack(void *context, unsigned worker, uint64_t begin, uint64_t end)
{
    const pmpd_q2cb_packing *p = (const pmpd_q2cb_packing *)context;
    size_t rb, g, i, k, n;
    (void)worker;
    for (rb = (size_t)begin; rb < end; rb++) {
        for (g = 0; g < p->groups_per_row; g++) {
            unsigned char *block = p->body + (rb * p->groups_per_row + g) * PMPD_Q2CB_BLOCK_BYTES;
            for (i = 0; i < PMPD_QROWS && rb * PMPD_QROWS + i < p->rows; i++) {
                size_t gi = (rb * PMPD_QROWS + i) * p->groups_per_row + g;
                const float *v = pmpd_q2cb_values(p->w, p->cols, p->groups_per_row, gi, &n);
                unsigned char idx[PMPD_QGROUP];
                float s;
                unsigned c = pmpd_q2cb_best(p->levels, v, n, &s, 1);
                pmpd_q2cb_fit_group(v, n, p->levels[c], &s, idx, 1);
                pmpd_quant_put_scale(block, i, s);
                block[2 * PMPD_QROWS + i / 2] |= (unsigned char)(c << (4 * (i % 2)));
                for (k = 0; k < PMPD_QGROUP; k++)
                    block[2 * PMPD_QROWS + 2 + i * 8 + k % 8] |= (unsigned char)(idx[k] << (2 * (k / 8)));
            }
        }
    }
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_quant_q2cb(const float *w, size_t rows, size_t cols, unsigned threads,
                                          unsigned char *out)
{
    pmpd_q2cb_fit fit;
    pmpd_q2cb_packing packing;
    const pmpd_parallel_work pack = {pmpd_q2cb_pack, NULL, &packing};
    pmpd_status status;
    size_t total;
    memset(&fit, 0, sizeof fit);
    fit.threads = threads;
    fit.w = w;
    fit.cols = cols;
    fit.groups_per_row = pmpd_qformat_groups(cols);
    total = rows * fit.groups_per_row;
    fit.stride = total > PMPD_Q2CB_LEARN_GROUPS ? total / PMPD_Q2CB_LEARN_GROUPS : 1;
    fit.n_groups = total / fit.stride;
    fit.scale = (float *)malloc(fit.n_groups * sizeof *fit.scale);
    fit.shape = (float *)malloc(fit.n_groups * 4 * sizeof *fit.shape);
    fit.family = (unsigned char *)malloc(fit.n_groups);
    if (!fit.scale || !fit.shape || !fit.family) {
        free(fit.scale);
        free(fit.shape);
        free(fit.family);
        return PMPD_ERR_OUT_OF_MEMORY;
    }
    status = pmpd_q2cb_learn(&fit);
    if (status != PMPD_OK)
        goto done;
    pmpd_q2cb_round_levels(fit.levels, (signed char *)out);
    packing.w = w;
    packing.rows = rows;
    packing.cols = cols;
    packing.groups_per_row = fit.groups_per_row;
    packing.levels = (const float(*)[PMPD_Q2CB_LEVELS])fit.levels;
    packing.body = out + PMPD_Q2CB_HEADER_BYTES;
    memset(packing.body, 0, (rows + PMPD_QROWS - 1) / PMPD_QROWS * fit.groups_per_row * PMPD_Q2CB_BLOCK_BYTES);
    status = pmpd_parallel_run(threads, (rows + PMPD_QROWS - 1) / PMPD_QROWS, PMPD_Q2CB_BLOCKS_PER_STEP, &pack, NULL);
done:
    free(fit.scale);
    free(fit.shape);
    free(fit.family);
    return status;
}

#undef PMPD_Q2CB_LEARN_GROUPS
#undef PMPD_Q2CB_ROUNDS
#undef PMPD_Q2CB_LLOYD_STEPS
#undef PMPD_Q2CB_SCALE_STEPS
#undef PMPD_Q2CB_GROUPS_PER_STEP
#undef PMPD_Q2CB_BLOCKS_PER_STEP
