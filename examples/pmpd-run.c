/*
 * pmpd-run: generate text with a .pmpd model.
 *
 *   pmpd-run MODEL [-p PROMPT] [-n TOKENS] [-t TEMP] [-k TOPK] [--top-p P]
 *            [-s SEED] [--ctx N] [--kv f32|f16|pq|int8|int4] [--kv-window N] [--batch N]
 *            [--threads N] [--ids] [--prompt-file FILE] [--prompt-tokens N]
 *            [--trace FILE] [--trace-events N] [--in-flight N] [--float-threads N]
 *            [--worker-stack BYTES] [--no-mmap]
 *            [--ignore-eos] [--bits PREFILL:DECODE] [--schedule P:D1,D2,...]
 *            [--learned]
 *   pmpd-run MODEL --tokenize -p PROMPT
 *   pmpd-run --info MODEL [--ctx N]
 *   pmpd-run MODEL --chat [--system TEXT] [--template NAME] [sampling options]
 *
 * Streams the text as it is generated (or, with --ids, prints the whole id
 * sequence: BOS, prompt and generated ids), stops early when the model
 * emits BOS as llama2.c's run.c does, or EOS or end-of-turn (unless
 * --ignore-eos), then prints a summary line on stderr:
 * prompt tokens and prefill speed, generated tokens and decode speed, and
 * the arena bytes used of those planned, and the KV-cache bytes.  With nested any-precision weights
 * it also prints the precision in use: the prefill width, the tokens decoded
 * at each width and the average decode bits (the model's static schedule
 * applies unless --bits fixes the widths; --learned lets the model's learned
 * scheduler choose the decode widths after the prefill, and reports its cost
 * next to one decode step's).
 * --tokenize prints the prompt's ids (BOS as the model's metadata adds it)
 * one per line; --info describes the model (examples/common/model_info.c);
 * --chat talks with the model turn by turn (examples/common/chat_loop.c).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/common/chat.h"
#include "examples/common/chat_loop.h"
#include "examples/common/cli.h"
#include "examples/common/model_file.h"
#include "examples/common/model_info.h"
#include "examples/common/trace_json.h"
#include "examples/common/read_file.h"
#include "pmpd.h"
#include "platform/platform.h"

typedef struct run_options {
    const char *model_path;
    const char *prompt;
    long n_generate;
    float temperature;
    long top_k;
    float top_p;
    unsigned long long seed;
    long context;
    long batch;
    long threads;
    long in_flight;                     /* --in-flight: prompt chunks at once; 0 = the library's default */
    long float_threads;                 /* --float-threads: threads only on the float lane */
    long worker_stack;                  /* --worker-stack: bytes of each worker's stack; 0 = the system's */
    uint32_t kv_type;
    long kv_window;
    int print_ids;
    const char *prompt_file;            /* --prompt-file: the prompt read from a file */
    long prompt_tokens;                 /* --prompt-tokens: keep the first N (BOS included); 0 = all */
    int ignore_eos;                     /* --ignore-eos: generate exactly -n tokens */
    int no_mmap;                        /* --no-mmap: read the model file into memory */
    unsigned prefill_bits, decode_bits; /* --bits; 0 = the model's schedule */
    pmpd_precision_schedule schedule;   /* --schedule, when n_schedule_widths > 0 */
    unsigned n_schedule_widths;
    int learned;                        /* --learned */
    int tokenize_only;                  /* --tokenize: print the prompt's ids and stop */
    int info;                           /* --info: describe the model and stop */
    int chat;                           /* --chat: interactive conversation */
    const char *system;                 /* --system: the chat's system message */
    const char *chat_template;          /* --template: chat family name, instead of detection */
    const char *trace_path;             /* --trace: the schedule as Chrome trace JSON */
    long trace_events;                  /* --trace-events: room for this many (0 = the default) */
} run_options;

