/* Every technique in one model: weight types {f32, f16, q8, q4, q2cb,
 * nested at 2, 3 and 4 bits, nested under a static 4/3/2 schedule, nested
 * under the learned scheduler} x KV caches {f32, f16, int8, int4, PQ 2-dim,
 * PQ 4-dim} x threads {1, 2} x prefill batch {1, 7, 32} on stories260K,
 * plus a few rows of the second model (llama2xs, dim 64, 4 KV heads).
 *
 * Every run prefills the same prompt and then decodes along the reference
 * continuation (teacher forcing): the reference is f32 weights + f32 KV,
 * greedy, one thread, batch 32.  Each run must
 *   - create its session in an arena of exactly pmpd_session_plan bytes
 *     and never go above it (high water = planned);
 *   - be deterministic: 2 threads give the 1-thread logits bit for bit, and
 *     the out-of-order prefill (prefill_in_flight 2) the in-order one's;
 *     other batch sizes give batch 32's logits bit for bit with float
 *     weights and a non-PQ cache, and elsewhere (where batching changes
 *     the arithmetic: see mx_batch_compare) a mean KL from batch 32's
 *     below MX_BATCH_KL;
 *   - stay within its row's quality bounds against the reference: top-1
 *     agreement of the next-token predictions and mean KL(reference || run),
 *     bounds set from the measured values with margin (the table printed
 *     here is the one docs/full-stack.md quotes).
 *
 * Runtime: the whole matrix (360 stories260K runs + 144 llama2xs runs)
 * takes about 6 s of CPU natively.  Under emulation and sanitizers (make
 * check sets PMPD_TEST_REDUCED=1 for check-asan, check-aarch64 and
 * check-arm32) only stories260K at batch 7 runs, with 1 thread, and with 2
 * threads beside the f32 KV cache (70 runs): every weight type and KV mode
 * still meets its bounds and its planned arena, determinism across threads
 * is still checked for every weight type; across batch sizes, across
 * threads for every KV mode, and the llama2xs rows, only natively.  Under
 * an emulator (PMPD_TEST_EMULATED) each weight type runs with the f32
 * cache and each cache with f32 weights only (15 cells of 60). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd.h"
#include "pmpd_impl/offline/format/builder.h"
#include "pmpd_impl/offline/precision/anyprec_build.h"
#include "pmpd_impl/offline/quant/build.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

#define MX_STEPS 24               /* next-token predictions per run */
#define MX_CONTEXT 96
#define MX_MAX_PROMPT 64
/* Largest mean KL between batch sizes (see mx_batch_compare): 0.3, or
 * 0.3 x the row's KL bound where a broken regime (2 bits) allows more;
 * measured at most 0.18, and 0.67 for nested 2-bit weights + PQ 4-dim. */
#define MX_BATCH_KL(max_kl) ((max_kl) * 0.3 > 0.3 ? (max_kl) * 0.3 : 0.3)
#define MX_SCRATCH_BYTES 65536

enum { MX_F32, MX_F16, MX_Q8, MX_Q4, MX_Q2CB, MX_NESTED, MX_N_TYPES };
enum { MX_FIXED, MX_STATIC, MX_LEARNED };

typedef struct mx_weights {
    const char *name;
    int type;     /* MX_* container */
    int schedule; /* MX_FIXED (bits), MX_STATIC, MX_LEARNED */
    unsigned bits;
    /* Quality bounds against f32 + f32 KV, per KV mode (f32, f16, int8,
     * int4, pq2, pq4): lowest top-1 agreement, highest mean KL. */
    double min_top1[6], max_kl[6];
} mx_weights;

typedef struct mx_kv {
    const char *name;
    uint32_t kv_type;
    int pq; /* which codebook container: 0 sub 2, 1 sub 4 */
} mx_kv;

static const mx_kv mx_kvs[6] = {
    {"f32", PMPD_KV_F32, 0}, {"f16", PMPD_KV_F16, 0}, {"int8", PMPD_KV_INT8, 0},
    {"int4", PMPD_KV_INT4, 0}, {"pq2", PMPD_KV_PQ, 0}, {"pq4", PMPD_KV_PQ, 1},
};

/* Bounds: the worst value measured natively (x86-64, AVX-512) on either
 * model over every thread count and batch size, then a margin of 3 tokens
 * of 24 for top-1 and 1.5x + 0.05 for KL, for the other kernels (NEON,
 * SDOT, SMMLA, scalar) that make check runs under qemu. */
