/* pmpd-convert SOURCE OUT [--tokenizer FILE] [--type f32|f16|anyprec|q8|q4|q2cb|w8a8|nuq2..4|vq2..4|tcq1.5..tcq4|keep-closest] [--bits SEED:PARENT]
 *                         [--pmpd-calibrate [--epsilon E] [--prompts N] [--output-length N]]
 *                         [--kv-codebooks SUB:BITS] [--ctx N] [--threads N]
 *                         [--budget-bits B [--palette q8,q4,q2cb] [--palette-flat] [--palette-gaussian]]
 *                         [--ldlq N[:LENGTH] [--ldlq-text FILE]]
 *
 * Converts a llama2.c checkpoint (legacy or version 1) or a GGUF v3 Llama
 * file into a .pmpd container.  With --kv-codebooks and --pmpd-calibrate it
 * builds the whole model for a board in one run, in this order, each step
 * writing a temporary file next to OUT (removed afterwards; OUT itself
 * appears only when complete, through OUT.tmp):
 *   1. convert: the matrices as --type; with --pmpd-calibrate they stay
 *      f32 here, so the float model is the reference of step 3;
 *   2. --kv-codebooks SUB:BITS: the product-quantized KV-cache codebooks
 *      (SUB-dim subspaces, BITS-bit codes), trained on text the model of
 *      step 1 samples (pmpd_pq_calibrate_file);
 *   3. --pmpd-calibrate: nested weights (--bits, default 2:4) quantized
 *      from the floats, the static schedule and the learned scheduler
 *      (pmpd_schedule_calibrate_file; needs --type anyprec), keeping the
 *      codebooks of step 2 byte for byte.
 * --type keep-closest stores each GGUF matrix in the pmpd type nearest its
 * own (docs/models.md, --type keep-closest), and the summary lists each tensor's choice.
 * f32, f16, q8, q4, q2cb and keep-closest stream: one tensor in memory at
 * a time, so a model larger than the machine's memory converts.
 * --budget-bits B allocates formats instead of --type (seed 002): each
 * layer's fusable groups ({q,k,v}, output, {gate,up}, down) get one format
 * of --palette each, so that the layers' matrices store at most B bits per
 * weight and the predicted KL loss (sum of sensitivity x error) is least;
 * the embedding and classifier stay q8, outside the budget.  The report
 * gives per group the format, its sensitivity and fit, its error and
 * bytes, then the bits reached and the predicted loss.
 * It ends with a summary: per tensor type the count and bytes, the sections
 * and what each was calibrated on, and the arena bytes a session of --ctx
 * positions (default the model's) needs for each KV-cache mode.  Progress
 * lines (tensor i/N and megabytes written when streaming; work done, rate
 * and time left while quantizing) appear when stderr is a terminal.  Exits
 * 0 only on success; on
 * failure one line names the input, the step and the problem. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pmpd.h"
#include "pmpd_impl/model/model.h"

/* Tensor types the summary counts (f32 ... tcq, type 9). */
#define CONVERT_SUMMARY_TYPES 16
/* A macro's value as a string literal, for messages that quote a limit. */
#define CONVERT_STRING_(x) #x
#define CONVERT_STRING(x) CONVERT_STRING_(x)
#define CONVERT_SUMMARY_ARENA_BYTES ((size_t)16 << 20)

/* What the convert step's callbacks share: the progress label, whether
 * stderr is a terminal, and (for the summary) each tensor's source type. */
typedef struct convert_view {
    const char *label;
    /* With a budget, the first phases' own labels (sensitivity runs,
     * candidate errors), then label. */
    const char *phases[2];
    int tty;
    const char **sources; /* n_sources entries, from the library's static table */
    uint32_t n_sources;
} convert_view;

typedef struct convert_args {
    const char *in, *out;
    pmpd_tensor_type palette[PMPD_PALETTE_MAX_FORMATS];
    unsigned palette_bits[PMPD_PALETTE_MAX_FORMATS]; /* nuq entries' widths in bits, vq's and tcq's in quarter bits */
    pmpd_convert_options convert;
    int calibrate, kv;
    unsigned kv_sub, kv_bits;
    unsigned long ctx;
    pmpd_schedule_calibration_options schedule;
    convert_view view;
} convert_args;

/* Work done, its rate and the time left since this phase began (the
 * converter reports rows while quantizing, then bytes while writing; under
 * a budget first the sensitivity runs and the candidates' errors: a new
 * total or a smaller count starts a new phase).  On a terminal at most 5
 * updates a second on one line (the nested quantizer reports every 64
 * rows); elsewhere (a log) one line per 5% of each phase, so a long
 * allocation shows it is alive and how long each phase took (the
 * conversion after it stays quiet there, as without a budget). */
