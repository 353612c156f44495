/* Offline precision allocation: the phase-aware (prefill, decode) pair and
 * the static PMPD schedule, both chosen by measured quality on a
 * validation set against the widest configuration's quality. */
#include <string.h>

#include "pmpd.h"

static void precision_solver_record(pmpd_calibration_report *report, const pmpd_precision_schedule *schedule,
                          const pmpd_calibration_quality *quality)
{
    if (!report || report->n >= PMPD_CALIBRATION_MAX_CANDIDATES)
        return;
    report->schedule[report->n] = *schedule;
    report->quality[report->n] = *quality;
    report->n++;
}

static pmpd_status precision_solver_evaluate(const pmpd_model *nested, const pmpd_calibration_set *set,
                                   const pmpd_precision_schedule *schedule, pmpd_calibration_report *report,
                                   pmpd_calibration_quality *quality)
{
    pmpd_status st = pmpd_calibration_evaluate(nested, set, schedule, quality);
    if (st == PMPD_OK)
        precision_solver_record(report, schedule, quality);
    return st;
}

pmpd_status pmpd_precision_phase_aware(const pmpd_model *nested, const pmpd_calibration_set *validation,
                                       double epsilon, pmpd_precision_schedule *best,
                                       pmpd_calibration_quality *reference, pmpd_calibration_report *report)
{
    pmpd_precision_schedule candidate;
    pmpd_calibration_quality quality;
    unsigned seed, parent, prefill, decode, best_prefill, best_decode;
    pmpd_status st;
    if (!nested || !validation || !best || !reference)
        return PMPD_ERR_INVALID_ARGUMENT;
    st = pmpd_model_anyprec_widths(nested, &seed, &parent);
    if (st != PMPD_OK)
        return st;
    if (report)
        report->n = 0;
    pmpd_precision_schedule_uniform(&candidate, parent, parent);
    st = precision_solver_evaluate(nested, validation, &candidate, report, reference);
    best_prefill = best_decode = parent;
    for (decode = seed; decode <= parent && st == PMPD_OK; decode++)
        for (prefill = decode; prefill <= parent && st == PMPD_OK; prefill++) {
            if (prefill == parent && decode == parent)
                continue;
            pmpd_precision_schedule_uniform(&candidate, prefill, decode);
            st = precision_solver_evaluate(nested, validation, &candidate, report, &quality);
            if (st == PMPD_OK && quality.rouge_l >= reference->rouge_l - epsilon &&
                (decode < best_decode || (decode == best_decode && prefill < best_prefill))) {
                best_decode = decode;
                best_prefill = prefill;
            }
        }
    pmpd_precision_schedule_uniform(best, best_prefill, best_decode);
    return st;
}

pmpd_status pmpd_precision_static_solve(const pmpd_model *nested, const pmpd_calibration_set *validation,
                                        double epsilon, unsigned prefill_bits, unsigned n_candidates,
                                        pmpd_precision_schedule *best, pmpd_calibration_report *report)
{
    pmpd_precision_schedule candidate;
    pmpd_calibration_quality reference, quality, best_quality;
    unsigned seed, parent, n_switches, i, choice[PMPD_SCHEDULE_MAX_WIDTHS];
    uint32_t points[8], ol;
    pmpd_status st;
    if (!nested || !validation || !best || n_candidates < 2 || n_candidates > 8)
        return PMPD_ERR_INVALID_ARGUMENT;
    st = pmpd_model_anyprec_widths(nested, &seed, &parent);
    if (st != PMPD_OK)
        return st;
    if (report)
        report->n = 0;
    /* Switch points {0, OL/(N-1), ..., (N-2)OL/(N-1), never}. */
    ol = validation->output_length;
    for (i = 0; i + 1 < n_candidates; i++)
        points[i] = (uint32_t)((uint64_t)i * ol / (n_candidates - 1));
    points[n_candidates - 1] = PMPD_SCHEDULE_NEVER;
    pmpd_precision_schedule_uniform(&candidate, parent, parent);
    st = precision_solver_evaluate(nested, validation, &candidate, report, &reference);
    pmpd_precision_schedule_uniform(best, prefill_bits, parent);
    best_quality = reference;
    best_quality.average_decode_bits = parent;
    n_switches = parent - seed;
    memset(choice, 0, sizeof choice);
    /* Every non-decreasing assignment of switch points to the narrower
     * widths, counted like an odometer whose digits never decrease. */
    while (st == PMPD_OK) {
        memset(&candidate, 0, sizeof candidate);
        candidate.prefill_bits = prefill_bits;
        candidate.n_widths = n_switches + 1;
        for (i = 0; i <= n_switches; i++) {
            candidate.decode_bits[i] = parent - i;
            candidate.from_step[i] = i == 0 ? 0 : points[choice[i - 1]];
        }
        st = precision_solver_evaluate(nested, validation, &candidate, report, &quality);
        if (st == PMPD_OK && quality.rouge_l >= reference.rouge_l - epsilon &&
            (quality.average_decode_bits < best_quality.average_decode_bits ||
             (quality.average_decode_bits == best_quality.average_decode_bits &&
              quality.rouge_l > best_quality.rouge_l))) {
            *best = candidate;
            best_quality = quality;
        }
        for (i = n_switches; i > 0 && choice[i - 1] == n_candidates - 1; i--)
            ;
        if (i == 0)
            break;
        choice[i - 1]++;
        for (; i < n_switches; i++)
            choice[i] = choice[i - 1];
    }
    return st;
}
