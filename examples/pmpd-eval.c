/*
 * pmpd-eval: the quality of a .pmpd model on a text -- perplexity, and
 * against a reference model next-token KL and top-1 agreement.
 *
 *   pmpd-eval MODEL TEXT [--ref MODEL2] [--tokens N] [--ctx N] [--stride N]
 *             [--threads N] [--kv MODE] [--bits P:D] [--decode] [--csv]
 *
 * TEXT is tokenized whole with MODEL's tokenizer, BOS first (as pmpd-run
 * encodes a prompt), and cut to its first N tokens.  Logits come from
 * pmpd_session_prefill_all (every position of a batched prefill), or with
 * --decode from decode steps.  The strided evaluation
 * (windows, what is scored, how the logits are computed) is
 * pmpd_eval_strided in pmpd_impl/offline/eval/strided.h; --help states it
 * too.  Sessions live in heap arenas of exactly the planned size.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "examples/common/cli.h"
#include "examples/common/model_file.h"
#include "examples/common/read_file.h"
#include "pmpd.h"
#include "pmpd_impl/offline/eval/strided.h"
#include "platform/platform.h"

/* About a minute for pycode21M f32 with a reference on 2 threads
 * (docs/running.md, "Measuring quality"). */
#define EVAL_DEFAULT_TOKENS 8192L

/* Tokens per pmpd_session_prefill_all call (the sessions' prefill batch). */
#define EVAL_CHUNK 32

typedef struct eval_cli {
    const char *model_path, *text_path, *ref_path;
    long tokens, ctx, stride, threads;
    uint32_t kv_type;
    unsigned prefill_bits, decode_bits;
    int decode, csv;
} eval_cli;

static void eval_usage(FILE *out)
{
    fprintf(out,
            "usage: pmpd-eval MODEL TEXT [options]\n"
            "Perplexity of MODEL (.pmpd) on the text file TEXT, and with --ref the mean\n"
            "next-token KL(ref || model) in nats and the top-1 agreement over the same positions.\n"
            "  --ref MODEL2   reference model (same vocabulary size), run at its widest\n"
            "                 weights with an f32 KV cache\n"
            "  --tokens N     evaluate the first N tokens of TEXT as MODEL's tokenizer encodes\n"
            "                 it, BOS first (default %ld; 0 = all)\n"
            "  --ctx N        window length (default: the model's seq_len)\n"
            "  --stride N     each window starts N tokens after the previous one\n"
            "                 (default ctx/2; 1 <= N < ctx)\n"
            "  --threads N    threads per session (default 1)\n"
            "  --kv MODE      MODEL's KV cache: f32 (default), f16, pq, int8, int4\n"
            "  --bits P:D     nested (anyprec) MODEL: prefill and decode widths\n"
            "                 (default: the model's schedule, else the widest)\n"
            "  --decode       score with decode steps at width D (generation's kernels)\n"
            "                 instead of batched prefill at width P\n"
            "  --csv          print one line model,ref,tokens,ppl,ref_ppl,kl,top1 on stdout\n"
            "                 (tokens: N, BOS included; the summary goes to stderr)\n"
            "What is scored: every position 1..N-1 exactly once (BOS at position 0 never),\n"
            "as -log p(token | the tokens before it in its window), natural log.  Windows of\n"
            "ctx tokens start at 0, stride, 2*stride, ... and each runs in a fresh session\n"
            "(no BOS is inserted: a window starts with whatever token lies there); a window\n"
            "scores only the positions no earlier window scored, so past the first window\n"
            "every scored token has at least ctx - stride tokens of context.  A window's\n"
            "context before the first position it scores is prefilled unscored; the rest\n"
            "goes through pmpd_session_prefill_all, which returns the logits after every\n"
            "token (batched prefill, the prefill width P), or with --decode one\n"
            "pmpd_session_decode per token (width D).  perplexity = exp(mean NLL).\n"
            "KL and top-1 (with --ref) are over exactly the same positions: KL from the full\n"
            "softmax of each model, top-1 whether the two argmaxes are the same token.\n",
            EVAL_DEFAULT_TOKENS);
}

