/* The TCQ encoder (tcq_build.h): rows split over threads, each row
 * rotated and searched sequence by sequence. */
#include "pmpd_impl/offline/tcq/tcq_build.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/core/hadamard.h"
#include "pmpd_impl/core/splitmix.h"
#include "pmpd_impl/format/le.h"
#include "pmpd_impl/offline/parallel/parallel.h"
#include "pmpd_impl/offline/tcq/tcq_viterbi.h"

#define TCQ_STATES ((size_t)1 << PMPD_TCQ_STATE_BITS)

/* The table's scale against the row's RMS, per shift 3..8: a row is
 * searched as row * gain / rms(row) in table units, before its scale is
 * refitted.  The best of 0.8, 0.86, ..., 1.28 on 24 Gaussian sequences per
 * shift (the coarser the trellis, the wider the table is spread). */
static const float tcq_gains[PMPD_TCQ_MAX_SHIFT + 1] = {0, 0, 0, 1.3f, 1.19f, 1.15f, 1.13f, 1.05f, 0.98f};

PMPD_INTERNAL pmpd_status pmpd_tcq_size(uint64_t rows, uint64_t cols, unsigned quarter_bits, uint64_t *bytes)
{
    pmpd_tcq_layout layout;
    unsigned s1, s2;
    pmpd_status status;
    if (quarter_bits < PMPD_TCQ_MIN_QUARTER_BITS || quarter_bits > PMPD_TCQ_MAX_QUARTER_BITS)
        return PMPD_ERR_INVALID_ARGUMENT;
    pmpd_tcq_shifts(quarter_bits, &s1, &s2);
    status = pmpd_tcq_compute_layout(rows, cols, s1, s2, &layout);
    if (status == PMPD_OK)
        *bytes = layout.total;
    return status;
}

typedef struct tcq_worker tcq_worker;

typedef struct tcq_job {
    const float *values;
    size_t rows, cols;
    uint64_t seed;
    pmpd_tcq_layout layout;
    unsigned shift[2];
    const float *first, *second; /* [2^16]: each state's values in float units */
    const pmpd_ldlq *ldlq;       /* NULL: data-free */
    unsigned char *out;
    tcq_worker *workers; /* one per thread: its search scratch */
    uint64_t done_before, total;
    void (*progress)(void *context, uint64_t done, uint64_t total);
    void *context;
} tcq_job;

struct tcq_worker {
    const tcq_job *job;
    pmpd_tcq_search search;
    float *rotated; /* padded floats */
    float *weight;  /* 256: ones over real columns */
    float *target, *q; /* rotation floats each: LDLQ's targets and values */
    uint32_t states[PMPD_TCQ_STEPS];
};

/* One sequence of a rotated row: target (real floats, the row's units)
 * scaled by inverse into table units, searched over steps of length (128,
 * or the row's last sequence's 64 or 128; columns beyond real are padding
 * and weigh nothing), written to out; q (real floats) gets the values in
 * the row's units, and their dot products with v (the row itself, real
 * floats) in table units are added to vq and qq. */
static void tcq_encode_sequence(tcq_worker *w, const float *target, const float *v, size_t real, float inverse,
                                unsigned shift, unsigned length, uint8_t *out, float *q, double *vq, double *qq)
{
    const tcq_job *job = w->job;
    const unsigned steps = (unsigned)(real + 1) / 2;
    float scaled[PMPD_TCQ_SEQUENCE];
    pmpd_tcq_trellis trellis;
    size_t c;
    unsigned i;
    for (c = 0; c < 2 * (size_t)length; c++) {
        scaled[c] = c < real ? target[c] * inverse : 0.0f;
        w->weight[c] = c < real ? 1.0f : 0.0f;
    }
    trellis.state_bits = PMPD_TCQ_STATE_BITS;
    trellis.shift = shift;
    trellis.first = job->first;
    trellis.second = job->second;
    /* Real steps that end before the window wraps need no tail-biting: the
     * bits after them only feed padding columns. */
    if ((size_t)(steps - 1) * shift + PMPD_TCQ_STATE_BITS <= (size_t)length * shift) {
        trellis.steps = steps;
        pmpd_tcq_viterbi(&trellis, &w->search, scaled, w->weight, PMPD_TCQ_OPEN, w->states);
    } else {
        trellis.steps = length;
        pmpd_tcq_viterbi(&trellis, &w->search, scaled, w->weight, PMPD_TCQ_TAIL_BITING, w->states);
    }
    pmpd_tcq_path_bits(PMPD_TCQ_STATE_BITS, shift, w->states, trellis.steps, (size_t)length * shift, out);
    for (i = 0; i < steps; i++)
        for (c = 0; c < 2 && 2 * i + c < real; c++) {
            const float value = c ? job->second[w->states[i]] : job->first[w->states[i]];
            q[2 * i + c] = value / inverse;
            *vq += (double)v[2 * i + c] * value;
            *qq += (double)value * value;
        }
}

