/* pmpd-mkgguf OUT [options]: writes a Llama GGUF v3 file of deterministic
 * random weights (normal, std 0.02) with a real tokenizer, in TinyLlama-1.1B's
 * shape unless told otherwise: a model of real size for speed measurements,
 * loadable by llama.cpp and by pmpd-convert.  Run with --help for options.
 *
 * Progress goes to stderr only when it is a terminal.  The file is written
 * to OUT.tmp and renamed; an interrupt (Ctrl-C, SIGTERM) removes OUT.tmp. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pmpd.h"

#define MKGGUF_DEFAULT_TOKENIZER "../shared/models/llama2_tokenizer.bin"

/* The partial file an interrupt must not leave behind. */
static char mkgguf_tmp_path[4096];

static void mkgguf_interrupted(int sig)
{
    unlink(mkgguf_tmp_path); /* async-signal-safe, unlike remove() */
    signal(sig, SIG_DFL);
    raise(sig);
}

static void mkgguf_progress(void *context, uint64_t done, uint64_t total)
{
    (void)context;
    fprintf(stderr, "\rpmpd-mkgguf: %llu / %llu MB (%3.0f%%)", (unsigned long long)(done >> 20),
            (unsigned long long)(total >> 20), total ? 100.0 * (double)done / (double)total : 100.0);
    if (done == total)
        fputc('\n', stderr);
}

static int usage(FILE *to, int status)
{
    fprintf(to,
            "usage: pmpd-mkgguf OUT [options]\n"
            "Writes a Llama GGUF v3 file with random weights (normal, std 0.02 or --std; RMSNorm weights 1).\n"
            "  --type T          every matrix, token embedding and output included, is T;\n"
            "                    norm vectors stay f32 (default q4_0).  T is one of\n"
            "                    f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl (rows of 32)\n"
            "                    q4_k q5_k q6_k iq4_xs (rows of 256), or q4_k_m: llama.cpp's\n"
            "                    mix, Q6_K for output.weight and for attn_v and ffn_down of\n"
            "                    layers i < n/8, i >= 7n/8 or (i - n/8) %% 3 == 2, Q4_K elsewhere\n"
            "  --dim N           embedding width (2048)\n"
            "  --hidden N        feed-forward width (5632)\n"
            "  --layers N        transformer blocks (22)\n"
            "  --heads N         attention heads (32)\n"
            "  --kv-heads N      key/value heads (4)\n"
            "  --seq-len N       context length (2048)\n"
            "  --seed N          weight generator seed (1): the same seed gives the same file\n"
            "  --std X           standard deviation of the weights (0.02)\n"
            "  --tied            no output.weight: the classifier is the token embedding\n"
            "  --tokenizer PATH  llama2.c tokenizer.bin; it sets the vocabulary\n"
            "                    (" MKGGUF_DEFAULT_TOKENIZER ")\n"
            "  --vocab-gpt2 PATH a byte-level BPE vocabulary instead (tokenizer.ggml.model gpt2):\n"
            "                    \"pmpd-gpt2-vocab 1\", then pre/bos/eos/eot/add_bos lines,\n"
            "                    \"tokens N\" and N lines \"TYPE TEXT\", \"merges M\" and M lines\n"
            "                    (tests/oracle/export-llama3-vocab.mjs writes Llama 3's)\n"
            "  --pre NAME        with --vocab-gpt2: the tokenizer.ggml.pre to write\n"
            "  --chat-template T the tokenizer.chat_template text to write\n"
            "Architecture variants:\n"
            "  --arch A          llama or qwen2 (llama); qwen2 adds random Q/K/V biases and\n"
            "                    rotates NeoX-style halves\n"
            "  --head-dim N      head width (dim / heads); another value is written as\n"
            "                    <arch>.attention.key_length and value_length\n"
            "  --rope-theta X    rope base, <arch>.rope.freq_base (10000)\n"
            "  --norm-eps X      RMSNorm epsilon (1e-5)\n"
            "  --rope-freqs      a rope_freqs.weight tensor of Llama 3.1's rope scaling factors\n"
            "                    (factor 8, low 1, high 4, original context 8192; llama only)\n"
            "Defaults are TinyLlama-1.1B's shape.  dim and hidden must be multiples of the\n"
            "type's row block: 32 for q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl; 256 for the K types,\n"
            "iq4_xs and q4_k_m.\n");
    return status;
}