static void convert_progress(void *context, uint64_t done, uint64_t total)
{
    const convert_view *view = (const convert_view *)context;
    static uint64_t phase_total, last_done;
    static double phase_start, last_print;
    static unsigned phase, last_step;
    struct timespec ts;
    double now, rate;
    const char *label;
    unsigned step;
    if (done == total && total == phase_total && done == last_done)
        return; /* the end, reported again (after a tensor's last rows): printed once */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    now = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    if (total != phase_total || done < last_done) {
        phase_total = total;
        phase_start = now;
        last_print = 0.0;
        last_step = 0;
        phase++;
    }
    last_done = done;
    label = !view ? "" : phase <= 2 && view->phases[phase - 1] ? view->phases[phase - 1] : view->label;
    step = total ? (unsigned)(20 * done / total) : 20;
    if (view && !view->tty) {
        if (label == view->label || (step == last_step && done != total && done != 1))
            return; /* in a log: the allocation's phases only, from the first step (its rate) */
        last_step = step;
    } else if (done != total && now - last_print < 0.2) {
        return;
    }
    last_print = now;
    rate = now > phase_start ? (double)done / (now - phase_start) : 0.0;
    fprintf(stderr, "%spmpd-convert: %s %llu / %llu (%3.0f%%), %.1f%s/s, %.0f s, %.0f s left%s",
            view && !view->tty ? "" : "\r", label, (unsigned long long)done, (unsigned long long)total,
            total ? 100.0 * (double)done / (double)total : 100.0,
            rate >= 1e9 ? rate / 1e9 : rate >= 1e6 ? rate / 1e6 : rate >= 1e3 ? rate / 1e3 : rate,
            rate >= 1e9 ? "G" : rate >= 1e6 ? "M" : rate >= 1e3 ? "k" : "", now - phase_start,
            rate > 0.0 ? (double)(total - done) / rate : 0.0, view && !view->tty ? "\n" : "   ");
    if (done == total && (!view || view->tty))
        fputc('\n', stderr);
}

static void convert_tensor_written(void *context, const pmpd_convert_tensor_report *r)
{
    convert_view *view = (convert_view *)context;
    if (!view->sources && (view->sources = (const char **)calloc(r->n_tensors + 1, sizeof *view->sources)) != NULL)
        view->n_sources = r->n_tensors;
    if (r->index < view->n_sources)
        view->sources[r->index] = r->source_type;
    if (!view->tty)
        return;
    fprintf(stderr, "\rpmpd-convert: %s tensor %u/%u, %.1f / %.1f MB", view->label, (unsigned)r->index + 1,
            (unsigned)r->n_tensors, (double)r->bytes_done / 1e6, (double)r->bytes_total / 1e6);
    if (r->index + 1 == r->n_tensors)
        fputc('\n', stderr);
}

static void convert_step(void *context, const char *what)
{
    (void)context;
    fprintf(stderr, "pmpd-convert: %s\n", what);
}

