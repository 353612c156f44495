/* The rotation of NUQ inputs and its inverse for the row lookup (nuq.h):
 * shared by every ISA, the butterflies inside being the compiled kernel. */
#include <math.h>
#include <string.h>

#include "pmpd_impl/core/hadamard.h"
#include "pmpd_impl/core/splitmix.h"
#include "pmpd_impl/weights/nuq/nuq.h"

PMPD_INTERNAL void pmpd_nuq_signs(uint64_t seed, uint64_t *signs, size_t words)
{
    size_t w;
    for (w = 0; w < words; w++)
        signs[w] = pmpd_splitmix64_next(&seed);
}

/* The sign of column c is negative: regenerated 64 columns at a time. */
#define NUQ_SIGN_WORDS 16 /* 1024 columns of signs on the stack per pass */

static void nuq_flip(const pmpd_nuq_matrix *m, const float *x, float *out)
{
    uint64_t signs[NUQ_SIGN_WORDS], state = m->seed;
    size_t c0, c;
    for (c0 = 0; c0 < m->cols; c0 += 64 * NUQ_SIGN_WORDS) {
        size_t end = m->cols - c0 < 64 * NUQ_SIGN_WORDS ? m->cols : c0 + 64 * NUQ_SIGN_WORDS;
        size_t w;
        for (w = 0; w < NUQ_SIGN_WORDS; w++)
            signs[w] = pmpd_splitmix64_next(&state);
        for (c = c0; c < end; c++)
            out[c] = (signs[(c - c0) / 64] >> (c % 64) & 1) ? -x[c] : x[c];
    }
}

/* Block b of x' as int8 steps of d = max |x'| / 127 (round to nearest;
 * an all-zero block gets d = 0 and zeros). */
static void nuq_quantize_block(const float *x, int8_t *q, float *d)
{
    float absmax = 0.0f, inverse;
    int c;
    for (c = 0; c < PMPD_NUQ_BLOCK; c++) {
        float a = x[c] < 0.0f ? -x[c] : x[c];
        absmax = a > absmax ? a : absmax;
    }
    *d = absmax / 127.0f;
    inverse = absmax > 0.0f ? 127.0f / absmax : 0.0f;
    for (c = 0; c < PMPD_NUQ_BLOCK; c++) {
        float v = x[c] * inverse;
        /* |v| <= 127 by construction; NaN (from a NaN input) becomes 0. */
        q[c] = (int8_t)(v != v ? 0 : (int)(v + (v >= 0.0f ? 0.5f : -0.5f)));
    }
}

PMPD_INTERNAL void pmpd_nuq_prepare_tokens(const pmpd_nuq_matrix *m, const float *x, size_t begin, size_t end,
                                           size_t n_tokens, void *act, float *work)
{
    const size_t blocks = m->padded / PMPD_NUQ_BLOCK;
    int8_t *q = (int8_t *)(uintptr_t)pmpd_nuq_act_q(m, act, n_tokens);
    float *d = (float *)(uintptr_t)pmpd_nuq_act_d(m, act, n_tokens);
    size_t t, b;
    for (t = begin; t < end; t++) {
        nuq_flip(m, x + t * m->cols, work);
        memset(work + m->cols, 0, (m->padded - m->cols) * sizeof(float));
        pmpd_hadamard(work, m->rotation, 0);
        for (b = 0; b < blocks; b++)
            nuq_quantize_block(work + b * PMPD_NUQ_BLOCK, q + t * m->padded + b * PMPD_NUQ_BLOCK, d + t * blocks + b);
    }
}

/* Sylvester's entry (a, b): -1 to the number of bits a and b share. */
static int nuq_sylvester_negative(size_t a, size_t b)
{
    size_t v = a & b;
    int odd = 0;
    while (v) {
        odd ^= 1;
        v &= v - 1;
    }
    return odd;
}

PMPD_INTERNAL void pmpd_nuq_unrotate(const pmpd_nuq_matrix *m, float (*value)(const void *context, size_t k),
                                     const void *context, float *out)
{
    size_t c, k;
    if (m->cols == m->rotation) {
        for (c = 0; c < m->cols; c++)
            out[c] = value(context, c);
        pmpd_hadamard(out, m->rotation, 1);
    } else {
        /* out[c] = sum_k H[k][c] v[k], H = H_m (x) H_p / sqrt(n). */
        unsigned order = pmpd_hadamard_order(m->rotation);
        size_t p = m->rotation / order;
        double norm = 1.0 / sqrt((double)m->rotation);
        for (c = 0; c < m->cols; c++) {
            double sum = 0;
            for (k = 0; k < m->rotation; k++) {
                int negative = nuq_sylvester_negative(k % p, c % p);
                if (order > 1)
                    negative ^= (int)(pmpd_hadamard_small_row(order, (unsigned)(k / p)) >> (c / p) & 1);
                sum += (negative ? -1.0 : 1.0) * value(context, k);
            }
            out[c] = (float)(sum * norm);
        }
    }
    /* Undo the sign flip: s o (...). */
    {
        uint64_t state = m->seed, word = 0;
        for (c = 0; c < m->cols; c++) {
            if (c % 64 == 0)
                word = pmpd_splitmix64_next(&state);
            if (word >> (c % 64) & 1)
                out[c] = -out[c];
        }
    }
}

/* Rotated entry k of one NUQ row: scale * level. */
typedef struct nuq_row_values {
    const pmpd_nuq_matrix *m;
    const uint8_t *row;
    float scale;
} nuq_row_values;

static float nuq_row_value(const void *context, size_t k)
{
    const nuq_row_values *v = (const nuq_row_values *)context;
    return v->scale * pmpd_nuq_levels(v->m->bits)[pmpd_nuq_get(v->row, k, v->m->bits)];
}

PMPD_INTERNAL void pmpd_nuq_row(const pmpd_nuq_matrix *m, size_t r, float *out)
{
    nuq_row_values values;
    values.m = m;
    values.row = m->index + r * m->row_bytes;
    values.scale = m->scale[r];
    pmpd_nuq_unrotate(m, nuq_row_value, &values, out);
}

#undef NUQ_SIGN_WORDS