static int mkgguf_number(const char *text, unsigned long long max, unsigned long long *out)
{
    char *end;
    if (text[0] < '0' || text[0] > '9')
        return 0;
    *out = strtoull(text, &end, 10);
    return *end == '\0' && *out <= max;
}

/* The --type spellings, lower-case ggml names. */
static const struct {
    const char *name;
    pmpd_ggml_type type;
} mkgguf_types[] = {
    {"f32", PMPD_GGML_F32},     {"f16", PMPD_GGML_F16},       {"bf16", PMPD_GGML_BF16},
    {"q8_0", PMPD_GGML_Q8_0},   {"q4_0", PMPD_GGML_Q4_0},     {"q4_1", PMPD_GGML_Q4_1},
    {"q5_0", PMPD_GGML_Q5_0},   {"q5_1", PMPD_GGML_Q5_1},     {"iq4_nl", PMPD_GGML_IQ4_NL},
    {"q4_k", PMPD_GGML_Q4_K},   {"q5_k", PMPD_GGML_Q5_K},     {"q6_k", PMPD_GGML_Q6_K},
    {"iq4_xs", PMPD_GGML_IQ4_XS}, {"q4_k_m", PMPD_GGML_MIX_Q4_K_M},
};

static int mkgguf_type(const char *text, pmpd_ggml_type *type)
{
    size_t i;
    for (i = 0; i < sizeof mkgguf_types / sizeof mkgguf_types[0]; i++) {
        if (strcmp(text, mkgguf_types[i].name) == 0) {
            *type = mkgguf_types[i].type;
            return 1;
        }
    }
    return 0;
}

/* Positive, finite and written as a plain decimal or exponent number. */
static int mkgguf_float(const char *text, float *out)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || !(v > 0.0) || !(v < 1e30))
        return 0;
    *out = (float)v;
    return 1;
}

/* The architecture options: how many arguments arg (and next) took, 0 if
 * arg is not one of them, -1 if its value is bad. */
static int mkgguf_arch_option(const char *arg, const char *next, pmpd_synth_options *o)
{
    unsigned long long value;
    if (strcmp(arg, "--rope-freqs") == 0) {
        o->rope_freqs = 1;
        return 1;
    }
    if (strcmp(arg, "--arch") != 0 && strcmp(arg, "--head-dim") != 0 && strcmp(arg, "--rope-theta") != 0 &&
        strcmp(arg, "--norm-eps") != 0 && strcmp(arg, "--std") != 0)
        return 0;
    if (!next)
        return -1;
    if (strcmp(arg, "--arch") == 0) {
        if (strcmp(next, "llama") != 0 && strcmp(next, "qwen2") != 0)
            return -1;
        o->arch = next;
    } else if (strcmp(arg, "--head-dim") == 0) {
        if (!mkgguf_number(next, 0xFFFFFFu, &value) || value == 0)
            return -1;
        o->head_dim = (uint32_t)value;
    } else if (!mkgguf_float(next, strcmp(arg, "--rope-theta") == 0 ? &o->rope_theta
                                   : strcmp(arg, "--norm-eps") == 0 ? &o->norm_eps
                                                                     : &o->weight_std)) {
        return -1;
    }
    return 2;
}

