/*
 * pmpd-calibrate: progressive mixed-precision decoding, calibrated offline.
 *
 *   pmpd-calibrate CHECKPOINT OUT --tokenizer FILE [--bits SEED:PARENT]
 *                  [--epsilon E] [--prompts N] [--prompt-length N]
 *                  [--output-length N] [--candidates N] [--seed S]
 *                  [--epochs N] [--prompt-file FILE] [--csv FILE] [--svg FILE]
 *                  [--weighted]
 *
 * Imports a llama2.c checkpoint (or GGUF), quantizes its layer matrices to
 * nested any-precision weights (with --weighted, each weight column weighed
 * by the mean square of its input over the training set's text), and, with
 * prompts and continuations sampled
 * from the float model itself (no dataset needed; disjoint seeds for the
 * training, validation and test sets), runs phase-aware allocation and the
 * static PMPD schedule solver on the validation set and trains the learned
 * scheduler on the training set.  It then measures on the test set --
 * prompts none of them saw -- the quality of uniform widths, the
 * phase-aware pair, the static schedule and the learned scheduler against
 * the float model's greedy output (token Rouge-L, next-token KL, top-1
 * agreement) with their average decode bits, prints the table (optionally
 * CSV and an SVG plot of Rouge-L against average decode bits), and writes
 * OUT: the nested model with the static schedule and the learned
 * scheduler's weights as sections.  With --prompt-file, the prompts are the
 * file's lines instead (each cut to BOS + prompt-length tokens, shorter ones
 * skipped, dealt in turn to the training, validation and test sets); the
 * float model still provides the reference continuations.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "examples/common/built_model.h"
#include "examples/common/read_file.h"
#include "pmpd.h"
#include "pmpd_impl/offline/format/builder.h"
#include "pmpd_impl/offline/import/import.h"
#include "pmpd_impl/offline/precision/anyprec_build.h"
#include "pmpd_impl/offline/quant/build.h"

#define CALIBRATE_MODEL_ARENA_BYTES ((size_t)64 << 20)

typedef struct calibrate_options {
    const char *checkpoint, *out, *tokenizer, *csv, *svg, *prompt_file;
    unsigned seed_bits, parent_bits, candidates;
    int weighted;
    double epsilon;
    pmpd_calibration_config sets;
    pmpd_learned_train_config learned;
} calibrate_options;

typedef struct calibrate_row {
    char name[48];
    pmpd_precision_schedule schedule;
    pmpd_calibration_quality quality;
} calibrate_row;

static int calibrate_usage(void)
{
    fprintf(stderr, "usage: pmpd-calibrate CHECKPOINT OUT --tokenizer FILE [--bits SEED:PARENT] [--epsilon E]\n"
                    "       [--prompts N] [--prompt-length N] [--output-length N] [--candidates N] [--seed S]\n"
                    "       [--epochs N] [--prompt-file FILE] [--csv FILE] [--svg FILE] [--weighted]\n");
    return 2;
}

static int calibrate_parse(int argc, char **argv, calibrate_options *o)
{
    int i;
    memset(o, 0, sizeof *o);
    o->seed_bits = 2;
    o->parent_bits = 4;
    o->candidates = 4;
    o->epsilon = 0.05;
    pmpd_calibration_config_init(&o->sets);
    pmpd_learned_train_config_init(&o->learned);
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1;
        if (a[0] != '-') {
            if (!o->checkpoint)
                o->checkpoint = a;
            else if (!o->out)
                o->out = a;
            else
                return 0;
            continue;
        }
        if (!strcmp(a, "--weighted")) {
            o->weighted = 1;
            continue;
        }
        if (!v)
            return 0;
        i++;
        if (!strcmp(a, "--tokenizer")) o->tokenizer = v;
        else if (!strcmp(a, "--csv")) o->csv = v;
        else if (!strcmp(a, "--svg")) o->svg = v;
        else if (!strcmp(a, "--prompt-file")) o->prompt_file = v;
        else if (!strcmp(a, "--bits")) ok = sscanf(v, "%u:%u", &o->seed_bits, &o->parent_bits) == 2;
        else if (!strcmp(a, "--epsilon")) ok = sscanf(v, "%lf", &o->epsilon) == 1;
        else if (!strcmp(a, "--prompts")) ok = sscanf(v, "%u", &o->sets.n_prompts) == 1;
        else if (!strcmp(a, "--prompt-length")) ok = sscanf(v, "%u", &o->sets.prompt_length) == 1;
        else if (!strcmp(a, "--output-length")) ok = sscanf(v, "%u", &o->sets.output_length) == 1;
        else if (!strcmp(a, "--candidates")) ok = sscanf(v, "%u", &o->candidates) == 1;
        else if (!strcmp(a, "--epochs")) ok = sscanf(v, "%u", &o->learned.epochs) == 1;
        else if (!strcmp(a, "--seed")) ok = sscanf(v, "%llu", (unsigned long long *)&o->sets.seed) == 1;
        else ok = 0;
        if (!ok)
            return 0;
    }
    return o->checkpoint && o->out && o->tokenizer;
}

static pmpd_status calibrate_import(const calibrate_options *o, pmpd_build_model *b)
{
    size_t size = 0;
    unsigned char *data = example_read_file(o->checkpoint, &size);
    pmpd_vocab vocab;
    pmpd_status st;
    pmpd_build_init(b);
    if (!data)
        return PMPD_ERR_NOT_FOUND;
    st = size >= 4 && !memcmp(data, "GGUF", 4) ? pmpd_import_gguf(data, size, b, NULL)
                                               : pmpd_import_llama2c(data, size, b, NULL);
    free(data);
    if (st != PMPD_OK)
        return st;
    data = example_read_file(o->tokenizer, &size);
    if (!data)
        return PMPD_ERR_NOT_FOUND;
    st = pmpd_import_llama2c_tokenizer(data, size, b->info.vocab_size, &vocab, NULL);
    free(data);
    if (st == PMPD_OK)
        st = pmpd_build_add_vocab(b, &vocab);
    pmpd_vocab_free(&vocab);
    return st;
}

/* Training, validation and test sets from the lines of the prompt file. */
static pmpd_status calibrate_user_sets(const calibrate_options *o, const pmpd_model *model,
                                       pmpd_calibration_set sets[3])
{
    const uint32_t length = o->sets.prompt_length + 1;
    size_t size = 0, count[3] = {0, 0, 0}, line = 0, s;
    unsigned char *text = example_read_file(o->prompt_file, &size);
    int32_t *tokens[3] = {NULL, NULL, NULL}, *ids = NULL;
    void *scratch_block = NULL;
    pmpd_arena scratch;
    char *cursor, *end;
    pmpd_status st = text ? PMPD_OK : PMPD_ERR_NOT_FOUND;
    if (text) {
        ids = (int32_t *)malloc((size + 3) * sizeof(int32_t));
        /* The tokenizer's working memory: 24 bytes per input byte (pmpd.h). */
        scratch_block = malloc((size + 3) * 24 + 2 * PMPD_ARENA_ALIGNMENT);
        pmpd_arena_init(&scratch, scratch_block, (size + 3) * 24 + 2 * PMPD_ARENA_ALIGNMENT);
        for (s = 0; s < 3; s++)
            tokens[s] = (int32_t *)malloc((size / 2 + 1) * length * sizeof(int32_t));
        if (!text || !ids || !scratch_block || !tokens[0] || !tokens[1] || !tokens[2])
            st = PMPD_ERR_OUT_OF_MEMORY;
    }
    for (cursor = (char *)text; st == PMPD_OK && cursor < (char *)text + size; cursor = end + 1) {
        size_t n = 0;
        end = memchr(cursor, '\n', (size_t)((char *)text + size - cursor));
        if (!end)
            end = (char *)text + size;
        *end = '\0';
        if (pmpd_tokenize(model, cursor, 1, 0, ids, size + 3, &n, &scratch) == PMPD_OK && n >= length) {
            s = line++ % 3;
            memcpy(tokens[s] + count[s]++ * length, ids, length * sizeof(int32_t));
        }
    }
    for (s = 0; s < 3 && st == PMPD_OK; s++)
        st = count[s] ? pmpd_calibration_set_from_prompts(model, tokens[s], (uint32_t)count[s], length,
                                                          o->sets.output_length, &sets[s])
                      : PMPD_ERR_INVALID_ARGUMENT;
    for (s = 0; s < 3; s++)
        free(tokens[s]);
    free(ids);
    free(scratch_block);
    free(text);
    return st;
}