/* Trace events --trace keeps room for by default (48 bytes each, 12 MB):
 * a 512-token prefill and 64 decoded tokens of a 22-layer model at 16
 * threads, or 128 at 8. */
#define RUN_TRACE_EVENTS (1L << 18)

static void run_usage(FILE *out)
{
    fprintf(out,
            "usage: pmpd-run MODEL [options]\n"
            "  -p PROMPT      text to continue (default: none, start from BOS)\n"
            "  -n TOKENS      tokens to generate (default 256)\n"
            "  -t TEMP        temperature, 0 = greedy (default 1.0)\n"
            "  -k TOPK        keep the K most probable tokens (default 0 = all)\n"
            "  --top-p P      nucleus sampling threshold (default 0.9; 1 = off)\n"
            "  -s SEED        random seed (default 0)\n"
            "  --ctx N        context length (default: the model's)\n"
            "  --kv MODE      KV-cache storage: f32 (default), f16, pq (needs the\n"
            "                 model's KV codebooks), int8 or int4 (uniform baselines)\n"
            "  --kv-window N  pq: newest tokens kept in full precision (default head_dim)\n"
            "  --batch N      prompt tokens per prefill step (default 128)\n"
            "  --threads N    threads (default 1)\n"
            "  --in-flight N  prompt chunks (of --batch tokens) a prefill runs at once, out\n"
            "                 of order; 1 = in order (default 2 with several threads, 1 with\n"
            "                 one; at most 8)\n"
            "  --float-threads N  out-of-order prefill: N threads serve only the float lane\n"
            "                 (norms, attention, quantization), the rest only the matrix\n"
            "                 products (default 0: every thread serves both)\n"
            "  --worker-stack BYTES  each worker thread's stack (default 0: the system's\n"
            "                 default; PMPD_WORKER_STACK_BYTES = 131072 serves every format)\n"
            "  --no-mmap      read the whole model file into memory at start instead of\n"
            "                 mapping it (as llama.cpp's --no-mmap)\n"
            "  --ids          print the token ids instead of text\n"
            "  --prompt-file FILE  the prompt is the text of FILE\n"
            "  --prompt-tokens N   keep only the prompt's first N tokens (BOS included)\n"
            "  --ignore-eos   do not stop when the model emits BOS, EOS or end-of-turn:\n"
            "                 generate exactly -n tokens\n"
            "                 (for timing; prints the weight bytes read per decoded token)\n"
            "  --bits P:D     any-precision models: prefill and decode widths\n"
            "                 (default: the model's schedule, else the widest)\n"
            "  --schedule P:D1,D2,...  any-precision models: prefill at P bits, then\n"
            "                 decode at D1, D2, ... bits (decreasing), each for an equal\n"
            "                 share of the -n tokens (e.g. 4:4,3,2 = 4/3/2 at thirds)\n"
            "  --learned      any-precision models: the learned scheduler picks the decode widths\n"
            "  --tokenize     print the prompt's ids (BOS as the model adds it), one per line\n"
            "  --info         print the model's metadata, tensor types and the session arena\n"
            "                 for --ctx (default: the model's context) and stop\n"
            "  --chat         interactive chat: one user message per stdin line, /reset\n"
            "                 starts over, EOF ends; -n caps each reply (default 256)\n"
            "  --system TEXT  --chat: the system message\n"
            "  --template T   --chat: llama3, chatml, zephyr or llama2 (default: from the\n"
            "                 vocabulary's special tokens; SentencePiece models need it)\n"
            "  --trace FILE   write the prefill and decode schedule (every share of every\n"
            "                 job on every thread) as Chrome trace JSON, for chrome://tracing\n"
            "                 or ui.perfetto.dev\n"
            "  --trace-events N  room for N trace events, 48 bytes each (default 262144);\n"
            "                 events past it are counted, not kept\n");
}