static int usage(void)
{
    unsigned type;
    fprintf(stderr,
            "usage: pmpd-convert SOURCE OUT [--tokenizer FILE] [--type TYPE] [--bits SEED:PARENT]\n"
            "                    [--vocabulary q8|q4|nested]\n"
            "                    [--pmpd-calibrate [--epsilon E] [--prompts N] [--output-length N]]\n"
            "                    [--kv-codebooks SUB:BITS] [--ctx N] [--no-shadow | --shadow-tensors N]\n"
            "                    [--threads N]\n"
            "                    [--budget-bits B | --budget-latency US [--palette LIST] [--palette-flat]\n"
            "                    [--palette-gaussian]] [--ldlq N[:LENGTH] [--ldlq-text FILE]]\n"
            "  --kv-codebooks SUB:BITS  add PQ KV-cache codebooks (SUB 2 or 4, BITS 1-8), trained on the\n"
            "                           converted model (the float one with --pmpd-calibrate)\n"
            "  --vocabulary q8|q4|nested  with --type anyprec: the token embedding and classifier in q8 (the\n"
            "                           default), q4 (half the classifier's bytes per token), or nested with\n"
            "                           the layers' widths where that reads fewer bytes than q8; q4 and nested\n"
            "                           cost quality, nested most below 4 bits (docs/pmpd.md).\n"
            "                           --nested-vocabulary: the same as --vocabulary nested\n"
            "  --pmpd-calibrate         with --type anyprec: quantize from the float model and add the static\n"
            "                           schedule and learned scheduler calibrated against it\n"
            "  --ctx N                  context of the sessions whose arena the summary gives\n"
            "  --threads N              with --type anyprec, q2cb or tcq: threads quantizing (default one\n"
            "                           per core; the output is the same for any count); with --budget-bits: threads\n"
            "                           of the sensitivity runs and of each format's error (default one per\n"
            "                           core; the plan is the same for any count)\n"
            "  --no-shadow              with --type w8a8: no shadow path for activation outliers (every\n"
            "                           input at its tensor's absmax scale), to measure what it buys\n"
            "  --shadow-tensors N       with --type w8a8: keep the shadow path only in the N tensors where it\n"
            "                           saves the most output error (estimated from the calibration ranges)\n"
            "  --budget-bits B          allocate a format per fusable group of each layer (q/k/v, output,\n"
            "                           gate/up, down) so the layers store at most B bits per weight, least\n"
            "                           predicted KL first (noise sensitivity x each format's error); the\n"
            "                           embedding and classifier stay q8, outside the budget\n"
            "  --budget-latency US      the same under a time budget: the layer matrices' products for one\n"
            "                           decoded token take at most US microseconds on one thread, each format\n"
            "                           timed on this machine while converting\n"
            "  --palette LIST           with --budget-bits: the candidate formats, comma-separated, among\n"
            "                           f32 f16 q8 q4 q2cb nuq2 nuq3 nuq4 vq2 vq2.5 vq3 vq3.5 vq4\n"
            "                           tcq1.5 tcq1.75 ... tcq4 (default q8,q4,q2cb)\n"
            "  --palette-flat           with --budget-bits: no sensitivity run, each group weighs by its share of\n"
            "                           the weights (least mean error), to measure what sensitivities buy\n"
            "  --palette-gaussian       with --budget-bits: the nuq, vq and tcq entries' errors from Gaussian\n"
            "                           rows of each matrix width, one encoding per entry and width instead of\n"
            "                           every group in every entry (pycode21M over 8 TCQ widths: 3 minutes\n"
            "                           instead of 25)\n");
    fprintf(stderr,
            "  --ldlq N[:LENGTH]        with nuq, vq, tcq or a budget: data-aware rounding (LDLQ) against each\n"
            "                           layer input's second moment over N sequences of LENGTH tokens (default\n"
            "                           128) the float model writes itself; a budget then weighs every format's\n"
            "                           error by those moments (not with --palette-gaussian)\n"
            "  --ldlq-text FILE         with --ldlq: the N sequences cut from FILE's tokens instead (enough of\n"
            "                           it: on pycode21M 64 x 128 tokens of code did worse than self-written)\n"
            "  --type keep-closest      each GGUF matrix in the type nearest its own (F32 f32, F16 f16, BF16 f32,\n"
            "                           Q8_0 Q6_K Q5_K Q5_0 Q5_1 q8, Q4_0 Q4_1 Q4_K IQ4_NL IQ4_XS q4)\n"
            "  --type TYPE              weight format (default f32):");
    /* The library's table of weight formats says which types exist. */
    for (type = 0; type < 64; type++)
        if (pmpd_tensor_type_name((pmpd_tensor_type)type))
            fprintf(stderr, " %s", pmpd_tensor_type_name((pmpd_tensor_type)type));
    fprintf(stderr, " (nuq as nuq2, nuq3 or nuq4, vq as vq2, vq2.5, vq3, vq3.5 or vq4 and tcq as tcq1.5, tcq1.75, ..., "
                    "tcq4: bits per weight)\n");
    return 2;
}

/* A format whose name carries its width: nuq2..nuq4 (bits), vq2, vq2.5,
 * ..., vq4 and tcq1.5..tcq4 in steps of 0.25 (quarter bits: vq2.5 is 10,
 * tcq2.75 is 11).  0 for any other name. */
static int convert_parse_width(const char *name, pmpd_tensor_type *type, unsigned *width)
{
    static const char *const vq_names[5] = {"vq2", "vq2.5", "vq3", "vq3.5", "vq4"};
    char *end;
    double bits;
    unsigned i;
    if (!strncmp(name, "nuq", 3) && name[3] >= '2' && name[3] <= '4' && !name[4]) {
        *type = PMPD_TENSOR_NUQ;
        *width = (unsigned)(name[3] - '0');
        return 1;
    }
    for (i = 0; i < 5; i++)
        if (!strcmp(name, vq_names[i])) {
            *type = PMPD_TENSOR_VQ2;
            *width = 8 + 2 * i;
            return 1;
        }
    if (strncmp(name, "tcq", 3) != 0 || !(name[3] >= '0' && name[3] <= '9'))
        return 0;
    bits = strtod(name + 3, &end);
    if (*end || !(bits >= 1.5 && bits <= 4.0) || 4.0 * bits != (double)(unsigned)(4.0 * bits))
        return 0;
    *type = PMPD_TENSOR_TCQ;
    *width = (unsigned)(4.0 * bits);
    return 1;
}