static const char *mkgguf_type_name(pmpd_ggml_type type)
{
    size_t i;
    for (i = 0; i < sizeof mkgguf_types / sizeof mkgguf_types[0]; i++)
        if (mkgguf_types[i].type == type)
            return mkgguf_types[i].name;
    return "?";
}

int main(int argc, char **argv)
{
    static const char *const shape_flags[] = {"--dim", "--hidden", "--layers", "--heads", "--kv-heads", "--seq-len"};
    const char *out = NULL;
    pmpd_synth_options options;
    pmpd_synth_summary summary;
    pmpd_error err;
    pmpd_status status;
    uint32_t *shape[6];
    unsigned long long value;
    int i, taken;
    size_t k;
    pmpd_synth_options_default(&options);
    options.tokenizer_path = MKGGUF_DEFAULT_TOKENIZER;
    shape[0] = &options.dim;
    shape[1] = &options.hidden_dim;
    shape[2] = &options.n_layers;
    shape[3] = &options.n_heads;
    shape[4] = &options.n_kv_heads;
    shape[5] = &options.seq_len;
    for (i = 1; i < argc; i++) {
        const char *arg = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
        for (k = 0; k < 6 && strcmp(arg, shape_flags[k]) != 0; k++)
            continue;
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0)
            return usage(stdout, 0);
        taken = mkgguf_arch_option(arg, next, &options);
        if (taken > 0) {
            i += taken - 1;
        } else if (taken == 0 && k < 6 && next && mkgguf_number(next, 0xFFFFFFFFu, &value)) {
            *shape[k] = (uint32_t)value;
            i++;
        } else if (strcmp(arg, "--seed") == 0 && next && mkgguf_number(next, ~0ull, &value)) {
            options.seed = value;
            i++;
        } else if (strcmp(arg, "--type") == 0 && next && mkgguf_type(next, &options.type)) {
            i++;
        } else if (strcmp(arg, "--tokenizer") == 0 && next) {
            options.tokenizer_path = next;
            i++;
        } else if (strcmp(arg, "--vocab-gpt2") == 0 && next) {
            options.gpt2_vocab_path = next;
            i++;
        } else if (strcmp(arg, "--pre") == 0 && next) {
            options.pre = next;
            i++;
        } else if (strcmp(arg, "--chat-template") == 0 && next) {
            options.chat_template = next;
            i++;
        } else if (strcmp(arg, "--tied") == 0) {
            options.tied = 1;
        } else if (arg[0] == '-' || out) {
            fprintf(stderr, "pmpd-mkgguf: bad argument %s%s%s\n", arg, next && arg[0] == '-' ? " " : "",
                    next && arg[0] == '-' ? next : "");
            return usage(stderr, 2);
        } else {
            out = arg;
        }
    }
    if (!out)
        return usage(stderr, 2);
    if (strlen(out) + 5 > sizeof mkgguf_tmp_path) {
        fprintf(stderr, "pmpd-mkgguf: %s: path too long\n", out);
        return 1;
    }
    sprintf(mkgguf_tmp_path, "%s.tmp", out);
    signal(SIGINT, mkgguf_interrupted);
    signal(SIGTERM, mkgguf_interrupted);
    if (isatty(fileno(stderr)))
        options.progress = mkgguf_progress;
    status = pmpd_synth_gguf(out, &options, &summary, &err);
    if (status != PMPD_OK) {
        fprintf(stderr, "pmpd-mkgguf: %s: %s\n", pmpd_strerror(status), err.message);
        return 1;
    }
    printf("pmpd-mkgguf: %s: %u tensors, %u tokens, %llu parameters, %llu bytes (%s%s, %s%s)\n", out,
           (unsigned)summary.n_tensors, (unsigned)summary.vocab_size, (unsigned long long)summary.parameters,
           (unsigned long long)summary.bytes, mkgguf_type_name(options.type), options.tied ? ", tied" : "",
           options.arch ? options.arch : "llama", options.rope_freqs ? ", rope_freqs" : "");
    return 0;
}