static void calibrate_progress(void *context, uint64_t done, uint64_t total)
{
    (void)context;
    fprintf(stderr, "\rpmpd-calibrate: quantizing rows %llu / %llu", (unsigned long long)done,
            (unsigned long long)total);
    if (done == total)
        fputc('\n', stderr);
}

static void calibrate_describe(const pmpd_precision_schedule *s, char *out, size_t size)
{
    size_t used = (size_t)snprintf(out, size, "prefill %u, decode", (unsigned)s->prefill_bits);
    uint32_t i;
    if (s->decode_bits[0] == 0) {
        snprintf(out + used, size - used, " chosen per prompt");
        return;
    }
    for (i = 0; i < s->n_widths && used < size; i++) {
        if (s->from_step[i] == PMPD_SCHEDULE_NEVER)
            continue;
        used += (size_t)snprintf(out + used, size - used, " %u@%u", (unsigned)s->decode_bits[i],
                                 (unsigned)s->from_step[i]);
    }
}

static void calibrate_print(const calibrate_row *rows, size_t n, FILE *csv)
{
    size_t i;
    printf("\n%-22s %-34s %9s %8s %8s %8s\n", "configuration", "widths (bits@from decode step)", "avg bits",
           "Rouge-L", "KL", "top-1");
    if (csv)
        fprintf(csv, "configuration,schedule,average_decode_bits,rouge_l,kl,top1\n");
    for (i = 0; i < n; i++) {
        char widths[96];
        calibrate_describe(&rows[i].schedule, widths, sizeof widths);
        printf("%-22s %-34s %9.2f %8.4f %8.4f %8.4f\n", rows[i].name, widths, rows[i].quality.average_decode_bits,
               rows[i].quality.rouge_l, rows[i].quality.kl, rows[i].quality.top1);
        if (csv)
            fprintf(csv, "\"%s\",\"%s\",%.4f,%.6f,%.6f,%.6f\n", rows[i].name, widths,
                    rows[i].quality.average_decode_bits, rows[i].quality.rouge_l, rows[i].quality.kl,
                    rows[i].quality.top1);
    }
}