/* One row's rounding, a sequence per block (ldlq.h's pmpd_ldlq_round). */
typedef struct tcq_rounding {
    tcq_worker *w;
    const float *v; /* the rotated row */
    float inverse;
    uint8_t *row;
    double vq, qq;
} tcq_rounding;

static void tcq_round(void *context, size_t begin, size_t end, const float *target, float *q)
{
    tcq_rounding *r = (tcq_rounding *)context;
    const tcq_job *job = r->w->job;
    unsigned shift, length;
    const size_t at = pmpd_tcq_place(begin / PMPD_TCQ_SEQUENCE, job->layout.sequences, job->layout.first_half,
                                     job->layout.last_steps, job->shift[0], job->shift[1], &shift, &length);
    tcq_encode_sequence(r->w, target, r->v + begin, end - begin, r->inverse, shift, length, r->row + at, q, &r->vq,
                        &r->qq);
}

static void tcq_encode_row(tcq_worker *w, size_t r)
{
    const tcq_job *job = w->job;
    const size_t rotation = job->layout.rotation, padded = job->layout.padded;
    float *v = w->rotated;
    double energy = 0, scale = 0;
    size_t c;
    const pmpd_rotated rotated = pmpd_rotated_make(job->cols, rotation, padded, job->seed);
    tcq_rounding rounding;
    rounding.w = w;
    rounding.v = v;
    rounding.row = job->out + job->layout.bits_offset + r * job->layout.row_bytes;
    rounding.vq = rounding.qq = 0;
    pmpd_rotated_rotate(&rotated, job->values + r * job->cols, v);
    for (c = 0; c < rotation; c++)
        energy += (double)v[c] * v[c];
    if (energy > 0) {
        /* One gain for the row (its scale is shared by both halves of a
         * half-TCQ row): the mean of the two shifts'. */
        rounding.inverse = (float)(0.5 * (tcq_gains[job->shift[0]] + tcq_gains[job->shift[1]]) /
                                   sqrt(energy / (double)rotation));
        pmpd_ldlq_row(job->ldlq, rotation, PMPD_TCQ_SEQUENCE, v, tcq_round, &rounding, w->target, w->q);
        /* The least-squares scale of the values found, in H's norm under
         * LDLQ. */
        if (job->ldlq)
            scale = pmpd_ldlq_rescale(job->ldlq, v, w->q) / rounding.inverse;
        else
            scale = rounding.qq > 0 && rounding.vq > 0 ? rounding.vq / rounding.qq : 0.0;
    }
    pmpd_le_put_f32(job->out + PMPD_TCQ_HEADER_BYTES + 4 * r, (float)scale);
}

/* Rows [begin, end) on thread worker's scratch. */
static pmpd_status tcq_encode_rows(void *context, unsigned worker, uint64_t begin, uint64_t end)
{
    const tcq_job *job = (const tcq_job *)context;
    uint64_t r;
    for (r = begin; r < end; r++)
        tcq_encode_row(&job->workers[worker], (size_t)r);
    return PMPD_OK;
}

static void tcq_encode_progress(void *context, uint64_t done)
{
    const tcq_job *job = (const tcq_job *)context;
    if (job->progress)
        job->progress(job->context, job->done_before + done, job->total);
}

static pmpd_status tcq_worker_init(tcq_worker *w, const tcq_job *job)
{
    pmpd_tcq_trellis trellis;
    memset(w, 0, sizeof *w);
    w->job = job;
    trellis.state_bits = PMPD_TCQ_STATE_BITS;
    trellis.shift = job->shift[0]; /* the lower shift: the larger back-pointer table */
    trellis.steps = PMPD_TCQ_STEPS;
    trellis.first = job->first;
    trellis.second = job->second;
    w->rotated = (float *)malloc(job->layout.padded * sizeof(float));
    w->weight = (float *)malloc(PMPD_TCQ_SEQUENCE * sizeof(float));
    w->target = (float *)malloc(job->layout.rotation * sizeof(float));
    w->q = (float *)malloc(job->layout.rotation * sizeof(float));
    if (!w->rotated || !w->weight || !w->target || !w->q)
        return PMPD_ERR_OUT_OF_MEMORY;
    return pmpd_tcq_search_init(&w->search, &trellis);
}

static void tcq_worker_free(tcq_worker *w)
{
    pmpd_tcq_search_free(&w->search);
    free(w->rotated);
    free(w->weight);
    free(w->target);
    free(w->q);
}

/* The values of every state, in float units (the runtime's, exactly). */
static pmpd_status tcq_state_values(float **first, float **second)
{
    const int16_t *table = pmpd_tcq_table();
    const float unit = pmpd_tcq_unit();
    size_t s;
    *first = (float *)malloc(TCQ_STATES * sizeof(float));
    *second = (float *)malloc(TCQ_STATES * sizeof(float));
    if (!*first || !*second)
        return PMPD_ERR_OUT_OF_MEMORY;
    for (s = 0; s < TCQ_STATES; s++) {
        int32_t a, b;
        pmpd_tcq_decode((uint32_t)s, table, &a, &b);
        (*first)[s] = unit * (float)a;
        (*second)[s] = unit * (float)b;
    }
    return PMPD_OK;
}

