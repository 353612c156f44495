/* Nested any-precision parsers: the first byte picks what the rest is --
 * 0: an ANYPREC tensor (its shape taken from its own header, as the loader
 * takes it from the directory), 1: a precision-schedule section, 2: a
 * learned-scheduler section.  Whatever a parser accepts is used: every
 * width's GEMV, GEMM and row decode; the schedule's lookups and re-encoding;
 * every learned classifier. */
#include <stdint.h>
#include <string.h>

#include "pmpd_impl/model/model.h"
#include "pmpd_impl/weights/anyprec/anyprec.h"
#include "pmpd_impl/precision/learned_scheduler.h"

#define FUZZ_ANYPREC_MAX_INPUT (1u << 20)
#define FUZZ_ANYPREC_MAX_COLS 1024u
#define FUZZ_ANYPREC_MAX_ROWS 256u
#define FUZZ_ANYPREC_MAX_FLOATS (1u << 16)

static unsigned char fuzz_anyprec_input[FUZZ_ANYPREC_MAX_INPUT + 64];
static float fuzz_anyprec_x[2 * FUZZ_ANYPREC_MAX_COLS], fuzz_anyprec_y[2 * FUZZ_ANYPREC_MAX_ROWS];
/* Two tokens' activations in pmpd_anyprec_quantize_tokens' layout (1024
 * columns are whole superblocks); the GEMV reads the first. */
static float fuzz_anyprec_xscale[2 * FUZZ_ANYPREC_MAX_COLS / 32], fuzz_anyprec_xsum[2];
static int8_t fuzz_anyprec_xq[2 * FUZZ_ANYPREC_MAX_COLS];
static float fuzz_anyprec_work[FUZZ_ANYPREC_MAX_FLOATS];

static uint32_t fuzz_anyprec_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void fuzz_anyprec_tensor(const unsigned char *p, size_t size)
{
    pmpd_anyprec_matrix m;
    uint32_t rows, cols, c;
    unsigned k;
    if (size < PMPD_ANYPREC_HEADER_BYTES)
        return;
    rows = fuzz_anyprec_u32(p + 8);
    cols = fuzz_anyprec_u32(p + 12);
    if (rows == 0 || cols == 0 || rows > FUZZ_ANYPREC_MAX_ROWS || cols > FUZZ_ANYPREC_MAX_COLS)
        return;
    if (pmpd_anyprec_view(p, size, rows, cols, 0, &m, NULL) != PMPD_OK)
        return;
    for (c = 0; c < 2 * cols; c++)
        fuzz_anyprec_x[c] = (float)(c % 7) - 3.0f;
    pmpd_anyprec_quantize_tokens(fuzz_anyprec_x, 2, cols, fuzz_anyprec_xq, fuzz_anyprec_xscale, fuzz_anyprec_xsum);
    for (k = m.seed_bits; k <= m.parent_bits; k++) {
        pmpd_anyprec_gemv(&m, k, fuzz_anyprec_xq, fuzz_anyprec_xscale, fuzz_anyprec_y, 0, rows);
        pmpd_anyprec_gemm(&m, k, fuzz_anyprec_xq, fuzz_anyprec_xscale, fuzz_anyprec_xsum, 2, fuzz_anyprec_y, rows, 0,
                          rows);
        pmpd_anyprec_row(&m, k, rows - 1, fuzz_anyprec_x);
    }
}

static void fuzz_anyprec_schedule(const unsigned char *p, size_t size)
{
    pmpd_section section;
    pmpd_model model;
    pmpd_precision_schedule s;
    unsigned char again[128];
    size_t again_size = 0;
    memset(&model, 0, sizeof model);
    section.kind = PMPD_SECTION_PRECISION_SCHEDULE;
    section.version = 1;
    section.flags = 0;
    section.data = p;
    section.size = size;
    model.n_sections = 1;
    model.sections = &section;
    if (pmpd_precision_schedule_from_model(&model, &s, NULL) != PMPD_OK)
        return;
    (void)pmpd_precision_schedule_bits_at(&s, 0);
    (void)pmpd_precision_schedule_bits_at(&s, UINT32_MAX);
    /* An accepted schedule re-encodes to the same bytes. */
    if (pmpd_precision_schedule_encode(&s, again, sizeof again, &again_size) != PMPD_OK || again_size != size ||
        memcmp(again, p, size) != 0)
        __builtin_trap();
}

static void fuzz_anyprec_learned(const unsigned char *p, size_t size)
{
    const size_t t_count = 3;
    pmpd_learned_view v;
    pmpd_learned_trace trace;
    size_t f, need;
    uint32_t pair;
    if (pmpd_learned_parse(p, size, &v, NULL) != PMPD_OK)
        return;
    f = (size_t)v.n_queries * v.feature_dim;
    need = t_count * v.feature_dim + t_count * v.n_queries + 3 * f + v.hidden + v.n_candidates;
    if (need > FUZZ_ANYPREC_MAX_FLOATS)
        return;
    memset(fuzz_anyprec_work, 0, need * sizeof(float));
    trace.attention = fuzz_anyprec_work + t_count * v.feature_dim;
    trace.pooled = trace.attention + t_count * v.n_queries;
    trace.normed = trace.pooled + f;
    trace.ln_out = trace.normed + f;
    trace.hidden = trace.ln_out + f;
    trace.logits = trace.hidden + v.hidden;
    for (pair = 0; pair < v.n_pairs; pair++) {
        pmpd_learned_params params;
        pmpd_learned_params_of(&v, v.weights[pair], &params);
        pmpd_learned_classify(&v, &params, fuzz_anyprec_work, t_count, &trace);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *aligned = fuzz_anyprec_input + (64 - (uintptr_t)fuzz_anyprec_input % 64) % 64;
    if (size < 1 || size - 1 > FUZZ_ANYPREC_MAX_INPUT)
        return 0;
    memcpy(aligned, data + 1, size - 1);
    switch (data[0] % 3) {
    case 0: fuzz_anyprec_tensor(aligned, size - 1); break;
    case 1: fuzz_anyprec_schedule(aligned, size - 1); break;
    default: fuzz_anyprec_learned(aligned, size - 1); break;
    }
    return 0;
}