/* Rouge-L against average decode bits, one labelled point per row. */
static void calibrate_svg(const calibrate_row *rows, size_t n, unsigned seed_bits, unsigned parent_bits, FILE *f)
{
    const double w = 640, h = 420, left = 60, right = 20, top = 20, bottom = 50;
    double x0 = seed_bits - 0.25, x1 = parent_bits + 0.25;
    size_t i;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
               "font-size=\"12\">\n", w, h);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", left, h - bottom,
            w - right, h - bottom);
    fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", left, top, left,
            h - bottom);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">average decode bits</text>\n",
            (left + w - right) / 2, h - 12);
    fprintf(f, "<text x=\"14\" y=\"%.0f\" transform=\"rotate(-90 14 %.0f)\" text-anchor=\"middle\">Rouge-L vs "
               "float greedy</text>\n", (top + h - bottom) / 2, (top + h - bottom) / 2);
    for (i = 0; i <= 4; i++) {
        double y = h - bottom - (h - top - bottom) * (double)i / 4;
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%.2f</text>\n", left - 6, y + 4, i / 4.0);
    }
    for (i = seed_bits; i <= parent_bits; i++) {
        double x = left + (w - left - right) * (i - x0) / (x1 - x0);
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">%u</text>\n", x, h - bottom + 18,
                (unsigned)i);
    }
    for (i = 0; i < n; i++) {
        double x = left + (w - left - right) * (rows[i].quality.average_decode_bits - x0) / (x1 - x0);
        double y = h - bottom - (h - top - bottom) * rows[i].quality.rouge_l;
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\"/>\n", x, y,
                strncmp(rows[i].name, "uniform", 7) ? "#c0392b" : "#2c3e50");
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", x + 8, y - 6 - 12.0 * (double)(i % 2), rows[i].name);
    }
    fprintf(f, "</svg>\n");
}