static int run_parse_float(const char *text, float *out)
{
    char *end;
    double v;
    errno = 0;
    v = strtod(text, &end);
    if (errno || end == text || *end)
        return 0;
    *out = (float)v;
    return 1;
}

/* "P:D1,D2,..." into o->schedule; the switch steps are set once -n is
 * known (run_schedule_steps). */
static int run_parse_schedule(const char *text, run_options *o)
{
    pmpd_precision_schedule *s = &o->schedule;
    char *end;
    unsigned long v;
    memset(s, 0, sizeof *s);
    v = strtoul(text, &end, 10);
    if (end == text || *end != ':' || v < 1 || v > PMPD_ANYPREC_MAX_BITS)
        return 0;
    s->prefill_bits = (uint32_t)v;
    text = end;
    while (*text == ':' || *text == ',') {
        if (s->n_widths == PMPD_SCHEDULE_MAX_WIDTHS)
            return 0;
        v = strtoul(text + 1, &end, 10);
        if (end == text + 1 || v < 1 || v > PMPD_ANYPREC_MAX_BITS)
            return 0;
        s->decode_bits[s->n_widths++] = (uint32_t)v;
        text = end;
    }
    o->n_schedule_widths = s->n_widths;
    return *text == 0 && s->n_widths > 0;
}

/* Width i of the --schedule starts after i equal shares of the decode steps. */
static void run_schedule_steps(run_options *o)
{
    unsigned i;
    for (i = 0; i < o->n_schedule_widths; i++)
        o->schedule.from_step[i] = (uint32_t)((unsigned long)o->n_generate * i / o->n_schedule_widths);
}

static int run_parse(int argc, char **argv, run_options *o)
{
    int i;
    memset(o, 0, sizeof *o);
    o->n_generate = 256;
    o->temperature = 1.0f;
    o->top_p = 0.9f;
    o->kv_type = PMPD_KV_F32;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long seed;
        int ok = 1;
        if (!strcmp(a, "--ids")) {
            o->print_ids = 1;
            continue;
        }
        if (!strcmp(a, "--learned")) {
            o->learned = 1;
            continue;
        }
        if (!strcmp(a, "--ignore-eos")) {
            o->ignore_eos = 1;
            continue;
        }
        if (!strcmp(a, "--no-mmap")) {
            o->no_mmap = 1;
            continue;
        }
        if (!strcmp(a, "--tokenize") || !strcmp(a, "--info") || !strcmp(a, "--chat")) {
            *(a[2] == 't' ? &o->tokenize_only : a[2] == 'i' ? &o->info : &o->chat) = 1;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            run_usage(stdout);
            exit(0);
        }
        if (a[0] != '-') {
            if (o->model_path) {
                fprintf(stderr, "pmpd-run: more than one model given (%s)\n", a);
                return 0;
            }
            o->model_path = a;
            continue;
        }
        if (!v) {
            fprintf(stderr, "pmpd-run: %s needs a value\n", a);
            return 0;
        }
        i++;
        if (!strcmp(a, "-p")) o->prompt = v;
        else if (!strcmp(a, "--prompt-file")) o->prompt_file = v;
        else if (!strcmp(a, "--system")) o->system = v;
        else if (!strcmp(a, "--trace")) o->trace_path = v;
        else if (!strcmp(a, "--trace-events")) ok = example_parse_long(v, 1, &o->trace_events) && o->trace_events <= 1L << 26;
        else if (!strcmp(a, "--template")) ok = example_chat_family_from_name(o->chat_template = v) != EXAMPLE_CHAT_NONE;
        else if (!strcmp(a, "--prompt-tokens")) ok = example_parse_long(v, 1, &o->prompt_tokens);
        else if (!strcmp(a, "--schedule")) ok = run_parse_schedule(v, o);
        else if (!strcmp(a, "-n")) ok = example_parse_long(v, 0, &o->n_generate);
        else if (!strcmp(a, "-t")) ok = run_parse_float(v, &o->temperature) && o->temperature >= 0.0f;
        else if (!strcmp(a, "-k")) ok = example_parse_long(v, 0, &o->top_k);
        else if (!strcmp(a, "--top-p")) ok = run_parse_float(v, &o->top_p) && o->top_p >= 0.0f && o->top_p <= 1.0f;
        else if (!strcmp(a, "-s")) { ok = example_parse_long(v, 0, &seed); o->seed = (unsigned long long)seed; }
        else if (!strcmp(a, "--ctx")) ok = example_parse_long(v, 1, &o->context);
        else if (!strcmp(a, "--batch")) ok = example_parse_long(v, 1, &o->batch);
        else if (!strcmp(a, "--kv-window")) ok = example_parse_long(v, 1, &o->kv_window) && o->kv_window <= 1L << 20;
        else if (!strcmp(a, "--threads")) ok = example_parse_long(v, 1, &o->threads);
        else if (!strcmp(a, "--in-flight")) ok = example_parse_long(v, 1, &o->in_flight) && o->in_flight <= 8;
        else if (!strcmp(a, "--float-threads")) ok = example_parse_long(v, 0, &o->float_threads);
        else if (!strcmp(a, "--worker-stack")) ok = example_parse_long(v, 0, &o->worker_stack) && o->worker_stack <= 0x7FFFFFFFL;
        else if (!strcmp(a, "--bits")) ok = example_parse_bits(v, &o->prefill_bits, &o->decode_bits);
        else if (!strcmp(a, "--kv")) ok = example_parse_kv(v, &o->kv_type);
        else {
            fprintf(stderr, "pmpd-run: unknown option %s\n", a);
            return 0;
        }
        if (!ok) {
            fprintf(stderr, "pmpd-run: bad value for %s: %s\n", a, v);
            return 0;
        }
    }
    if (!o->model_path) {
        run_usage(stderr);
        return 0;
    }
    return 1;
}

