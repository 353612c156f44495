#include "pmpd_impl/weights/grouped/qact.h"

#include <math.h>
#include <string.h>

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/weights/grouped/qformat.h"

/* Sizes of the three buffers, each rounded up to the arena alignment. */
static int pmpd_qact_sizes(size_t n_tokens, size_t cols, size_t *qs, size_t *per_group)
{
    size_t tokens = n_tokens + (n_tokens & 1), groups = pmpd_qformat_groups(cols), tg;
    return pmpd_checked_mul(tokens, groups, &tg) && pmpd_checked_mul(tg, PMPD_QGROUP, qs) &&
           pmpd_checked_align_up(*qs, PMPD_ARENA_ALIGNMENT, qs) &&
           pmpd_checked_mul(tg, 4, per_group) &&
           pmpd_checked_align_up(*per_group, PMPD_ARENA_ALIGNMENT, per_group);
}

PMPD_INTERNAL pmpd_status pmpd_qact_bytes(size_t n_tokens, size_t cols, size_t *bytes)
{
    size_t qs, per_group, both;
    if (!pmpd_qact_sizes(n_tokens, cols, &qs, &per_group) || !pmpd_checked_add(qs, per_group, &both) ||
        !pmpd_checked_add(both, per_group, bytes))
        return PMPD_ERR_OVERFLOW;
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_qact_alloc(pmpd_arena *arena, size_t n_tokens, size_t cols, pmpd_qact *out)
{
    size_t qs, per_group;
    void *a, *b, *c;
    pmpd_status status;
    if (!pmpd_qact_sizes(n_tokens, cols, &qs, &per_group))
        return PMPD_ERR_OVERFLOW;
    if ((status = pmpd_arena_alloc(arena, qs, PMPD_ARENA_ALIGNMENT, &a)) != PMPD_OK ||
        (status = pmpd_arena_alloc(arena, per_group, PMPD_ARENA_ALIGNMENT, &b)) != PMPD_OK ||
        (status = pmpd_arena_alloc(arena, per_group, PMPD_ARENA_ALIGNMENT, &c)) != PMPD_OK)
        return status;
    out->qs = (int8_t *)a;
    out->scale = (float *)b;
    out->sum = (int32_t *)c;
    out->n_tokens = 0;
    out->n_groups = pmpd_qformat_groups(cols);
    return PMPD_OK;
}

/* One group of one token; x holds n valid columns (the rest is padding). */
static void pmpd_qact_group(pmpd_qact *act, size_t t, size_t g, const float *x, size_t n)
{
    float amax = 0.0f, inverse;
    int32_t sum = 0;
    size_t c, k;
    for (k = 0; k < n; k++)
        amax = fabsf(x[k]) > amax ? fabsf(x[k]) : amax;
    inverse = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (c = 0; c < PMPD_QGROUP / 8; c++) {
        int8_t *out = (int8_t *)pmpd_qact_chunk(act, t, g * (PMPD_QGROUP / 8) + c);
        for (k = 0; k < 8; k++) {
            size_t col = c * 8 + k;
            int8_t q = col < n ? (int8_t)lrintf(x[col] * inverse) : 0;
            out[k] = q;
            sum += q;
        }
    }
    act->scale[t * act->n_groups + g] = amax / 127.0f;
    act->sum[t * act->n_groups + g] = sum;
}

/* The padding token: what pmpd_qact_group makes of zeros, written directly
 * (a one-token GEMV pays for it on every call). */
static void pmpd_qact_zero_group(pmpd_qact *act, size_t t, size_t g)
{
    size_t c;
    for (c = 0; c < PMPD_QGROUP / 8; c++)
        memset((int8_t *)pmpd_qact_chunk(act, t, g * (PMPD_QGROUP / 8) + c), 0, 8);
    act->scale[t * act->n_groups + g] = 0.0f;
    act->sum[t * act->n_groups + g] = 0;
}

PMPD_INTERNAL void pmpd_qact_quantize_tokens(pmpd_qact *act, const float *x, size_t ldx, size_t cols,
                                             size_t begin, size_t end)
{
    size_t t, g;
    for (t = begin; t < end; t++) {
        for (g = 0; g < act->n_groups; g++) {
            size_t first = g * PMPD_QGROUP;
            size_t n = cols - first < PMPD_QGROUP ? cols - first : PMPD_QGROUP;
            if (t < act->n_tokens)
                pmpd_qact_group(act, t, g, x + t * ldx + first, n);
            else
                pmpd_qact_zero_group(act, t, g);
        }
    }
}

PMPD_INTERNAL void pmpd_qact_quantize(pmpd_qact *act, const float *x, size_t ldx, size_t n_tokens,
                                      size_t cols)
{
    act->n_tokens = n_tokens;
    act->n_groups = pmpd_qformat_groups(cols);
    pmpd_qact_quantize_tokens(act, x, ldx, cols, 0, n_tokens + (n_tokens & 1));
}