static const mx_weights mx_rows[] = {
    {"f32", MX_F32, MX_FIXED, 0, {0.87, 0.87, 0.83, 0.70, 0.70, 0.62}, {0.05, 0.05, 0.06, 0.27, 0.14, 0.43}},
    {"f16", MX_F16, MX_FIXED, 0, {0.87, 0.87, 0.87, 0.70, 0.70, 0.62}, {0.05, 0.05, 0.06, 0.27, 0.14, 0.44}},
    {"q8", MX_Q8, MX_FIXED, 0, {0.83, 0.87, 0.83, 0.70, 0.70, 0.58}, {0.06, 0.06, 0.06, 0.32, 0.10, 0.42}},
    {"q4", MX_Q4, MX_FIXED, 0, {0.75, 0.70, 0.70, 0.62, 0.66, 0.50}, {0.14, 0.15, 0.14, 1.06, 0.20, 0.71}},
    {"q2cb", MX_Q2CB, MX_FIXED, 0, {0.29, 0.29, 0.33, 0.16, 0.29, 0.20}, {2.38, 2.39, 2.34, 3.40, 2.66, 3.13}},
    {"nested 4", MX_NESTED, MX_FIXED, 4, {0.79, 0.75, 0.79, 0.66, 0.70, 0.54}, {0.10, 0.10, 0.10, 0.48, 0.19, 0.52}},
    {"nested 3", MX_NESTED, MX_FIXED, 3, {0.62, 0.62, 0.62, 0.54, 0.62, 0.58}, {0.37, 0.36, 0.36, 1.20, 0.50, 0.90}},
    {"nested 2", MX_NESTED, MX_FIXED, 2, {0.16, 0.16, 0.12, 0.08, 0.12, 0.08}, {3.11, 3.10, 3.11, 3.93, 3.51, 4.14}},
    {"nested static 4/3/2", MX_NESTED, MX_STATIC, 0, {0.50, 0.50, 0.50, 0.50, 0.45, 0.41},
     {1.19, 1.19, 1.19, 2.10, 1.44, 1.66}},
    /* The learned scheduler may choose any width down to the seed's, so its
     * floor is the 2-bit row's (on llama2xs it picks 2 bits). */
    {"nested learned", MX_NESTED, MX_LEARNED, 0, {0.16, 0.16, 0.12, 0.08, 0.12, 0.08},
     {3.11, 3.10, 3.11, 3.93, 3.51, 4.14}},
};
#define MX_N_ROWS (sizeof mx_rows / sizeof mx_rows[0])

typedef struct mx_model {
    test_container container;
    void *arena_block;
    pmpd_model *model;
} mx_model;

typedef struct mx_world {
    mx_model models[MX_N_TYPES][2]; /* [weight type][codebooks: sub 2, sub 4] */
    void *learned;
    size_t learned_size;
    int32_t prompt[MX_MAX_PROMPT];
    size_t n_prompt;
    int32_t reference[MX_STEPS];
    float *reference_logits; /* [MX_STEPS][vocab] */
    uint32_t vocab;
    int reduced;
    int emulated; /* under an emulator: see mx_matrix */
} mx_world;

typedef struct mx_run_result {
    int32_t pred[MX_STEPS];
    float *logits; /* [MX_STEPS][vocab], caller's */
    size_t planned;
    double bits; /* average decode width (nested) */
} mx_run_result;

static void mx_open(const pmpd_build_model *b, mx_model *m)
{
    pmpd_arena arena;
    size_t bytes = (size_t)1 << 20;
    assert_int_equal(test_serialize(b, &m->container), PMPD_OK);
    m->arena_block = malloc(bytes);
    assert_non_null(m->arena_block);
    pmpd_arena_init(&arena, m->arena_block, bytes);
    assert_int_equal(pmpd_model_open_memory(m->container.data, m->container.size, &arena, &m->model, NULL), PMPD_OK);
}

static void mx_close(mx_model *m)
{
    pmpd_model_close(m->model);
    test_container_free(&m->container);
    free(m->arena_block);
}