/* Prints a piece as run.c does: raw bytes that are neither printable nor
 * whitespace are skipped. */
static void run_print_piece(const char *piece, size_t length)
{
    if (length == 1 && !isprint((unsigned char)piece[0]) && !isspace((unsigned char)piece[0]))
        return;
    fwrite(piece, 1, length, stdout);
    fflush(stdout);
}

static int run_fail(const char *what, pmpd_status st)
{
    fprintf(stderr, "pmpd-run: %s: %s\n", what, pmpd_strerror(st));
    return 1;
}

/* Tokens decoded at each width, for the precision summary. */
typedef struct run_precision {
    unsigned parent_bits; /* 0: the model has no nested weights */
    unsigned prefill_bits;
    double learned_seconds;   /* the learned scheduler's decision, when used */
    size_t learned_bytes;     /* its working memory */
    size_t at_width[PMPD_ANYPREC_MAX_BITS + 1];
} run_precision;

static pmpd_status run_precision_start(const run_options *o, const pmpd_model *model, pmpd_session *session,
                                       run_precision *p)
{
    memset(p, 0, sizeof *p);
    return example_precision_apply(model, session, o->prefill_bits, o->decode_bits,
                                   o->n_schedule_widths ? &o->schedule : NULL, &p->parent_bits, &p->prefill_bits);
}

static void run_precision_count(run_precision *p, const pmpd_session *session)
{
    unsigned bits = pmpd_session_decode_bits(session);
    if (p->parent_bits)
        p->at_width[bits && bits < p->parent_bits ? bits : p->parent_bits]++;
}