static int calibrate_write(const char *path, const pmpd_build_model *b)
{
    void *block;
    unsigned char *data;
    size_t size;
    FILE *f;
    int ok;
    if (pmpd_build_serialize(b, &block, &data, &size) != PMPD_OK)
        return 0;
    f = fopen(path, "wb");
    ok = f && fwrite(data, 1, size, f) == size;
    if (f)
        ok = fclose(f) == 0 && ok;
    free(block);
    return ok;
}

int main(int argc, char **argv)
{
    calibrate_options o;
    pmpd_build_model b;
    example_model float_model, nested;
    pmpd_calibration_set train, validation, test;
    pmpd_learned_train_report learned_report;
    void *learned = NULL;
    size_t learned_size = 0;
    pmpd_precision_schedule phase, fixed;
    pmpd_calibration_quality reference;
    calibrate_row rows[16];
    size_t n_rows = 0;
    unsigned char section[128];
    size_t section_size = 0;
    unsigned k;
    FILE *csv = NULL, *svg = NULL;
    pmpd_anyprec_importance importance;
    pmpd_status st;
    memset(&importance, 0, sizeof importance);
    if (!calibrate_parse(argc, argv, &o))
        return calibrate_usage();
    memset(&float_model, 0, sizeof float_model);
    memset(&nested, 0, sizeof nested);
    st = calibrate_import(&o, &b);
    if (st == PMPD_OK)
        st = example_model_open(&b, CALIBRATE_MODEL_ARENA_BYTES, &float_model);
    if (st != PMPD_OK) {
        fprintf(stderr, "pmpd-calibrate: cannot open the float model: %s\n", pmpd_strerror(st));
        return 1;
    }
    if (o.prompt_file) {
        pmpd_calibration_set sets[3];
        fprintf(stderr, "pmpd-calibrate: prompts from %s\n", o.prompt_file);
        memset(sets, 0, sizeof sets);
        st = calibrate_user_sets(&o, float_model.model, sets);
        train = sets[0];
        validation = sets[1];
        test = sets[2];
    } else {
        fprintf(stderr, "pmpd-calibrate: sampling %u training, validation and test prompts each from the float model\n",
                o.sets.n_prompts);
        st = pmpd_calibration_set_sample(float_model.model, &o.sets, PMPD_CALIBRATION_TRAIN, &train);
        if (st == PMPD_OK)
            st = pmpd_calibration_set_sample(float_model.model, &o.sets, PMPD_CALIBRATION_VALIDATION, &validation);
        if (st == PMPD_OK)
            st = pmpd_calibration_set_sample(float_model.model, &o.sets, PMPD_CALIBRATION_TEST, &test);
    }
    if (st == PMPD_OK && o.weighted) {
        fprintf(stderr, "pmpd-calibrate: weighing weight columns by the training set's activations\n");
        st = pmpd_anyprec_importance_collect(float_model.model, &train, &importance);
    }
    if (st == PMPD_OK)
        st = pmpd_anyprec_build_convert(&b, o.seed_bits, o.parent_bits, o.weighted ? &importance : NULL,
                                        isatty(fileno(stderr)) ? calibrate_progress : NULL, NULL);
    /* Embedding and classifier in q8, as pmpd-convert --type anyprec does. */
    if (st == PMPD_OK)
        st = pmpd_quant_build_convert(&b, PMPD_TENSOR_Q8, NULL, NULL);
    pmpd_anyprec_importance_free(&importance);
    if (st == PMPD_OK)
        st = example_model_open(&b, CALIBRATE_MODEL_ARENA_BYTES, &nested);
    if (st != PMPD_OK) {
        fprintf(stderr, "pmpd-calibrate: cannot sample the calibration sets or build the nested model: %s\n", pmpd_strerror(st));
        return 1;
    }
    if (st == PMPD_OK) {
        fprintf(stderr, "pmpd-calibrate: phase-aware allocation (epsilon %.3f)\n", o.epsilon);
        st = pmpd_precision_phase_aware(nested.model, &validation, o.epsilon, &phase, &reference, NULL);
    }
    if (st == PMPD_OK) {
        fprintf(stderr, "pmpd-calibrate: static schedule solver (%u switch candidates)\n", o.candidates);
        st = pmpd_precision_static_solve(nested.model, &validation, o.epsilon, o.parent_bits, o.candidates, &fixed,
                                         NULL);
    }
    if (st == PMPD_OK) {
        fprintf(stderr, "pmpd-calibrate: labelling and training the learned scheduler (%u epochs)\n",
                o.learned.epochs);
        o.learned.n_candidates = o.candidates;
        st = pmpd_learned_scheduler_train(nested.model, &train, o.parent_bits, &o.learned, &learned, &learned_size,
                                          &learned_report);
    }
    for (k = o.parent_bits; k >= o.seed_bits && st == PMPD_OK; k--) {
        snprintf(rows[n_rows].name, sizeof rows[n_rows].name, "uniform %u-bit", k);
        pmpd_precision_schedule_uniform(&rows[n_rows++].schedule, k, k);
    }
    snprintf(rows[n_rows].name, sizeof rows[n_rows].name, "phase-aware");
    rows[n_rows++].schedule = phase;
    snprintf(rows[n_rows].name, sizeof rows[n_rows].name, "static PMPD");
    rows[n_rows++].schedule = fixed;
    fprintf(stderr, "pmpd-calibrate: measuring %u configurations on the test set\n", (unsigned)n_rows + 1);
    for (k = 0; k < n_rows && st == PMPD_OK; k++)
        st = pmpd_calibration_evaluate(nested.model, &test, &rows[k].schedule, &rows[k].quality);
    if (st == PMPD_OK) {
        snprintf(rows[n_rows].name, sizeof rows[n_rows].name, "learned PMPD");
        pmpd_precision_schedule_uniform(&rows[n_rows].schedule, o.parent_bits, 0);
        st = pmpd_calibration_evaluate_learned(nested.model, &test, o.parent_bits, learned, learned_size,
                                               &rows[n_rows++].quality);
    }
    if (st != PMPD_OK) {
        fprintf(stderr, "pmpd-calibrate: calibration failed: %s\n", pmpd_strerror(st));
        return 1;
    }
    printf("test set: %u prompts of %u tokens, %u output tokens; epsilon %.3f (validation Rouge-L of the %u-bit "
           "model: %.4f)\n",
           test.n_prompts, test.prompt_length, test.output_length, o.epsilon, o.parent_bits, reference.rouge_l);
    if (o.csv && !(csv = fopen(o.csv, "w")))
        fprintf(stderr, "pmpd-calibrate: cannot write %s\n", o.csv);
    calibrate_print(rows, n_rows, csv);
    printf("(learned PMPD: per-prompt widths %u..%u; training labels per candidate switch step", o.parent_bits,
           o.seed_bits);
    for (k = 0; k < learned_report.n_pairs; k++) {
        unsigned c;
        printf("%s %u->%u:", k ? ";" : "", o.parent_bits - k, o.parent_bits - k - 1);
        for (c = 0; c < o.candidates && c < 8; c++)
            printf(" %u", (unsigned)learned_report.label_counts[k][c]);
        printf(" (train accuracy %.2f)", learned_report.train_accuracy[k]);
    }
    printf(")\n");
    if (csv)
        fclose(csv);
    if (o.svg && (svg = fopen(o.svg, "w")) != NULL) {
        calibrate_svg(rows, n_rows, o.seed_bits, o.parent_bits, svg);
        fclose(svg);
    }
    st = pmpd_precision_schedule_encode(&fixed, section, sizeof section, &section_size);
    if (st == PMPD_OK)
        st = pmpd_build_add_section(&b, PMPD_SECTION_PRECISION_SCHEDULE, 1, 0, section, section_size);
    if (st == PMPD_OK)
        st = pmpd_build_add_section(&b, PMPD_SECTION_LEARNED_SCHEDULER, 1, 0, learned, learned_size);
    if (st != PMPD_OK || !calibrate_write(o.out, &b)) {
        fprintf(stderr, "pmpd-calibrate: cannot write %s\n", o.out);
        return 1;
    }
    printf("wrote %s with the static schedule and learned scheduler sections\n", o.out);
    free(learned);
    pmpd_calibration_set_free(&train);
    pmpd_calibration_set_free(&validation);
    pmpd_calibration_set_free(&test);
    example_model_close(&float_model);
    example_model_close(&nested);
    pmpd_build_free(&b);
    return 0;
}