/* "q8,q4,q2cb" into a->palette. */
static int convert_parse_palette(const char *list, convert_args *a)
{
    char name[16];
    a->convert.n_palette = 0;
    while (*list) {
        size_t n = strcspn(list, ",");
        pmpd_tensor_type *type = &a->palette[a->convert.n_palette];
        if (n == 0 || n >= sizeof name || a->convert.n_palette == PMPD_PALETTE_MAX_FORMATS)
            return 0;
        memcpy(name, list, n);
        name[n] = '\0';
        a->palette_bits[a->convert.n_palette] = 0;
        if (!convert_parse_width(name, type, &a->palette_bits[a->convert.n_palette]) &&
            (pmpd_tensor_type_from_name(name, type) != PMPD_OK || *type == PMPD_TENSOR_NUQ ||
             *type == PMPD_TENSOR_VQ2 || *type == PMPD_TENSOR_TCQ))
            return 0; /* plain "nuq", "vq" or "tcq": say the width */
        a->convert.n_palette++;
        list += n + (list[n] == ',');
    }
    a->convert.palette = a->palette;
    a->convert.palette_bits = a->palette_bits;
    return a->convert.n_palette > 0;
}

static int convert_parse(int argc, char **argv, convert_args *a)
{
    unsigned width;
    int i;
    memset(a, 0, sizeof *a);
    a->convert.type = PMPD_TENSOR_F32;
    pmpd_schedule_calibration_options_init(&a->schedule);
    for (i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1;
        if (o[0] != '-' || o[1] == '\0') {
            if (!a->in)
                a->in = o;
            else if (!a->out)
                a->out = o;
            else
                return 0;
            continue;
        }
        if (!strcmp(o, "--no-shadow")) {
            a->convert.w8a8_no_shadow = 1;
            continue;
        }
        if (!strcmp(o, "--palette-flat")) {
            a->convert.palette_flat = 1;
            continue;
        }
        if (!strcmp(o, "--palette-gaussian")) {
            a->convert.palette_gaussian = 1;
            continue;
        }
        if (!strcmp(o, "--nested-vocabulary")) {
            a->convert.anyprec_vocabulary = PMPD_TENSOR_ANYPREC;
            continue;
        }
        if (!strcmp(o, "--pmpd-calibrate")) {
            a->calibrate = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "pmpd-convert: %s needs a value (or is unknown)\n", o);
            return 0;
        }
        i++;
        if (!strcmp(o, "--tokenizer")) a->convert.tokenizer_path = v;
        else if (!strcmp(o, "--type") && !strcmp(v, "keep-closest")) a->convert.keep_closest = 1;
        else if (!strcmp(o, "--type") && convert_parse_width(v, &a->convert.type, &width)) {
            /* One type per family, its width in the tensor header: nuq2..4,
             * vq2..4, tcq1.5..4 (plain nuq: 4 bits, plain vq and tcq: 2). */
            a->convert.nuq_bits = a->convert.type == PMPD_TENSOR_NUQ ? width : 0;
            a->convert.vq_quarter_bits = a->convert.type == PMPD_TENSOR_VQ2 ? width : 0;
            a->convert.tcq_quarter_bits = a->convert.type == PMPD_TENSOR_TCQ ? width : 0;
        } else if (!strcmp(o, "--type")) ok = pmpd_tensor_type_from_name(v, &a->convert.type) == PMPD_OK;
        else if (!strcmp(o, "--bits"))
            ok = sscanf(v, "%u:%u", &a->convert.anyprec_seed_bits, &a->convert.anyprec_parent_bits) == 2;
        else if (!strcmp(o, "--epsilon")) ok = sscanf(v, "%lf", &a->schedule.epsilon) == 1;
        else if (!strcmp(o, "--prompts")) ok = sscanf(v, "%u", &a->schedule.sets.n_prompts) == 1;
        else if (!strcmp(o, "--output-length")) ok = sscanf(v, "%u", &a->schedule.sets.output_length) == 1;
        else if (!strcmp(o, "--budget-latency"))
            ok = sscanf(v, "%lf", &a->convert.budget_latency_us) == 1 && a->convert.budget_latency_us > 0.0 &&
                 a->convert.budget_latency_us <= 1e9;
        else if (!strcmp(o, "--budget-bits"))
            ok = sscanf(v, "%lf", &a->convert.budget_bits) == 1 && a->convert.budget_bits > 0.0 &&
                 a->convert.budget_bits <= 64.0;
        else if (!strcmp(o, "--palette")) ok = convert_parse_palette(v, a);
        else if (!strcmp(o, "--ldlq-text")) a->convert.ldlq_text_path = v;
        else if (!strcmp(o, "--ldlq")) {
            int fields = sscanf(v, "%u:%u", &a->convert.ldlq_sequences, &a->convert.ldlq_length);
            ok = fields >= 1 && a->convert.ldlq_sequences > 0 && a->convert.ldlq_sequences <= 65536 &&
                 (fields == 1 || a->convert.ldlq_length >= 2);
        }
        else if (!strcmp(o, "--vocabulary"))
            ok = (a->convert.anyprec_vocabulary = !strcmp(v, "q8")       ? PMPD_TENSOR_Q8
                                                  : !strcmp(v, "q4")     ? PMPD_TENSOR_Q4
                                                  : !strcmp(v, "nested") ? PMPD_TENSOR_ANYPREC
                                                                         : PMPD_TENSOR_F32) != PMPD_TENSOR_F32;
        else if (!strcmp(o, "--threads")) ok = sscanf(v, "%u", &a->convert.threads) == 1 && a->convert.threads > 0;
        else if (!strcmp(o, "--shadow-tensors"))
            ok = sscanf(v, "%u", &a->convert.w8a8_shadow_tensors) == 1 && a->convert.w8a8_shadow_tensors > 0;
        else if (!strcmp(o, "--ctx")) ok = sscanf(v, "%lu", &a->ctx) == 1 && a->ctx > 0;
        else if (!strcmp(o, "--kv-codebooks"))
            ok = (a->kv = sscanf(v, "%u:%u", &a->kv_sub, &a->kv_bits) == 2) && (a->kv_sub == 2 || a->kv_sub == 4) &&
                 a->kv_bits >= 1 && a->kv_bits <= 8;
        else {
            fprintf(stderr, "pmpd-convert: unknown option %s\n", o);
            return 0;
        }
        if (!ok) {
            fprintf(stderr, "pmpd-convert: %s %s: %s\n", o, v,
                    !strcmp(o, "--kv-codebooks") ? "SUB must be 2 or 4 and BITS 1 to 8"
                    : !strcmp(o, "--type")       ? "not one of f32, f16, anyprec, q8, q4, q2cb, w8a8, nuq2, nuq3, nuq4, vq2, vq2.5, vq3, vq3.5, vq4, tcq1.5 .. tcq4 in steps of 0.25, keep-closest"
                    : !strcmp(o, "--palette")    ? "not a comma-separated list of at most " CONVERT_STRING(PMPD_PALETTE_MAX_FORMATS) " formats (f32, f16, q8, q4, q2cb, nuq2-4, vq2-4 in half bits, tcq1.5 .. tcq4)"
                    : !strcmp(o, "--budget-bits") ? "not a number of bits per weight above 0"
                    : !strcmp(o, "--vocabulary")  ? "not one of q8, q4, nested"
                                                 : "not a valid value");
            return 0;
        }
    }
    return a->in && a->out;
}