static void run_precision_report(const run_precision *p)
{
    size_t total = 0, weighted = 0;
    unsigned k;
    if (!p->parent_bits)
        return;
    fprintf(stderr, "precision: prefill %u bits; decode", p->prefill_bits);
    for (k = PMPD_ANYPREC_MAX_BITS; k >= 1; k--)
        if (p->at_width[k]) {
            fprintf(stderr, " %zu tokens at %u bits", p->at_width[k], k);
            total += p->at_width[k];
            weighted += k * p->at_width[k];
        }
    fprintf(stderr, "; average decode %.2f bits\n", total ? (double)weighted / (double)total : 0.0);
    if (p->learned_bytes)
        fprintf(stderr, "learned scheduler: %.1f us and %zu arena bytes per prompt\n", p->learned_seconds * 1e6,
                p->learned_bytes);
}

/* Weight bytes per decoded token (averaged over the widths used) and the
 * rate the weights were read at: the figure to hold against a bandwidth. */
static void run_weight_report(const pmpd_model *model, const run_precision *p, size_t decoded, double seconds)
{
    double bytes = 0.0;
    size_t counted = 0;
    uint64_t b;
    unsigned k;
    if (!p->parent_bits) {
        if (pmpd_model_weight_bytes_per_token(model, 0, &b) == PMPD_OK)
            bytes = (double)b, counted = 1;
    } else {
        for (k = 1; k <= PMPD_ANYPREC_MAX_BITS; k++)
            if (p->at_width[k] && pmpd_model_weight_bytes_per_token(model, k, &b) == PMPD_OK) {
                bytes += (double)b * (double)p->at_width[k];
                counted += p->at_width[k];
            }
    }
    if (!counted || seconds <= 0.0)
        return;
    bytes /= (double)counted;
    fprintf(stderr, "weights: %.0f bytes read per decoded token, %.2f GB/s\n", bytes,
            bytes * (double)decoded / seconds * 1e-9);
}

/* A session and sampler in one malloc'ed arena, as planned, its pages
 * touched before the first step (example_arena_block). */
typedef struct run_engine {
    pmpd_session *session;
    pmpd_sampler sampler;
    pmpd_arena arena;
    void *block;
    size_t planned;
} run_engine;

static void run_engine_close(run_engine *e)
{
    pmpd_session_destroy(e->session);
    free(e->block);
    e->session = NULL;
    e->block = NULL;
}

/* Returns 0 when the session is ready, else the exit status (reported). */
static int run_engine_open(const run_options *o, const pmpd_model *model, run_engine *e)
{
    const pmpd_model_info *info = pmpd_model_get_info(model);
    pmpd_session_config config;
    pmpd_sampler_config sampling;
    size_t session_bytes, sampler_bytes;
    pmpd_status st;

    memset(e, 0, sizeof *e);
    pmpd_session_config_init(&config);
    config.context_length = (uint32_t)o->context;
    config.prefill_batch = (uint32_t)o->batch;
    config.n_threads = (uint32_t)o->threads;
    config.prefill_in_flight = (uint32_t)o->in_flight;
    config.float_threads = (uint32_t)o->float_threads;
    config.worker_stack_bytes = (uint32_t)o->worker_stack;
    config.kv_type = o->kv_type;
    config.kv_window = (uint32_t)o->kv_window;
    config.trace_events = o->trace_path ? (uint32_t)(o->trace_events ? o->trace_events : RUN_TRACE_EVENTS) : 0;
    sampling.temperature = o->temperature;
    sampling.top_k = (uint32_t)o->top_k;
    sampling.top_p = o->top_p;
    if (o->context > (long)info->seq_len) {
        fprintf(stderr, "pmpd-run: --ctx %ld is longer than the model's context of %u tokens\n", o->context,
                (unsigned)info->seq_len);
        return 1;
    }
    if (o->threads > (long)pmpd_max_threads()) {
        fprintf(stderr, "pmpd-run: --threads %ld: this build takes at most %u (PMPD_MAX_THREADS)\n", o->threads,
                pmpd_max_threads());
        return 1;
    }
    if (o->float_threads > 0 && o->float_threads >= (o->threads > 0 ? o->threads : 1)) {
        fprintf(stderr, "pmpd-run: --float-threads %ld: must leave at least one of the %ld threads to the int8 lane\n",
                o->float_threads, o->threads > 0 ? o->threads : 1L);
        return 1;
    }
    if ((st = pmpd_session_plan(model, &config, &session_bytes)) != PMPD_OK)
        return run_fail("session configuration", st);
    if ((st = pmpd_sampler_plan(info->vocab_size, &sampler_bytes)) != PMPD_OK)
        return run_fail("sampler", st);
    e->planned = session_bytes + sampler_bytes;
    e->block = example_arena_block(e->planned);
    if (!e->block)
        return run_fail("arena", PMPD_ERR_OUT_OF_MEMORY);
    pmpd_arena_init(&e->arena, example_aligned(e->block), e->planned);
    if ((st = pmpd_session_create(model, &config, &e->arena, &e->session)) != PMPD_OK ||
        (st = pmpd_sampler_init(&e->sampler, &sampling, info->vocab_size, &e->arena)) != PMPD_OK) {
        run_engine_close(e);
        if (st == PMPD_ERR_THREAD && config.worker_stack_bytes)
            fprintf(stderr, "pmpd-run: --worker-stack %u: the system refused the workers' stack size "
                            "(below its PTHREAD_STACK_MIN?)\n", (unsigned)config.worker_stack_bytes);
        return run_fail("session", st);
    }
    return 0;
}