static int eval_parse(int argc, char **argv, eval_cli *o)
{
    int i;
    memset(o, 0, sizeof *o);
    o->tokens = EVAL_DEFAULT_TOKENS;
    o->threads = 1;
    o->kv_type = PMPD_KV_F32;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            eval_usage(stdout);
            exit(0);
        }
        if (!strcmp(a, "--decode") || !strcmp(a, "--csv")) {
            *(a[2] == 'd' ? &o->decode : &o->csv) = 1;
            continue;
        }
        if (a[0] != '-') {
            const char **slot = !o->model_path ? &o->model_path : !o->text_path ? &o->text_path : NULL;
            if (!slot) {
                fprintf(stderr, "pmpd-eval: unexpected argument %s\n", a);
                return 0;
            }
            *slot = a;
            continue;
        }
        if (!v) {
            fprintf(stderr, "pmpd-eval: %s needs a value\n", a);
            return 0;
        }
        i++;
        if (!strcmp(a, "--ref")) o->ref_path = v;
        else if (!strcmp(a, "--tokens")) ok = example_parse_long(v, 0, &o->tokens);
        else if (!strcmp(a, "--ctx")) ok = example_parse_long(v, 2, &o->ctx);
        else if (!strcmp(a, "--stride")) ok = example_parse_long(v, 1, &o->stride);
        else if (!strcmp(a, "--threads")) ok = example_parse_long(v, 1, &o->threads);
        else if (!strcmp(a, "--kv")) ok = example_parse_kv(v, &o->kv_type);
        else if (!strcmp(a, "--bits")) ok = example_parse_bits(v, &o->prefill_bits, &o->decode_bits);
        else {
            fprintf(stderr, "pmpd-eval: unknown option %s\n", a);
            return 0;
        }
        if (!ok) {
            fprintf(stderr, "pmpd-eval: bad value for %s: %s\n", a, v);
            return 0;
        }
    }
    if (!o->model_path || !o->text_path) {
        eval_usage(stderr);
        return 0;
    }
    return 1;
}

/* The whole file as a C string (the tokenizer takes one): NULL when it
 * cannot be read or holds a NUL byte. */
static char *eval_read_text(const char *path, size_t *length)
{
    char *text = (char *)example_read_file(path, length);
    if (text && strlen(text) != *length) {
        free(text);
        text = NULL;
    }
    return text;
}

/* Tokenizes the text (BOS first) into a malloc'ed array. */
static pmpd_status eval_tokenize(const pmpd_model *model, const char *text, size_t length, int32_t **ids,
                                 size_t *n)
{
    size_t scratch_bytes = 24 * (length + 3); /* pmpd_tokenize's working memory */
    void *block = malloc(scratch_bytes + PMPD_ARENA_ALIGNMENT);
    pmpd_arena scratch;
    pmpd_status st = PMPD_ERR_OUT_OF_MEMORY;
    *ids = (int32_t *)malloc((length + 3) * sizeof **ids);
    if (block && *ids) {
        pmpd_arena_init(&scratch, example_aligned(block), scratch_bytes);
        st = pmpd_tokenize(model, text, 1, 0, *ids, length + 3, n, &scratch);
    }
    free(block);
    if (st != PMPD_OK) {
        free(*ids);
        *ids = NULL;
    }
    return st;
}

/* A session in a heap block of exactly its planned size. */
typedef struct eval_session {
    void *block;
    pmpd_session *session;
} eval_session;

static pmpd_status eval_session_open(const pmpd_model *model, const pmpd_session_config *config,
                                     eval_session *s)
{
    size_t bytes;
    pmpd_arena arena;
    pmpd_status st = pmpd_session_plan(model, config, &bytes);
    s->session = NULL;
    s->block = NULL;
    if (st != PMPD_OK)
        return st;
    s->block = malloc(bytes + PMPD_ARENA_ALIGNMENT);
    if (!s->block)
        return PMPD_ERR_OUT_OF_MEMORY;
    pmpd_arena_init(&arena, example_aligned(s->block), bytes);
    return pmpd_session_create(model, config, &arena, &s->session);
}