/* "q4", "nuq3" for nuq at 3 bits, "vq2.5" for vq at 10 quarter bits,
 * "tcq2.75" for tcq at 11 quarter bits (a
 * static buffer: one use per call). */
static const char *convert_format_name(pmpd_tensor_type type, unsigned bits)
{
    static char name[16];
    if (type == PMPD_TENSOR_NUQ)
        snprintf(name, sizeof name, "nuq%u", bits % 10);
    else if (type == PMPD_TENSOR_VQ2)
        snprintf(name, sizeof name, "vq%g", bits % 100 / 4.0);
    else if (type == PMPD_TENSOR_TCQ)
        snprintf(name, sizeof name, "tcq%g", (bits % 64) / 4.0);
    else
        return pmpd_tensor_type_name(type);
    return name;
}

/* The bit allocation's report: one line per group, then the totals. */
static void convert_allocated(void *context, const pmpd_palette_report *r)
{
    uint32_t g, q;
    (void)context;
    if (r->latencies)
        printf("pmpd-convert: bit allocation, budget %.1f us per token for the layer matrices (one thread, timed\n"
               "  here: us = the chosen format's)\n", r->budget_latency_us);
    else
        printf("pmpd-convert: bit allocation, budget %.3f bits per weight = %llu bytes over %llu layer weights\n",
               r->budget_bits, (unsigned long long)r->budget_bytes, (unsigned long long)r->weights);
    printf("  (token embedding and classifier q8, outside the budget; sensitivity a = KL nats per unit of relative\n"
           "  error energy, fitted through the origin; err = %s / ||W||^2%s)\n",
           r->ldlq ? "tr(E H E^T) cols / tr(H)" : "||W - Q(W)||^2",
           r->gaussian_errors ? ", the nuq, vq and tcq entries' on Gaussian rows of the matrices' widths"
           : r->ldlq          ? ", H each input's moment, the nuq, vq and tcq entries rounded by LDLQ"
                              : "");
    printf("  layer group        format  a          fit R2  slope ratio  err        bytes     %s err of",
           r->latencies ? "    us" : "");
    for (q = 0; q < r->n_palette; q++)
        printf(" %s", convert_format_name(r->palette[q], r->palette_bits[q]));
    printf("\n");
    for (g = 0; g < r->n_groups; g++) {
        const pmpd_palette_group_report *x = &r->groups[g];
        printf("  %5u %-12s %-6s  %.3e  %.4f  %11.3f  %.3e  %9llu ", (unsigned)x->layer, x->group,
               convert_format_name(x->type, x->bits), x->sensitivity, x->fit_r2, x->fit_ratio, x->error,
               (unsigned long long)x->bytes);
        if (r->latencies)
            printf("%7.1f", (double)x->latency_ns / 1000.0);
        for (q = 0; q < r->n_palette; q++)
            printf(" %.2e", r->errors[(size_t)g * r->n_palette + q]);
        printf("\n");
    }
    if (r->latencies)
        printf("  reached %.1f of %.1f us per token, %.4f bits per weight (%llu bytes); predicted KL increase\n"
               "  %.5f nats per token; DP over %llu-ns cost units (%s)\n",
               r->latency_us, r->budget_latency_us, r->bits, (unsigned long long)r->bytes, r->predicted_kl,
               (unsigned long long)r->cost_unit, r->exact ? "exact" : "coarsened: optimal for costs rounded up");
    else
        printf("  reached %.4f bits per weight (%llu of %llu bytes); predicted KL increase %.5f nats per token;\n"
               "  DP over %llu-byte cost units (%s)\n",
               r->bits, (unsigned long long)r->bytes, (unsigned long long)r->budget_bytes, r->predicted_kl,
               (unsigned long long)r->cost_unit, r->exact ? "exact" : "coarsened: optimal for costs rounded up");
    fflush(stdout);
}

