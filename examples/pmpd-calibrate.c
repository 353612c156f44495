/*
 * pmpd-calibrate: progressive mixed-precision decoding, calibrated offline.
 *
 *   pmpd-calibrate INPUT OUT [--tokenizer FILE] [--bits SEED:PARENT]
 *                  [--epsilon E] [--prompts N] [--prompt-length N]
 *                  [--output-length N] [--candidates N] [--seed S]
 *                  [--epochs N] [--prompt-file FILE] [--csv FILE] [--svg FILE]
 *                  [--weighted]
 *
 * INPUT is a llama2.c checkpoint (with --tokenizer), a GGUF file or a .pmpd
 * container.  Float layer matrices (every checkpoint; a container's f32 or
 * f16 ones) are quantized to nested any-precision weights (with --weighted,
 * each weight column weighed by the mean square of its input over the
 * training set's text) and the float model is the reference; a container
 * whose layer matrices are already nested keeps its weights, and the
 * schedules are calibrated against that model at its widest width.  With
 * prompts and continuations sampled from the reference model itself (no
 * dataset needed; disjoint seeds for the training, validation and test
 * sets), it runs phase-aware allocation and the static PMPD schedule solver
 * on the validation set and trains the learned scheduler on the training
 * set.  It then measures on the test set -- prompts none of them saw -- the
 * quality of uniform widths, the phase-aware pair, the static schedule and
 * the learned scheduler against the reference's greedy output (token
 * Rouge-L, next-token KL, top-1 agreement) with their average decode bits,
 * prints the table (optionally CSV and an SVG plot of Rouge-L against
 * average decode bits), and writes OUT (through OUT.tmp): the nested model
 * with the static schedule and the learned scheduler's weights as sections,
 * every other section of a container input kept byte for byte.  With
 * --prompt-file, the prompts are the file's lines instead (each cut to BOS
 * + prompt-length tokens, shorter ones skipped, dealt in turn to the
 * training, validation and test sets); the reference model still provides
 * the continuations.  The work is pmpd_schedule_calibrate_file (pmpd.h).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pmpd.h"

typedef struct calibrate_options {
    const char *input, *out, *csv, *svg;
    pmpd_schedule_calibration_options lib;
} calibrate_options;

static int calibrate_usage(void)
{
    fprintf(stderr, "usage: pmpd-calibrate INPUT OUT [--tokenizer FILE] [--bits SEED:PARENT] [--epsilon E]\n"
                    "       [--prompts N] [--prompt-length N] [--output-length N] [--candidates N] [--seed S]\n"
                    "       [--epochs N] [--prompt-file FILE] [--csv FILE] [--svg FILE] [--weighted]\n"
                    "INPUT: a llama2.c checkpoint (with --tokenizer), a GGUF file, or a .pmpd container.\n"
                    "Float matrices (f32, f16) are quantized to nested weights and the float model is the\n"
                    "reference; a .pmpd whose matrices are already nested keeps its weights and is calibrated\n"
                    "against itself at its widest width.  OUT gets the static schedule and learned scheduler\n"
                    "sections; every other section of a .pmpd input is kept byte for byte.\n");
    return 2;
}

static int calibrate_parse(int argc, char **argv, calibrate_options *o)
{
    pmpd_schedule_calibration_options *l = &o->lib;
    int i;
    memset(o, 0, sizeof *o);
    pmpd_schedule_calibration_options_init(l);
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1;
        if (a[0] != '-') {
            if (!o->input)
                o->input = a;
            else if (!o->out)
                o->out = a;
            else
                return 0;
            continue;
        }
        if (!strcmp(a, "--weighted")) {
            l->weighted = 1;
            continue;
        }
        if (!v)
            return 0;
        i++;
        if (!strcmp(a, "--tokenizer")) l->tokenizer_path = v;
        else if (!strcmp(a, "--csv")) o->csv = v;
        else if (!strcmp(a, "--svg")) o->svg = v;
        else if (!strcmp(a, "--prompt-file")) l->prompt_file = v;
        else if (!strcmp(a, "--bits")) ok = sscanf(v, "%u:%u", &l->seed_bits, &l->parent_bits) == 2;
        else if (!strcmp(a, "--epsilon")) ok = sscanf(v, "%lf", &l->epsilon) == 1;
        else if (!strcmp(a, "--prompts")) ok = sscanf(v, "%u", &l->sets.n_prompts) == 1;
        else if (!strcmp(a, "--prompt-length")) ok = sscanf(v, "%u", &l->sets.prompt_length) == 1;
        else if (!strcmp(a, "--output-length")) ok = sscanf(v, "%u", &l->sets.output_length) == 1;
        else if (!strcmp(a, "--candidates")) ok = sscanf(v, "%u", &l->candidates) == 1;
        else if (!strcmp(a, "--epochs")) ok = sscanf(v, "%u", &l->learned.epochs) == 1;
        else if (!strcmp(a, "--seed")) ok = sscanf(v, "%llu", (unsigned long long *)&l->sets.seed) == 1;
        else ok = 0;
        if (!ok)
            return 0;
    }
    return o->input && o->out;
}

static void calibrate_progress(void *context, uint64_t done, uint64_t total)
{
    (void)context;
    fprintf(stderr, "\rpmpd-calibrate: quantizing rows %llu / %llu", (unsigned long long)done,
            (unsigned long long)total);
    if (done == total)
        fputc('\n', stderr);
}

static void calibrate_step(void *context, const char *what)
{
    (void)context;
    fprintf(stderr, "pmpd-calibrate: %s\n", what);
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

static void calibrate_print(const pmpd_schedule_calibration_report *r, FILE *csv)
{
    uint32_t i;
    printf("\n%-22s %-34s %9s %8s %8s %8s\n", "configuration", "widths (bits@from decode step)", "avg bits",
           "Rouge-L", "KL", "top-1");
    if (csv)
        fprintf(csv, "configuration,schedule,average_decode_bits,rouge_l,kl,top1\n");
    for (i = 0; i < r->n_rows; i++) {
        const pmpd_calibration_quality *q = &r->quality[i];
        char widths[96];
        calibrate_describe(&r->schedule[i], widths, sizeof widths);
        printf("%-22s %-34s %9.2f %8.4f %8.4f %8.4f\n", r->name[i], widths, q->average_decode_bits, q->rouge_l, q->kl,
               q->top1);
        if (csv)
            fprintf(csv, "\"%s\",\"%s\",%.4f,%.6f,%.6f,%.6f\n", r->name[i], widths, q->average_decode_bits, q->rouge_l,
                    q->kl, q->top1);
    }
}

/* Rouge-L against average decode bits, one labelled point per row. */
static void calibrate_svg(const pmpd_schedule_calibration_report *r, FILE *f)
{
    const double w = 640, h = 420, left = 60, right = 20, top = 20, bottom = 50;
    double x0 = r->seed_bits - 0.25, x1 = r->parent_bits + 0.25;
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
    for (i = r->seed_bits; i <= r->parent_bits; i++) {
        double x = left + (w - left - right) * (i - x0) / (x1 - x0);
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">%u</text>\n", x, h - bottom + 18,
                (unsigned)i);
    }
    for (i = 0; i < r->n_rows; i++) {
        double x = left + (w - left - right) * (r->quality[i].average_decode_bits - x0) / (x1 - x0);
        double y = h - bottom - (h - top - bottom) * r->quality[i].rouge_l;
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\"/>\n", x, y,
                strncmp(r->name[i], "uniform", 7) ? "#c0392b" : "#2c3e50");
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", x + 8, y - 6 - 12.0 * (double)(i % 2), r->name[i]);
    }
    fprintf(f, "</svg>\n");
}