static void eval_session_close(eval_session *s)
{
    pmpd_session_destroy(s->session);
    free(s->block);
}

static void eval_progress(void *context, size_t scored, size_t total)
{
    (void)context;
    fprintf(stderr, "\rpmpd-eval: %zu of %zu positions scored", scored, total);
    if (scored == total)
        fputc('\n', stderr);
}

/* Everything main opened, closed in one place. */
typedef struct eval_state {
    example_model_file model, ref;
    eval_session session, ref_session;
    int32_t *ids;
    char *text;
    float *logits, *ref_logits; /* EVAL_CHUNK rows each, for pmpd_session_prefill_all */
} eval_state;

static void eval_state_close(eval_state *s)
{
    eval_session_close(&s->session);
    eval_session_close(&s->ref_session);
    if (s->model.block)
        example_model_file_close(&s->model);
    if (s->ref.block)
        example_model_file_close(&s->ref);
    free(s->ids);
    free(s->text);
    free(s->logits);
    free(s->ref_logits);
}

static void eval_report(const eval_cli *o, const pmpd_eval_options *eo, size_t n_text, size_t n,
                        unsigned parent_bits, unsigned prefill_bits, const pmpd_eval_result *r, double seconds)
{
    FILE *out = o->csv ? stderr : stdout;
    fprintf(out, "pmpd-eval: %s on %s\n", o->model_path, o->text_path);
    fprintf(out, "  tokens      %zu of the text's %zu (BOS included); %zu positions scored, each once\n", n,
            n_text, r->scored);
    fprintf(out, "  windows     %zu of %zu tokens, stride %zu, each from a fresh session; %zu tokens run\n",
            r->windows, eo->ctx, eo->stride, r->forwarded);
    if (parent_bits) {
        if (o->decode)
            fprintf(out, "  logits      decode steps at the decode width(s) after a %u-bit context prefill\n",
                    prefill_bits);
        else
            fprintf(out, "  logits      batched prefill at the prefill width, %u bits\n", prefill_bits);
    }
    fprintf(out, "  perplexity  %.4f (mean NLL %.5f nats/token)\n", r->ppl, r->nll);
    if (o->ref_path)
        fprintf(out,
                "  reference   %s: perplexity %.4f; KL(ref || model) %.6f nats/token; top-1 agreement %.4f\n",
                o->ref_path, r->ref_ppl, r->kl, r->top1);
    fprintf(out, "  time        %.1f s (%.0f positions/s, %ld thread%s per session)\n", seconds,
            seconds > 0 ? (double)r->scored / seconds : 0.0, o->threads, o->threads > 1 ? "s" : "");
    if (o->csv) {
        if (o->ref_path)
            printf("%s,%s,%zu,%.6f,%.6f,%.8f,%.6f\n", o->model_path, o->ref_path, n, r->ppl, r->ref_ppl, r->kl,
                   r->top1);
        else
            printf("%s,,%zu,%.6f,,,\n", o->model_path, n, r->ppl);
    }
}

static int eval_fail(eval_state *s, const char *what, pmpd_status st)
{
    fprintf(stderr, "pmpd-eval: %s: %s\n", what, pmpd_strerror(st));
    eval_state_close(s);
    return 1;
}