/* The shared model converted to type, then with each codebook section. */
static void mx_build_type(const char *model, int type, void *const codebooks[2], const size_t sizes[2],
                          mx_model out[2])
{
    pmpd_build_model b;
    int p;
    assert_int_equal(test_import_shared(model, "models/tok512.bin", &b), PMPD_OK);
    if (type == MX_F16)
        assert_int_equal(pmpd_build_convert_matrices(&b, PMPD_TENSOR_F16), PMPD_OK);
    if (type == MX_NESTED)
        assert_int_equal(pmpd_anyprec_build_convert(&b, 2, 4, NULL, 0, NULL, NULL), PMPD_OK);
    if (type == MX_Q8 || type == MX_NESTED)
        assert_int_equal(pmpd_quant_build_convert(&b, PMPD_TENSOR_Q8, 1, NULL, NULL), PMPD_OK);
    if (type == MX_Q4)
        assert_int_equal(pmpd_quant_build_convert(&b, PMPD_TENSOR_Q4, 1, NULL, NULL), PMPD_OK);
    if (type == MX_Q2CB)
        assert_int_equal(pmpd_quant_build_convert(&b, PMPD_TENSOR_Q2CB, 0, NULL, NULL), PMPD_OK);
    for (p = 0; p < 2; p++) {
        if (p) { /* drop the first container's codebooks */
            free(b.sections[b.n_sections - 1].data);
            b.n_sections--;
        }
        assert_int_equal(pmpd_build_add_section(&b, PMPD_SECTION_KV_CODEBOOKS, 1, 0, codebooks[p], sizes[p]), PMPD_OK);
        mx_open(&b, &out[p]);
    }
    pmpd_build_free(&b);
}

/* PQ codebooks (2- and 4-dim subspaces) trained on the float model's own
 * texts, as pmpd-kvcalibrate does, but on fewer and shorter texts. */
static void mx_codebooks(const pmpd_model *float_model, int reduced, void *codebooks[2], size_t sizes[2])
{
    pmpd_pq_calibration_options o;
    int p;
    for (p = 0; p < 2; p++) {
        pmpd_pq_calibration_options_init(&o);
        o.key_sub_dim = o.value_sub_dim = p ? 4 : 2;
        o.n_sequences = 3;
        o.sequence_length = 96;
        o.iterations = reduced ? 3 : 6; /* half the k-means passes under emulation */
        assert_int_equal(pmpd_pq_calibrate(float_model, &o, &codebooks[p], &sizes[p]), PMPD_OK);
    }
}

static void mx_static_schedule(pmpd_precision_schedule *s)
{
    /* Prefill at 4 bits; decode 4, 3, 2 bits over thirds of the steps. */
    memset(s, 0, sizeof *s);
    s->prefill_bits = 4;
    s->n_widths = 3;
    s->decode_bits[0] = 4, s->decode_bits[1] = 3, s->decode_bits[2] = 2;
    s->from_step[0] = 0, s->from_step[1] = (MX_STEPS - 1) / 3, s->from_step[2] = 2 * (MX_STEPS - 1) / 3;
}

/* Chunks in flight of the runs (0: the library's default: in order with
 * one thread, two chunks out of order with two); mx_cell_run sets 2 for
 * one single-thread run per cell to compare out of order with in order. */
static uint32_t mx_in_flight;

/* One run: prefill the prompt, then MX_STEPS - 1 decode steps fed forced[]
 * (NULL: the run's own greedy tokens).  The session lives in exactly its
 * planned bytes. */
static void mx_run(const mx_world *w, const pmpd_model *model, const mx_weights *row, uint32_t kv_type,
                   uint32_t threads, uint32_t batch, const int32_t *forced, mx_run_result *out)
{
    pmpd_session_config config;
    pmpd_session *session = NULL;
    pmpd_precision_schedule schedule;
    pmpd_arena arena, scratch;
    unsigned char scratch_block[MX_SCRATCH_BYTES + PMPD_ARENA_ALIGNMENT];
    const float *logits;
    double bits = 0.0;
    void *block;
    int i;
    pmpd_session_config_init(&config);
    config.context_length = MX_CONTEXT;
    config.kv_type = kv_type;
    config.n_threads = threads;
    config.worker_stack_bytes = TEST_WORKER_STACK_BYTES; /* every format and KV mode fits it */
    config.prefill_batch = batch;
    config.prefill_in_flight = mx_in_flight;
    assert_int_equal(pmpd_session_plan(model, &config, &out->planned), PMPD_OK);
    block = malloc(out->planned + PMPD_ARENA_ALIGNMENT);
    assert_non_null(block);
    pmpd_arena_init(&arena, test_aligned(block), out->planned);
    assert_int_equal(pmpd_session_create(model, &config, &arena, &session), PMPD_OK);
    assert_true(arena.used == out->planned);
    if (row && row->type == MX_NESTED) {
        if (row->schedule == MX_STATIC)
            mx_static_schedule(&schedule);
        else
            pmpd_precision_schedule_uniform(&schedule, row->schedule == MX_LEARNED ? 4 : row->bits,
                                            row->schedule == MX_LEARNED ? 4 : row->bits);
        assert_int_equal(pmpd_session_set_precision(session, &schedule), PMPD_OK);
    }
    assert_int_equal(pmpd_session_prefill(session, w->prompt, w->n_prompt, &logits), PMPD_OK);
    if (row && row->schedule == MX_LEARNED) {
        pmpd_arena_init(&scratch, scratch_block, sizeof scratch_block);
        assert_int_equal(pmpd_session_apply_learned_scheduler(session, w->learned, w->learned_size, &scratch),
                         PMPD_OK);
    }
    for (i = 0; i < MX_STEPS; i++) {
        out->pred[i] = test_argmax(logits, w->vocab);
        memcpy(out->logits + (size_t)i * w->vocab, logits, w->vocab * sizeof(float));
        if (i + 1 < MX_STEPS) {
            bits += pmpd_session_decode_bits(session);
            assert_int_equal(pmpd_session_decode(session, forced ? forced[i] : out->pred[i], &logits), PMPD_OK);
        }
    }
    out->bits = bits / (MX_STEPS - 1);
    assert_true(arena.high_water == out->planned);
    pmpd_session_destroy(session);
    free(block);
}

