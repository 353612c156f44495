#include "pmpd_impl/offline/eval/next_token.h"

#include <math.h>

PMPD_INTERNAL int32_t pmpd_next_token_argmax(const float *logits, uint32_t vocab, uint32_t excluded)
{
    uint32_t i, best = excluded == 0 ? 1 : 0;
    for (i = 0; i < vocab; i++)
        if (i != excluded && logits[i] > logits[best])
            best = i;
    return (int32_t)best;
}

/* log sum_i exp(logits[i]), shifted by the maximum so no term overflows. */
static double pmpd_next_token_log_sum_exp(const float *logits, uint32_t vocab)
{
    double max = -INFINITY, z = 0.0;
    uint32_t i;
    for (i = 0; i < vocab; i++)
        max = logits[i] > max ? logits[i] : max;
    for (i = 0; i < vocab; i++)
        z += exp(logits[i] - max);
    return max + log(z);
}

PMPD_INTERNAL double pmpd_next_token_kl(const float *ref, const float *logits, uint32_t vocab)
{
    double lse_r = pmpd_next_token_log_sum_exp(ref, vocab), lse_q = pmpd_next_token_log_sum_exp(logits, vocab);
    double kl = 0.0;
    uint32_t i;
    for (i = 0; i < vocab; i++) {
        double lr = ref[i] - lse_r, lq = logits[i] - lse_q;
        kl += exp(lr) * (lr - lq);
    }
    return kl;
}

PMPD_INTERNAL double pmpd_next_token_nll(const float *logits, uint32_t vocab, int32_t target)
{
    return pmpd_next_token_log_sum_exp(logits, vocab) - logits[target];
}