static void tcq_write_header(unsigned char *out, const tcq_job *job)
{
    memset(out, 0, job->layout.total);
    memcpy(out, "TCQW", 4);
    pmpd_le_put_u32(out + 4, PMPD_TCQ_VERSION);
    pmpd_le_put_u32(out + 8, (uint32_t)job->rows);
    pmpd_le_put_u32(out + 12, (uint32_t)job->cols);
    pmpd_le_put_u32(out + 16, job->shift[0]);
    pmpd_le_put_u32(out + 20, job->shift[1]);
    pmpd_le_put_u32(out + 24, (uint32_t)job->layout.rotation);
    pmpd_le_put_u64(out + 32, job->seed);
}

PMPD_INTERNAL pmpd_status pmpd_tcq_encode(const float *values, size_t rows, size_t cols, unsigned quarter_bits,
                                          uint64_t seed, const pmpd_ldlq *ldlq, unsigned threads, unsigned char *out,
                                          size_t size,
                                          uint64_t done_before, uint64_t total,
                                          void (*progress)(void *context, uint64_t done, uint64_t total),
                                          void *context)
{
    tcq_worker workers[PMPD_PARALLEL_MAX_THREADS];
    tcq_job job;
    const pmpd_parallel_work work = {tcq_encode_rows, tcq_encode_progress, &job};
    float *first = NULL, *second = NULL;
    unsigned n, i;
    pmpd_status status;
    memset(&job, 0, sizeof job);
    if (quarter_bits < PMPD_TCQ_MIN_QUARTER_BITS || quarter_bits > PMPD_TCQ_MAX_QUARTER_BITS)
        return PMPD_ERR_INVALID_ARGUMENT;
    pmpd_tcq_shifts(quarter_bits, &job.shift[0], &job.shift[1]);
    if (pmpd_tcq_compute_layout(rows, cols, job.shift[0], job.shift[1], &job.layout) != PMPD_OK ||
        size != job.layout.total || (ldlq && (ldlq->n != job.layout.rotation || ldlq->block != PMPD_TCQ_SEQUENCE)))
        return PMPD_ERR_INVALID_ARGUMENT;
    job.values = values;
    job.ldlq = ldlq;
    job.rows = rows;
    job.cols = cols;
    job.seed = seed;
    job.out = out;
    job.done_before = done_before;
    job.total = total;
    job.progress = progress;
    job.context = context;
    tcq_write_header(out, &job);
    n = pmpd_parallel_threads(threads, rows, 1);
    status = tcq_state_values(&first, &second);
    job.first = first;
    job.second = second;
    job.workers = workers;
    for (i = 0; i < n; i++) {
        pmpd_status s = tcq_worker_init(&workers[i], &job);
        status = status == PMPD_OK ? s : status;
    }
    if (status == PMPD_OK)
        status = pmpd_parallel_run(threads, rows, 1, &work, NULL);
    for (i = 0; i < n; i++)
        tcq_worker_free(&workers[i]);
    free(first);
    free(second);
    return status;
}

PMPD_INTERNAL pmpd_status pmpd_tcq_random(size_t rows, size_t cols, unsigned quarter_bits, uint64_t seed,
                                          unsigned char *out, size_t size)
{
    tcq_job job;
    uint64_t state = seed;
    size_t i;
    memset(&job, 0, sizeof job);
    if (quarter_bits < PMPD_TCQ_MIN_QUARTER_BITS || quarter_bits > PMPD_TCQ_MAX_QUARTER_BITS)
        return PMPD_ERR_INVALID_ARGUMENT;
    pmpd_tcq_shifts(quarter_bits, &job.shift[0], &job.shift[1]);
    if (pmpd_tcq_compute_layout(rows, cols, job.shift[0], job.shift[1], &job.layout) != PMPD_OK ||
        size != job.layout.total)
        return PMPD_ERR_INVALID_ARGUMENT;
    job.rows = rows;
    job.cols = cols;
    job.seed = seed;
    tcq_write_header(out, &job);
    /* Scales in [0.5, 1.5), then every bitstream byte at random. */
    for (i = 0; i < rows; i++)
        pmpd_le_put_f32(out + PMPD_TCQ_HEADER_BYTES + 4 * i,
                        0.5f + (float)(pmpd_splitmix64_next(&state) >> 40) / 16777216.0f);
    for (i = job.layout.bits_offset; i < job.layout.total; i++)
        out[i] = (unsigned char)pmpd_splitmix64_next(&state);
    return PMPD_OK;
}

#undef TCQ_MAX_THREADS
#undef TCQ_STATES