static void mx_prompt(mx_world *w, const pmpd_model *model)
{
    static const char text[] = "Once upon a time, there was a little girl named Lily. She loved to play outside "
                                "with her friends in the big green park.";
    void *block = malloc(65536);
    pmpd_arena scratch;
    pmpd_arena_init(&scratch, block, 65536);
    assert_int_equal(pmpd_tokenize(model, text, 1, 0, w->prompt, MX_MAX_PROMPT, &w->n_prompt, &scratch), PMPD_OK);
    assert_true(w->n_prompt > 32 && w->n_prompt + MX_STEPS <= MX_CONTEXT);
    free(block);
}

/* The learned scheduler, trained as test_schedule_learned does: a small set
 * sampled from the float model, few epochs. */
static void mx_learned(mx_world *w, const pmpd_model *float_model)
{
    pmpd_calibration_config config;
    pmpd_calibration_set train;
    pmpd_learned_train_config tc;
    pmpd_calibration_config_init(&config);
    /* Half the data and epochs under emulation: a third of this file's
     * time there went to this training. */
    config.n_prompts = w->reduced ? 6 : 12;
    config.prompt_length = 4;
    config.output_length = MX_STEPS; /* the candidate switch steps are thirds of this */
    assert_int_equal(pmpd_calibration_set_sample(float_model, &config, PMPD_CALIBRATION_TRAIN, &train), PMPD_OK);
    pmpd_learned_train_config_init(&tc);
    tc.epochs = w->reduced ? 15 : 30;
    tc.hidden = 8;
    assert_int_equal(pmpd_learned_scheduler_train(w->models[MX_NESTED][0].model, &train, 4, &tc, &w->learned,
                                                  &w->learned_size, NULL),
                     PMPD_OK);
    pmpd_calibration_set_free(&train);
}

static mx_world *mx_build(const char *model_file, int with_all_types)
{
    mx_world *w = (mx_world *)calloc(1, sizeof *w);
    void *codebooks[2];
    size_t sizes[2];
    mx_model plain;
    pmpd_build_model b;
    mx_run_result ref;
    int t;
    assert_non_null(w);
    w->reduced = test_reduced();
    w->emulated = test_emulated();
    assert_int_equal(test_import_shared(model_file, "models/tok512.bin", &b), PMPD_OK);
    mx_open(&b, &plain);
    pmpd_build_free(&b);
    mx_codebooks(plain.model, w->reduced, codebooks, sizes);
    for (t = 0; t < MX_N_TYPES; t++)
        if (with_all_types || t == MX_F32 || t == MX_Q8 || t == MX_NESTED)
            mx_build_type(model_file, t, codebooks, sizes, w->models[t]);
    free(codebooks[0]);
    free(codebooks[1]);
    w->vocab = pmpd_model_get_info(plain.model)->vocab_size;
    mx_prompt(w, plain.model);
    mx_learned(w, plain.model);
    w->reference_logits = (float *)malloc((size_t)MX_STEPS * w->vocab * sizeof(float));
    ref.logits = w->reference_logits;
    mx_run(w, w->models[MX_F32][0].model, NULL, PMPD_KV_F32, 1, 32, NULL, &ref);
    memcpy(w->reference, ref.pred, sizeof ref.pred);
    mx_close(&plain);
    return w;
}