/* 1 when generation stops at token: BOS as llama2.c's run.c stops, and the
 * end of the text or of a turn as the tokenizer names them. */
static int run_is_stop(const pmpd_model *model, int32_t token)
{
    pmpd_tokenizer_info t;
    const pmpd_model_info *info = pmpd_model_get_info(model);
    if (token == (int32_t)info->bos_id)
        return 1;
    if (pmpd_model_get_tokenizer_info(model, &t) != PMPD_OK || !t.kind)
        return token == (int32_t)info->eos_id;
    return token == (int32_t)t.eos_id || token == t.eot_id;
}

static void run_print_token(const pmpd_model *model, int32_t prev, int32_t token)
{
    const char *piece;
    size_t length;
    if (pmpd_token_is_control(model, token))
        return;
    if (pmpd_token_to_piece(model, prev, token, &piece, &length) == PMPD_OK)
        run_print_piece(piece, length);
}

static int run_generate(const run_options *o, const pmpd_model *model, int32_t *ids, size_t n_prompt)
{
    const pmpd_model_info *info = pmpd_model_get_info(model);
    run_engine engine;
    pmpd_session *session;
    pmpd_rng rng;
    size_t n = n_prompt, i, planned;
    const float *logits = NULL;
    uint64_t t0, t1, t2;
    pmpd_status st;
    run_precision precision;
    int rc = run_engine_open(o, model, &engine);

    if (rc)
        return rc;
    session = engine.session;
    planned = engine.planned;
    pmpd_rng_seed(&rng, o->seed);
    if ((st = run_precision_start(o, model, session, &precision)) != PMPD_OK) {
        run_engine_close(&engine);
        return run_fail("precision schedule", st);
    }

    t0 = pmpd_platform_now_ns();
    st = pmpd_session_prefill(session, ids, n_prompt, &logits);
    t1 = pmpd_platform_now_ns();
    if (st == PMPD_OK && o->learned && precision.parent_bits) {
        /* Working memory for the decision, as firmware would give it. */
        static unsigned char scratch_memory[(size_t)1 << 20];
        pmpd_arena scratch;
        pmpd_arena_init(&scratch, scratch_memory, sizeof scratch_memory);
        st = pmpd_session_apply_learned_scheduler(session, NULL, 0, &scratch);
        precision.learned_seconds = (double)(pmpd_platform_now_ns() - t1) * 1e-9;
        precision.learned_bytes = scratch.high_water;
        t1 = pmpd_platform_now_ns();
    }
    if (st != PMPD_OK) {
        run_engine_close(&engine);
        if (st == PMPD_ERR_CONTEXT_FULL) {
            fprintf(stderr, "pmpd-run: the prompt has %zu tokens but the context holds %ld (see --ctx)\n",
                    n_prompt, o->context ? o->context : (long)info->seq_len);
            return 1;
        }
        return run_fail("prompt", st);
    }
    if (!o->print_ids) /* BOS and other control tokens print nothing */
        for (i = 0; i < n_prompt; i++)
            run_print_token(model, i ? ids[i - 1] : -1, ids[i]);
    while (n < n_prompt + (size_t)o->n_generate) {
        int32_t next;
        pmpd_sampler_sample(&engine.sampler, logits, &rng, &next);
        if (!o->ignore_eos && run_is_stop(model, next))
            break;
        ids[n++] = next;
        if (!o->print_ids)
            run_print_token(model, n >= 2 ? ids[n - 2] : -1, next);
        if (n == n_prompt + (size_t)o->n_generate)
            break;
        run_precision_count(&precision, session);
        st = pmpd_session_decode(session, next, &logits);
        if (st == PMPD_ERR_CONTEXT_FULL)
            break;
        if (st != PMPD_OK) {
            run_engine_close(&engine);
            return run_fail("decode", st);
        }
    }
    t2 = pmpd_platform_now_ns();
    if (o->print_ids)
        for (i = 0; i < n; i++)
            printf("%s%d", i ? " " : "", (int)ids[i]);
    printf("\n");
    fflush(stdout);
    {
        /* The decode clock covers the steps after the prompt; the first
         * generated token comes from the prefill logits. */
        double prefill_s = (double)(t1 - t0) * 1e-9, decode_s = (double)(t2 - t1) * 1e-9;
        size_t generated = n - n_prompt, decoded = pmpd_session_position(session) - n_prompt, kv_bytes;
        fprintf(stderr,
                "prompt %zu tokens, prefill %.1f tokens/s; generated %zu tokens, decode %.1f tokens/s; "
                "arena %zu of %zu bytes planned\n",
                n_prompt, prefill_s > 0 ? (double)n_prompt / prefill_s : 0.0, generated,
                decode_s > 0 ? (double)decoded / decode_s : 0.0, engine.arena.high_water, planned);
        run_precision_report(&precision);
        if (o->ignore_eos)
            run_weight_report(model, &precision, decoded, decode_s);
        if (pmpd_session_kv_bytes(session, &kv_bytes) == PMPD_OK)
            fprintf(stderr, "KV cache: %zu bytes for %zu positions\n", kv_bytes, pmpd_session_position(session));
    }
    rc = o->trace_path ? example_trace_write(session, o->threads > 0 ? (unsigned)o->threads : 1, o->trace_path) : 0;
    run_engine_close(&engine);
    return rc;
}