int main(int argc, char **argv)
{
    calibrate_options o;
    pmpd_schedule_calibration_report r;
    pmpd_error err;
    FILE *csv = NULL, *svg = NULL;
    pmpd_status st;
    unsigned k;
    if (!calibrate_parse(argc, argv, &o))
        return calibrate_usage();
    if (isatty(fileno(stderr)))
        o.lib.progress = calibrate_progress;
    o.lib.step = calibrate_step;
    st = pmpd_schedule_calibrate_file(o.input, o.out, &o.lib, &r, &err);
    if (st != PMPD_OK) {
        fprintf(stderr, "pmpd-calibrate: %s: %s%s%s\n", o.input, pmpd_strerror(st), err.message[0] ? ": " : "",
                err.message);
        return 1;
    }
    printf("calibrated against %s; test set: %u prompts of %u tokens, %u output tokens; epsilon %.3f "
           "(validation Rouge-L of the %u-bit model: %.4f)\n",
           r.calibrated_on == PMPD_CALIBRATED_ON_WIDEST ? "the input's nested weights at their widest width"
                                                        : "the float model",
           r.test_prompts, r.prompt_length, r.output_length, o.lib.epsilon, r.parent_bits,
           r.validation_reference.rouge_l);
    if (o.csv && !(csv = fopen(o.csv, "w")))
        fprintf(stderr, "pmpd-calibrate: cannot write %s\n", o.csv);
    calibrate_print(&r, csv);
    printf("(learned PMPD: per-prompt widths %u..%u; training labels per candidate switch step", r.parent_bits,
           r.seed_bits);
    for (k = 0; k < r.learned.n_pairs; k++) {
        unsigned c;
        printf("%s %u->%u:", k ? ";" : "", r.parent_bits - k, r.parent_bits - k - 1);
        for (c = 0; c < o.lib.candidates && c < 8; c++)
            printf(" %u", (unsigned)r.learned.label_counts[k][c]);
        printf(" (train accuracy %.2f)", r.learned.train_accuracy[k]);
    }
    printf(")\n");
    if (csv)
        fclose(csv);
    if (o.svg && (svg = fopen(o.svg, "w")) != NULL) {
        calibrate_svg(&r, svg);
        fclose(svg);
    }
    printf("wrote %s with the static schedule and learned scheduler sections\n", o.out);
    return 0;
}