static void mx_free(mx_world *w)
{
    int t, p;
    for (t = 0; t < MX_N_TYPES; t++)
        for (p = 0; p < 2; p++)
            if (w->models[t][p].model)
                mx_close(&w->models[t][p]);
    free(w->learned);
    free(w->reference_logits);
    free(w);
}

typedef struct mx_cell {
    double top1, kl, bits;  /* worst top-1 and KL over the cell's runs; average width of the first */
    double batch_delta;     /* largest logit difference from batch 32 */
    double batch_kl;        /* largest mean KL(batch 32 || other batch) */
    size_t planned;
    int runs;
} mx_cell;

/* Top-1 agreement with the reference and mean KL(reference || run). */
static void mx_quality(const mx_world *w, const mx_run_result *r, mx_cell *cell)
{
    double top1 = 0.0, kl = 0.0;
    int s;
    for (s = 0; s < MX_STEPS; s++) {
        top1 += r->pred[s] == w->reference[s];
        kl += test_softmax_kl(w->reference_logits + (size_t)s * w->vocab, r->logits + (size_t)s * w->vocab,
                              w->vocab);
    }
    top1 /= MX_STEPS;
    kl /= MX_STEPS;
    cell->top1 = cell->runs == 1 || top1 < cell->top1 ? top1 : cell->top1;
    cell->kl = kl > cell->kl ? kl : cell->kl;
}

/* Another batch size than 32.  Float weights with an f32, f16, int8 or
 * int4 cache compute every output the same way whatever the batch: the
 * logits must be equal bit for bit.  Elsewhere the batch size changes the
 * arithmetic, so the logits are held to a mean KL(batch 32 || batch b):
 *   - group-quantized weights: GEMM and GEMV sum the groups' scaled
 *     products in other orders (logits differ by ~1e-5, more where an
 *     int8/int4 cache rounds a key to another level);
 *   - nested weights: a one-token prefill runs the GEMV, whose activations
 *     are int8, a batch the GEMM, whose activations stay float;
 *   - PQ caches: a batch writes its tokens' keys and values before
 *     attending, so the window has moved past the batch's earlier tokens,
 *     which the later ones then see coded (token by token they would see
 *     them exact).
 * Every run also meets its row's quality bounds. */
static void mx_batch_compare(const mx_world *w, const mx_weights *row, const mx_kv *kv, uint32_t batch,
                             const mx_run_result *base, const mx_run_result *r, mx_cell *cell)
{
    size_t n = (size_t)MX_STEPS * w->vocab, i;
    double kl = 0.0, delta = 0.0;
    int s;
    for (i = 0; i < n; i++) {
        double d = fabs((double)r->logits[i] - (double)base->logits[i]);
        delta = d > delta ? d : delta;
    }
    for (s = 0; s < MX_STEPS; s++)
        kl += test_softmax_kl(base->logits + (size_t)s * w->vocab, r->logits + (size_t)s * w->vocab, w->vocab);
    kl /= MX_STEPS;
    cell->batch_delta = delta > cell->batch_delta ? delta : cell->batch_delta;
    cell->batch_kl = kl > cell->batch_kl ? kl : cell->batch_kl;
    if ((row->type == MX_F32 || row->type == MX_F16) && kv->kv_type != PMPD_KV_PQ) {
        if (delta != 0.0)
            fail_msg("%s weights, %s KV, batch %u: logits differ from batch 32 by %g", row->name, kv->name,
                     (unsigned)batch, delta);
    } else if (kl > MX_BATCH_KL(row->max_kl[kv - mx_kvs])) {
        fail_msg("%s weights, %s KV, batch %u: mean KL %g from batch 32", row->name, kv->name, (unsigned)batch, kl);
    }
}