/* --chat: the conversation loop on stdin and stdout. */
static int run_chat(const run_options *o, const pmpd_model *model, pmpd_arena *scratch)
{
    example_chat_config c;
    example_chat_stats stats;
    run_engine engine;
    pmpd_rng rng;
    pmpd_status st;
    int rc;

    memset(&c, 0, sizeof c);
    const char *source = "--template";
    c.family = o->chat_template ? example_chat_family_from_name(o->chat_template)
                                : example_chat_detect_model(model, scratch, &source);
    if (c.family == EXAMPLE_CHAT_NONE) {
        fprintf(stderr, "pmpd-run: --chat: neither the model's chat template nor its special tokens name a "
                        "format this tool knows (Llama 3, ChatML, Zephyr, Llama 2); name one with "
                        "--template llama3|chatml|zephyr|llama2\n");
        return 1;
    }
    if ((rc = run_engine_open(o, model, &engine)) != 0)
        return rc;
    c.system = o->system;
    c.max_reply = (size_t)o->n_generate;
    c.context_length = o->context ? (size_t)o->context : pmpd_model_get_info(model)->seq_len;
    c.prompt = 1;
    fprintf(stderr, "chat template %s (from %s); %zu positions; one message per line, /reset starts over, EOF ends\n",
            example_chat_family_name(c.family), source, c.context_length);
    pmpd_rng_seed(&rng, o->seed);
    st = example_chat_loop(model, engine.session, &engine.sampler, &rng, &c, stdin, stdout, stderr, scratch, &stats);
    fprintf(stderr, "\n%zu replies, %zu resets\n", stats.replies, stats.resets);
    run_engine_close(&engine);
    return st == PMPD_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    run_options o;
    example_model_file file;
    pmpd_model *model;
    pmpd_status st;
    const pmpd_model_info *info;
    int32_t *ids;
    char *prompt_text = NULL; /* --prompt-file's contents */
    size_t n_prompt = 0, capacity;
    int rc;

    if (!run_parse(argc, argv, &o))
        return 2;
    if (!example_model_file_open("pmpd-run", o.model_path, o.no_mmap, &file))
        return 1;
    model = file.model;
    info = pmpd_model_get_info(model);
    if (o.info) {
        st = example_print_model_info(stdout, model, (size_t)o.context, file.arena.used);
        example_model_file_close(&file);
        return st == PMPD_OK ? 0 : run_fail("session plan", st);
    }
    if (o.chat) {
        rc = run_chat(&o, model, &file.arena);
        example_model_file_close(&file);
        return rc;
    }

    /* Generation stops at the end of the context, so no more ids than that. */
    if (o.n_generate > (long)info->seq_len)
        o.n_generate = (long)info->seq_len;
    run_schedule_steps(&o);
    if (o.prompt_file) {
        size_t size;
        if (!(prompt_text = (char *)example_read_file(o.prompt_file, &size))) {
            fprintf(stderr, "pmpd-run: cannot read %s (missing, empty or unreadable)\n", o.prompt_file);
            example_model_file_close(&file);
            return 1;
        }
        o.prompt = prompt_text;
    }
    capacity = (o.prompt ? strlen(o.prompt) : 0) + 3 + (size_t)o.n_generate;
    ids = (int32_t *)malloc(capacity * sizeof *ids);
    if (!ids) {
        free(prompt_text);
        example_model_file_close(&file);
        return run_fail("token buffer", PMPD_ERR_OUT_OF_MEMORY);
    }
    if ((o.prompt && o.prompt[0]) || o.tokenize_only) {
        /* BOS (and EOS) as the model's metadata says: always BOS for
         * llama2.c vocabularies, add_bos_token for GGUF ones. */
        const char *text = o.prompt ? o.prompt : "";
        st = pmpd_tokenize_text(model, text, strlen(text), PMPD_TOKENIZE_MODEL_BOS, ids, capacity, &n_prompt,
                                &file.arena);
        if (st != PMPD_OK) {
            free(ids);
            free(prompt_text);
            example_model_file_close(&file);
            return run_fail("prompt", st);
        }
    } else {
        ids[0] = (int32_t)info->bos_id;
        n_prompt = 1;
    }
    if (o.prompt_tokens && n_prompt > (size_t)o.prompt_tokens)
        n_prompt = (size_t)o.prompt_tokens;
    if (o.tokenize_only) {
        size_t i;
        for (i = 0; i < n_prompt; i++)
            printf("%d\n", (int)ids[i]);
        rc = fflush(stdout) == 0 ? 0 : 1;
    } else if (!n_prompt) {
        /* A model that adds no BOS and an empty prompt: start from BOS. */
        ids[0] = (int32_t)info->bos_id;
        rc = run_generate(&o, model, ids, 1);
    } else {
        rc = run_generate(&o, model, ids, n_prompt);
    }
    free(prompt_text);
    free(ids);
    example_model_file_close(&file);
    return rc;
}
