/* Precision schedules: which width prefill and each decode step run at, the
 * rules a schedule obeys (widths only go down), and its section format. */
#include <string.h>

#include "pmpd.h"
#include "pmpd_impl/core/error.h"
#include "pmpd_impl/format/le.h"
#include "pmpd_impl/model/model.h"
#include "pmpd_impl/weights/anyprec/anyprec.h"

#define PRECISION_SCHEDULE_SECTION_VERSION 1u
#define PRECISION_SCHEDULE_HEADER_BYTES 8u
#define PRECISION_SCHEDULE_PAIR_BYTES 8u

void pmpd_precision_schedule_uniform(pmpd_precision_schedule *schedule, unsigned prefill_bits,
                                     unsigned decode_bits)
{
    if (!schedule)
        return;
    memset(schedule, 0, sizeof *schedule);
    schedule->prefill_bits = prefill_bits;
    schedule->n_widths = 1;
    schedule->decode_bits[0] = decode_bits;
    schedule->from_step[0] = 0;
}

unsigned pmpd_precision_schedule_bits_at(const pmpd_precision_schedule *schedule, uint32_t step)
{
    uint32_t i, bits = 0;
    if (!schedule)
        return 0;
    for (i = 0; i < schedule->n_widths && i < PMPD_SCHEDULE_MAX_WIDTHS; i++)
        if (schedule->from_step[i] <= step && schedule->from_step[i] != PMPD_SCHEDULE_NEVER)
            bits = schedule->decode_bits[i];
    return bits;
}

/* Index of the first broken rule, or -1; *what names it. */
static int precision_schedule_first_violation(const pmpd_precision_schedule *s, const char **what)
{
    uint32_t i;
    if (s->prefill_bits > PMPD_ANYPREC_MAX_BITS) {
        *what = "prefill_bits above PMPD_ANYPREC_MAX_BITS";
        return 0;
    }
    if (s->n_widths < 1 || s->n_widths > PMPD_SCHEDULE_MAX_WIDTHS) {
        *what = "n_widths outside 1..8";
        return 0;
    }
    if (s->from_step[0] != 0) {
        *what = "from_step[0] is not 0";
        return 0;
    }
    for (i = 0; i < s->n_widths; i++) {
        if (s->decode_bits[i] > PMPD_ANYPREC_MAX_BITS || (i > 0 && s->decode_bits[i] == 0)) {
            *what = "decode width outside 1..8 (0 only first)";
            return (int)i;
        }
        if (i > 0 && s->decode_bits[i - 1] != 0 && s->decode_bits[i] >= s->decode_bits[i - 1]) {
            *what = "decode widths not strictly decreasing";
            return (int)i;
        }
        if (i > 0 && s->from_step[i] < s->from_step[i - 1]) {
            *what = "from_step decreasing";
            return (int)i;
        }
    }
    return -1;
}

pmpd_status pmpd_precision_schedule_check(const pmpd_precision_schedule *schedule)
{
    const char *what;
    if (!schedule)
        return PMPD_ERR_INVALID_ARGUMENT;
    return precision_schedule_first_violation(schedule, &what) < 0 ? PMPD_OK : PMPD_ERR_INVALID_ARGUMENT;
}

static void precision_schedule_put_u32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

pmpd_status pmpd_precision_schedule_encode(const pmpd_precision_schedule *schedule, void *out,
                                           size_t capacity, size_t *size)
{
    unsigned char *p = (unsigned char *)out;
    uint32_t i;
    if (!schedule || !size || pmpd_precision_schedule_check(schedule) != PMPD_OK)
        return PMPD_ERR_INVALID_ARGUMENT;
    *size = PRECISION_SCHEDULE_HEADER_BYTES + (size_t)schedule->n_widths * PRECISION_SCHEDULE_PAIR_BYTES;
    if (!out || capacity < *size)
        return PMPD_ERR_INVALID_ARGUMENT;
    precision_schedule_put_u32(p, schedule->prefill_bits);
    precision_schedule_put_u32(p + 4, schedule->n_widths);
    for (i = 0; i < schedule->n_widths; i++) {
        unsigned char *pair = p + PRECISION_SCHEDULE_HEADER_BYTES + PRECISION_SCHEDULE_PAIR_BYTES * i;
        precision_schedule_put_u32(pair, schedule->decode_bits[i]);
        precision_schedule_put_u32(pair + 4, schedule->from_step[i]);
    }
    return PMPD_OK;
}