/* Per tensor type the count and bytes; the sections and what made them;
 * the arena a session needs per KV-cache mode. */
static int convert_summary(const convert_args *a, const char *kv_on, const char *schedule_on)
{
    static const char *const kv_names[] = {"f32", "f16", "pq", "int8", "int4"};
    static const char *const section_names[] = {"?", "tokenizer", "precision schedule", "learned scheduler",
                                                "KV codebooks", "outlier calibration", "quantizer"};
    unsigned count[CONVERT_SUMMARY_TYPES] = {0}, kv;
    uint64_t bytes[CONVERT_SUMMARY_TYPES] = {0};
    void *block = malloc(CONVERT_SUMMARY_ARENA_BYTES);
    pmpd_arena arena;
    pmpd_model *m = NULL;
    pmpd_session_config config;
    pmpd_error err;
    uint32_t i, has_codebooks = 0;
    size_t tables;
    if (!block)
        return 1;
    pmpd_arena_init(&arena, block, CONVERT_SUMMARY_ARENA_BYTES);
    if (pmpd_model_open_file(a->out, &arena, &m, &err) != PMPD_OK) {
        fprintf(stderr, "pmpd-convert: %s: cannot reopen for the summary: %s\n", a->out, err.message);
        free(block);
        return 1;
    }
    tables = arena.used;
    printf("%s: %llu bytes, %u tensors, context %u\n", a->out, (unsigned long long)m->byte_count,
           (unsigned)m->n_tensors, (unsigned)m->info.seq_len);
    for (i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].type < CONVERT_SUMMARY_TYPES) {
            count[m->tensors[i].type]++;
            bytes[m->tensors[i].type] += m->tensors[i].size;
        }
    for (i = 0; i < CONVERT_SUMMARY_TYPES; i++)
        if (count[i])
            printf("  tensors %-8s %3u  %10llu bytes\n", pmpd_tensor_type_name((pmpd_tensor_type)i), count[i], (unsigned long long)bytes[i]);
    /* keep-closest: what each tensor was and what it became */
    for (i = 0; a->convert.keep_closest && i < m->n_tensors && i < a->view.n_sources; i++)
        printf("  keep-closest %-32.*s %-7s -> %s\n", (int)m->tensors[i].name_length, m->tensors[i].name,
               a->view.sources[i] ? a->view.sources[i] : "?", pmpd_tensor_type_name((pmpd_tensor_type)m->tensors[i].type));
    for (i = 0; i < m->n_sections; i++) {
        const pmpd_section *s = &m->sections[i];
        const char *on = s->kind == PMPD_SECTION_KV_CODEBOOKS ? kv_on
                         : s->kind == PMPD_SECTION_PRECISION_SCHEDULE || s->kind == PMPD_SECTION_LEARNED_SCHEDULER
                             ? schedule_on
                             : NULL;
        has_codebooks |= s->kind == PMPD_SECTION_KV_CODEBOOKS;
        printf("  section  %-19s %8llu bytes%s%s\n", s->kind < 7 ? section_names[s->kind] : "unknown",
               (unsigned long long)s->size, on ? ", calibrated on " : "", on ? on : "");
    }
    pmpd_session_config_init(&config);
    config.context_length = a->ctx ? (uint32_t)a->ctx : m->info.seq_len;
    printf("  arena: model tables %zu bytes; a session of %u positions (default batch, 1 thread):", tables,
           (unsigned)config.context_length);
    for (kv = 0; kv < 5; kv++) {
        size_t need;
        config.kv_type = kv;
        if (kv == PMPD_KV_PQ && !has_codebooks)
            continue;
        if (pmpd_session_plan(m, &config, &need) == PMPD_OK)
            printf(" %s KV %zu", kv_names[kv], need);
        else
            printf(" %s KV: context too long", kv_names[kv]);
    }
    printf("\n");
    pmpd_model_close(m);
    free(block);
    return 0;
}