int main(int argc, char **argv)
{
    eval_cli o;
    eval_state s;
    pmpd_session_config config;
    pmpd_eval_options eo;
    pmpd_eval_result r;
    const pmpd_model_info *info;
    size_t length = 0, n_text = 0, n;
    unsigned parent_bits, prefill_bits;
    uint64_t t0;
    pmpd_status st;

    if (!eval_parse(argc, argv, &o))
        return 2;
    memset(&s, 0, sizeof s);
    if (!example_model_file_open("pmpd-eval", o.model_path, 0, &s.model) ||
        (o.ref_path && !example_model_file_open("pmpd-eval", o.ref_path, 0, &s.ref))) {
        eval_state_close(&s);
        return 1;
    }
    info = pmpd_model_get_info(s.model.model);
    if (s.ref.model && pmpd_model_get_info(s.ref.model)->vocab_size != info->vocab_size) {
        fprintf(stderr, "pmpd-eval: %s has a vocabulary of %u tokens but %s of %u: they cannot be compared\n",
                o.model_path, (unsigned)info->vocab_size, o.ref_path,
                (unsigned)pmpd_model_get_info(s.ref.model)->vocab_size);
        eval_state_close(&s);
        return 1;
    }
    s.text = eval_read_text(o.text_path, &length);
    if (!s.text) {
        fprintf(stderr, "pmpd-eval: %s: cannot read it as text (missing, or holds a NUL byte)\n", o.text_path);
        eval_state_close(&s);
        return 1;
    }
    if ((st = eval_tokenize(s.model.model, s.text, length, &s.ids, &n_text)) != PMPD_OK)
        return eval_fail(&s, "tokenizer", st);
    n = o.tokens && (size_t)o.tokens < n_text ? (size_t)o.tokens : n_text;
    if (n < 2) {
        fprintf(stderr, "pmpd-eval: %zu token(s) of %s, BOS included: nothing to score\n", n, o.text_path);
        eval_state_close(&s);
        return 1;
    }

    memset(&eo, 0, sizeof eo);
    eo.ctx = o.ctx ? (size_t)o.ctx : info->seq_len;
    eo.stride = o.stride ? (size_t)o.stride : (eo.ctx / 2 ? eo.ctx / 2 : 1);
    eo.decode = o.decode;
    eo.chunk = EVAL_CHUNK;
    s.logits = (float *)malloc((size_t)EVAL_CHUNK * info->vocab_size * sizeof(float));
    s.ref_logits = (float *)malloc((size_t)EVAL_CHUNK * info->vocab_size * sizeof(float));
    if (!s.logits || !s.ref_logits)
        return eval_fail(&s, "logit buffers", PMPD_ERR_OUT_OF_MEMORY);
    eo.logits = s.logits;
    eo.ref_logits = s.ref_logits;
    eo.progress = isatty(2) ? eval_progress : NULL;
    if (eo.ctx > info->seq_len || (s.ref.model && eo.ctx > pmpd_model_get_info(s.ref.model)->seq_len) ||
        eo.stride >= eo.ctx) {
        fprintf(stderr, "pmpd-eval: --ctx %zu must be at most each model's seq_len (%u) and --stride %zu less than it\n",
                eo.ctx, (unsigned)info->seq_len, eo.stride);
        eval_state_close(&s);
        return 2;
    }
    pmpd_session_config_init(&config);
    config.context_length = (uint32_t)eo.ctx;
    config.n_threads = (uint32_t)o.threads;
    if (s.ref.model && (st = eval_session_open(s.ref.model, &config, &s.ref_session)) != PMPD_OK)
        return eval_fail(&s, "reference session", st);
    config.kv_type = o.kv_type;
    if ((st = eval_session_open(s.model.model, &config, &s.session)) != PMPD_OK)
        return eval_fail(&s, "session", st);
    if ((st = example_precision_apply(s.model.model, s.session.session, o.prefill_bits, o.decode_bits, NULL,
                                      &parent_bits, &prefill_bits)) != PMPD_OK)
        return eval_fail(&s, "precision", st);

    t0 = pmpd_platform_now_ns();
    st = pmpd_eval_strided(s.session.session, s.ref_session.session, s.ids, n, &eo, &r);
    if (st != PMPD_OK)
        return eval_fail(&s, "evaluation", st);
    eval_report(&o, &eo, n_text, n, parent_bits, prefill_bits, &r, (double)(pmpd_platform_now_ns() - t0) * 1e-9);
    eval_state_close(&s);
    return 0;
}