pmpd_status pmpd_precision_schedule_from_model(const pmpd_model *model, pmpd_precision_schedule *schedule,
                                               pmpd_error *err)
{
    const pmpd_section *section = NULL;
    const unsigned char *p;
    const char *what;
    uint32_t i;
    int bad;
    if (!model || !schedule)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET, "schedule: NULL argument");
    for (i = 0; i < model->n_sections; i++)
        if (model->sections[i].kind == PMPD_SECTION_PRECISION_SCHEDULE)
            section = &model->sections[i];
    if (!section)
        return pmpd_error_set(err, PMPD_ERR_NOT_FOUND, PMPD_NO_OFFSET, "the model has no precision schedule");
    if (section->version != PRECISION_SCHEDULE_SECTION_VERSION)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VERSION, PMPD_NO_OFFSET, "schedule section version %u, expected %u",
                              (unsigned)section->version, PRECISION_SCHEDULE_SECTION_VERSION);
    p = (const unsigned char *)section->data;
    if (section->size < PRECISION_SCHEDULE_HEADER_BYTES)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, 0, "schedule section of %llu bytes has no header",
                              (unsigned long long)section->size);
    memset(schedule, 0, sizeof *schedule);
    schedule->prefill_bits = pmpd_le_u32(p);
    schedule->n_widths = pmpd_le_u32(p + 4);
    if (schedule->n_widths < 1 || schedule->n_widths > PMPD_SCHEDULE_MAX_WIDTHS ||
        section->size !=
            PRECISION_SCHEDULE_HEADER_BYTES + (uint64_t)schedule->n_widths * PRECISION_SCHEDULE_PAIR_BYTES)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, 4, "schedule n_widths %lu disagrees with %llu bytes",
                              (unsigned long)schedule->n_widths, (unsigned long long)section->size);
    for (i = 0; i < schedule->n_widths; i++) {
        const unsigned char *pair = p + PRECISION_SCHEDULE_HEADER_BYTES + PRECISION_SCHEDULE_PAIR_BYTES * i;
        schedule->decode_bits[i] = pmpd_le_u32(pair);
        schedule->from_step[i] = pmpd_le_u32(pair + 4);
    }
    bad = precision_schedule_first_violation(schedule, &what);
    if (bad >= 0)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE,
                              PRECISION_SCHEDULE_HEADER_BYTES + PRECISION_SCHEDULE_PAIR_BYTES * (uint64_t)bad,
                              "schedule: %s", what);
    pmpd_error_clear(err);
    return PMPD_OK;
}

pmpd_status pmpd_model_anyprec_widths(const pmpd_model *model, unsigned *seed_bits, unsigned *parent_bits)
{
    unsigned seed = 0, parent = 0;
    uint32_t i;
    if (!model || !seed_bits || !parent_bits)
        return PMPD_ERR_INVALID_ARGUMENT;
    for (i = 0; i < model->n_tensors; i++) {
        const pmpd_tensor *t = &model->tensors[i];
        pmpd_anyprec_matrix m;
        if (t->type != PMPD_TENSOR_ANYPREC)
            continue;
        pmpd_anyprec_bind(t->data, t->dims[0], t->dims[1], &m);
        if (seed == 0 || m.seed_bits < seed)
            seed = m.seed_bits;
        if (m.parent_bits > parent)
            parent = m.parent_bits;
    }
    if (parent == 0)
        return PMPD_ERR_NOT_FOUND;
    *seed_bits = seed;
    *parent_bits = parent;
    return PMPD_OK;
}

#undef PRECISION_SCHEDULE_SECTION_VERSION
#undef PRECISION_SCHEDULE_HEADER_BYTES
#undef PRECISION_SCHEDULE_PAIR_BYTES