/* "<out>.<n>.step": where step n leaves its container for the next. */
static char *convert_temp(const char *out, int n)
{
    size_t size = strlen(out) + 16;
    char *path = (char *)malloc(size);
    if (path)
        snprintf(path, size, "%s.%d.step", out, n);
    return path;
}

static int convert_fail(const char *input, const char *step, pmpd_status st, const pmpd_error *err)
{
    if (err->offset != PMPD_NO_OFFSET)
        fprintf(stderr, "pmpd-convert: %s: %s: %s at byte offset %llu: %s\n", input, step, pmpd_strerror(st),
                (unsigned long long)err->offset, err->message);
    else
        fprintf(stderr, "pmpd-convert: %s: %s: %s%s%s\n", input, step, pmpd_strerror(st), err->message[0] ? ": " : "",
                err->message);
    return 1;
}

int main(int argc, char **argv)
{
    int allocating;
    convert_args a;
    pmpd_convert_summary summary;
    pmpd_pq_calibration_options pq;
    pmpd_error err;
    pmpd_status st;
    char *temp[2] = {NULL, NULL};
    const char *current, *kv_on = NULL, *schedule_on = NULL;
    int steps, rc = 0;
    if (!convert_parse(argc, argv, &a))
        return usage();
    if (a.calibrate && a.convert.type != PMPD_TENSOR_ANYPREC) {
        fprintf(stderr, "pmpd-convert: --pmpd-calibrate makes nested weights: give --type anyprec\n");
        return 2;
    }
    a.view.label = "converting";
    a.view.tty = isatty(fileno(stderr));
    a.convert.progress_context = &a.view;
    a.convert.tensor_written = convert_tensor_written;
    a.convert.allocated = convert_allocated;
    allocating = a.convert.budget_bits > 0.0 || a.convert.budget_latency_us > 0.0;
    if (a.convert.budget_bits > 0.0 && a.convert.budget_latency_us > 0.0) {
        fprintf(stderr, "pmpd-convert: --budget-bits and --budget-latency: one budget at a time\n");
        return 2;
    }
    if (a.convert.anyprec_vocabulary && (a.convert.type != PMPD_TENSOR_ANYPREC || a.calibrate || allocating)) {
        fprintf(stderr, "pmpd-convert: --vocabulary and --nested-vocabulary set the embedding and classifier of "
                        "--type anyprec: not with other types, --pmpd-calibrate or a budget\n");
        return 2;
    }
    if (allocating && (a.calibrate || a.convert.keep_closest)) {
        fprintf(stderr, "pmpd-convert: --budget-bits and --budget-latency choose the formats: not with --pmpd-calibrate "
                        "or keep-closest\n");
        return 2;
    }
    if ((a.convert.palette || a.convert.palette_flat || a.convert.palette_gaussian) && !allocating) {
        fprintf(stderr, "pmpd-convert: --palette, --palette-flat and --palette-gaussian go with --budget-bits or "
                        "--budget-latency\n");
        return 2;
    }
    if (a.convert.ldlq_sequences && a.convert.palette_gaussian) {
        fprintf(stderr, "pmpd-convert: --palette-gaussian estimates data-free errors: with --ldlq every error is "
                        "measured\n");
        return 2;
    }
    if (a.convert.ldlq_sequences && !allocating && a.convert.type != PMPD_TENSOR_NUQ &&
        a.convert.type != PMPD_TENSOR_VQ2 && a.convert.type != PMPD_TENSOR_TCQ) {
        fprintf(stderr, "pmpd-convert: --ldlq rounds nuq, vq and tcq: it goes with those types or a budget\n");
        return 2;
    }
    if (a.convert.ldlq_text_path && !a.convert.ldlq_sequences) {
        fprintf(stderr, "pmpd-convert: --ldlq-text goes with --ldlq N\n");
        return 2;
    }
    if (a.convert.ldlq_sequences)
        fprintf(stderr, "pmpd-convert: LDLQ: each layer input's second moment over %u sequences of %u tokens %s%s\n",
                a.convert.ldlq_sequences, a.convert.ldlq_length ? a.convert.ldlq_length : 128u,
                a.convert.ldlq_text_path ? "of " : "the model writes itself",
                a.convert.ldlq_text_path ? a.convert.ldlq_text_path : "");
    if (allocating)
        fprintf(stderr, "pmpd-convert: bit allocation: %s%s, then each format's error\n",
                a.convert.budget_latency_us > 0.0 ? "each format's time on this machine, " : "",
                a.convert.palette_flat ? "each group weighed by its share of the weights (no sensitivity run)"
                                       : "noise sensitivity of every group");
    if (a.view.tty) {
        a.convert.progress = a.schedule.progress = convert_progress;
        a.schedule.step = convert_step;
    }
    if (allocating) {
        /* The allocation's phases take minutes to an hour on a 1B model:
         * their progress goes to a log too. */
        a.convert.progress = convert_progress;
        a.view.phases[0] = a.convert.palette_flat ? "candidate errors (groups x formats)"
                                                  : "sensitivity runs (groups x noise energies)";
        a.view.phases[1] = a.convert.palette_flat ? NULL : "candidate errors (groups x formats)";
    }
    a.schedule.seed_bits = a.convert.anyprec_seed_bits;
    a.schedule.parent_bits = a.convert.anyprec_parent_bits;
    steps = 1 + a.kv + a.calibrate;
    temp[0] = steps > 1 ? convert_temp(a.out, 1) : NULL;
    temp[1] = steps > 2 ? convert_temp(a.out, 2) : NULL;
    if ((steps > 1 && !temp[0]) || (steps > 2 && !temp[1]))
        return 1;

    /* 1. convert (f32 when step 3 quantizes from the floats) */
    current = steps > 1 ? temp[0] : a.out;
    if (a.calibrate)
        a.convert.type = PMPD_TENSOR_F32;
    /* Reading and decoding the source reports no progress of its own
     * (about half a minute for a 2 GB GGUF read whole): say what is happening. */
    if (isatty(fileno(stderr)))
        fprintf(stderr, "pmpd-convert: reading %s\n", a.in);
    st = pmpd_convert_file(a.in, current, &a.convert, &summary, &err);
    if (st != PMPD_OK) {
        const char *name = summary.failed_input == PMPD_CONVERT_INPUT_TOKENIZER ? a.convert.tokenizer_path
                           : summary.failed_input == PMPD_CONVERT_INPUT_OUTPUT  ? current
                                                                                : a.in;
        rc = convert_fail(name, "convert", st, &err);
    }
    if (rc == 0)
        printf("pmpd-convert: %s%s -> %s: %u tensors, %llu bytes, %llu parameters (%s)\n",
               steps > 1 ? "step 1, convert: " : "", a.in, steps > 1 ? "temporary file" : a.out,
               (unsigned)summary.n_tensors, (unsigned long long)summary.bytes,
               (unsigned long long)summary.parameters,
               a.convert.keep_closest         ? "keep-closest"
               : allocating                   ? "allocated"
                                              : pmpd_tensor_type_name(a.convert.type));

    /* 2. KV codebooks, trained on what step 1 made */
    if (rc == 0 && a.kv) {
        const char *next = a.calibrate ? temp[1] : a.out;
        pmpd_pq_calibration_options_init(&pq);
        pq.key_sub_dim = pq.value_sub_dim = a.kv_sub;
        pq.bits = a.kv_bits;
        if (isatty(fileno(stderr)))
            fprintf(stderr, "pmpd-convert: training the KV codebooks (%u texts x %u tokens)\n",
                    (unsigned)pq.n_sequences, (unsigned)pq.sequence_length);
        st = pmpd_pq_calibrate_file(current, next, &pq, &err);
        if (st != PMPD_OK)
            rc = convert_fail(a.in, "KV codebooks", st, &err);
        kv_on = a.convert.type == PMPD_TENSOR_ANYPREC ? "the nested weights at their widest width"
                : !a.convert.keep_closest && (a.convert.type == PMPD_TENSOR_F32 || a.convert.type == PMPD_TENSOR_F16)
                    ? "the float model"
                    : "the quantized weights as stored";
        current = next;
    }

    /* 3. nested weights and schedules, calibrated against the floats */
    if (rc == 0 && a.calibrate) {
        pmpd_schedule_calibration_report report;
        st = pmpd_schedule_calibrate_file(current, a.out, &a.schedule, &report, &err);
        if (st != PMPD_OK)
            rc = convert_fail(a.in, "PMPD calibration", st, &err);
        else
            printf("pmpd-convert: schedules: static PMPD %.2f average decode bits (Rouge-L %.3f), learned PMPD %.2f "
                   "(Rouge-L %.3f); %u-bit: Rouge-L %.3f, on %u test prompts\n",
                   report.quality[report.n_rows - 2].average_decode_bits, report.quality[report.n_rows - 2].rouge_l,
                   report.quality[report.n_rows - 1].average_decode_bits, report.quality[report.n_rows - 1].rouge_l,
                   report.parent_bits, report.quality[0].rouge_l, report.test_prompts);
        schedule_on = "the float model";
    }
    if (temp[0])
        remove(temp[0]);
    if (temp[1])
        remove(temp[1]);
    free(temp[0]);
    free(temp[1]);
    if (rc == 0)
        rc = convert_summary(&a, kv_on, schedule_on);
    free((void *)a.view.sources);
    return rc;
}
