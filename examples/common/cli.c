#include "examples/common/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int example_parse_long(const char *text, long min, long *out)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < min)
        return 0;
    *out = v;
    return 1;
}

int example_parse_kv(const char *text, uint32_t *kv_type)
{
    static const char *const names[] = {"f32", "f16", "pq", "int8", "int4"};
    static const uint32_t types[] = {PMPD_KV_F32, PMPD_KV_F16, PMPD_KV_PQ, PMPD_KV_INT8, PMPD_KV_INT4};
    size_t k;
    for (k = 0; k < sizeof types / sizeof types[0]; k++)
        if (!strcmp(text, names[k])) {
            *kv_type = types[k];
            return 1;
        }
    return 0;
}

int example_parse_bits(const char *text, unsigned *prefill_bits, unsigned *decode_bits)
{
    return sscanf(text, "%u:%u", prefill_bits, decode_bits) == 2 && *prefill_bits <= 8 && *decode_bits <= 8;
}

pmpd_status example_precision_apply(const pmpd_model *model, pmpd_session *session, unsigned bits_p,
                                    unsigned bits_d, const pmpd_precision_schedule *given, unsigned *parent_bits,
                                    unsigned *prefill_bits)
{
    pmpd_precision_schedule schedule;
    unsigned seed_bits;
    *parent_bits = 0;
    *prefill_bits = 0;
    if (pmpd_model_anyprec_widths(model, &seed_bits, parent_bits) != PMPD_OK)
        return PMPD_OK;
    if (given)
        schedule = *given;
    else if (bits_p || bits_d || pmpd_precision_schedule_from_model(model, &schedule, NULL) != PMPD_OK)
        pmpd_precision_schedule_uniform(&schedule, bits_p, bits_d);
    *prefill_bits = schedule.prefill_bits ? schedule.prefill_bits : *parent_bits;
    return pmpd_session_set_precision(session, &schedule);
}