/* Every thread count and batch size of one (weights, KV) cell. */
static void mx_cell_run(const mx_world *w, const mx_weights *row, const mx_kv *kv, mx_cell *cell)
{
    static const uint32_t batches[3] = {32, 7, 1};
    const int first_batch = w->reduced ? 1 : 0, end_batch = w->reduced ? 2 : 3;
    size_t n = (size_t)MX_STEPS * w->vocab;
    const pmpd_model *model = w->models[row->type][kv->pq].model;
    mx_run_result base, one, two;
    int b;
    memset(cell, 0, sizeof *cell);
    base.logits = (float *)malloc(n * sizeof(float));
    one.logits = (float *)malloc(n * sizeof(float));
    two.logits = (float *)malloc(n * sizeof(float));
    for (b = first_batch; b < end_batch; b++) {
        mx_run_result *r1 = b == first_batch ? &base : &one;
        mx_run(w, model, row, kv->kv_type, 1, batches[b], w->reference, r1);
        cell->runs++;
        mx_quality(w, r1, cell);
        if (b == first_batch) {
            cell->planned = r1->planned;
            cell->bits = r1->bits;
            /* The out-of-order prefill equals the in-order one bit for bit
             * (under emulation beside the PQ caches only, whose window
             * coding is the one cross-chunk state test_prefill_graph
             * does not reach). */
            if (!w->reduced || kv->kv_type == PMPD_KV_PQ) {
                mx_in_flight = 2;
                mx_run(w, model, row, kv->kv_type, 1, batches[b], w->reference, &one);
                mx_in_flight = 0;
                cell->runs++;
                if (memcmp(r1->logits, one.logits, n * sizeof(float)) != 0)
                    fail_msg("%s weights, %s KV, batch %u: in-order prefill differs from out of order", row->name,
                             kv->name, (unsigned)batches[b]);
            }
        } else {
            mx_batch_compare(w, row, kv, batches[b], &base, r1, cell);
        }
        /* Threads split rows and heads, never a sum: bit for bit. */
        if (w->reduced && kv->kv_type != PMPD_KV_F32)
            continue;
        mx_run(w, model, row, kv->kv_type, 2, batches[b], w->reference, &two);
        cell->runs++;
        if (memcmp(r1->logits, two.logits, n * sizeof(float)) != 0)
            fail_msg("%s weights, %s KV, batch %u: 2 threads differ from 1", row->name, kv->name,
                     (unsigned)batches[b]);
    }
    free(base.logits);
    free(one.logits);
    free(two.logits);
}

static void mx_matrix(const char *model_file, const char *label, int all)
{
    mx_world *w = mx_build(model_file, all);
    mx_cell cell;
    size_t r, k;
    int runs = 0, failures = 0;
    printf("%s, %zu prompt tokens, %d teacher-forced predictions, context %d%s\n", label, w->n_prompt, MX_STEPS,
           MX_CONTEXT, w->reduced ? " (reduced: batch 7 only)" : "");
    printf("%-20s %-5s %6s %8s %5s %10s %9s %8s\n", "weights", "KV", "top-1", "KL", "bits", "batch dlog", "batch KL",
           "arena");
    for (r = 0; r < MX_N_ROWS; r++) {
        const mx_weights *row = &mx_rows[r];
        /* The second model: the float reference, q8 and the two PMPD schedules. */
        if (!w->models[row->type][0].model || (!all && row->type == MX_NESTED && row->schedule == MX_FIXED))
            continue;
        for (k = 0; k < 6; k++) {
            /* Under an emulator each weight type's kernels meet the f32
             * cache and each cache's the f32 weights: every Arm kernel runs
             * in a whole model; the pairs between, host-independent, run
             * natively and under the sanitizers. */
            if (w->emulated && row->type != MX_F32 && mx_kvs[k].kv_type != PMPD_KV_F32)
                continue;
            mx_cell_run(w, row, &mx_kvs[k], &cell);
            runs += cell.runs;
            printf("%-20s %-5s %6.3f %8.5f %5.2f %10.2g %9.4f %8zu%s\n", row->name, mx_kvs[k].name, cell.top1,
                   cell.kl, row->type == MX_NESTED ? cell.bits : 0.0, cell.batch_delta, cell.batch_kl, cell.planned,
                   cell.top1 < row->min_top1[k] || cell.kl > row->max_kl[k] ? "  OUT OF BOUNDS" : "");
            failures += cell.top1 < row->min_top1[k] || cell.kl > row->max_kl[k];
        }
    }
    printf("%d runs\n", runs);
    fflush(stdout);
    assert_int_equal(failures, 0);
    mx_free(w);
}

static void test_stories260k_matrix(void **state)
{
    (void)state;
    mx_matrix("models/stories260K.bin", "stories260K", 1);
}

static void test_llama2xs_rows(void **state)
{
    (void)state;
    if (test_reduced()) {
        printf("llama2xs rows: natively only (PMPD_TEST_REDUCED)\n");
        skip();
    }
    mx_matrix("models/llama2xs_d64_h192_model.bin", "llama2xs (dim 64, 5 layers, 4 KV heads)", 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stories260k_matrix),
        cmocka_unit_test(test_llama2xs_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
