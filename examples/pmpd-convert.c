/* pmpd-convert IN OUT [--tokenizer FILE] [--type f32|f16|anyprec|q8|q4|q2cb] [--bits SEED:PARENT]
 *
 * Converts a llama2.c checkpoint (legacy or version 1) or a GGUF v3 Llama
 * file into a .pmpd container.  Shows a progress line when stderr is a
 * terminal, prints a one-line summary, and exits 0 only on success; on
 * failure it prints one line naming the input, the problem and the byte
 * offset, and leaves no output file behind. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pmpd.h"

static void convert_progress(void *context, uint64_t done, uint64_t total)
{
    (void)context;
    fprintf(stderr, "\rpmpd-convert: %llu / %llu (%3.0f%%)", (unsigned long long)done, (unsigned long long)total,
            total ? 100.0 * (double)done / (double)total : 100.0);
    if (done == total)
        fputc('\n', stderr);
}

static const char *convert_type_name(pmpd_tensor_type type)
{
    switch (type) {
    case PMPD_TENSOR_F16: return "f16";
    case PMPD_TENSOR_ANYPREC: return "anyprec";
    case PMPD_TENSOR_Q8: return "q8";
    case PMPD_TENSOR_Q4: return "q4";
    case PMPD_TENSOR_Q2CB: return "q2cb";
    default: return "f32";
    }
}

static int usage(void)
{
    fprintf(stderr, "usage: pmpd-convert IN OUT [--tokenizer FILE] [--type f32|f16|anyprec|q8|q4|q2cb] [--bits SEED:PARENT]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    pmpd_convert_options options;
    pmpd_convert_summary summary;
    pmpd_error err;
    pmpd_status status;
    int i;
    memset(&options, 0, sizeof options);
    options.type = PMPD_TENSOR_F32;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--tokenizer") == 0 && i + 1 < argc) {
            options.tokenizer_path = argv[++i];
        } else if (strcmp(argv[i], "--type") == 0 && i + 1 < argc) {
            const char *type = argv[++i];
            if (strcmp(type, "f32") == 0)
                options.type = PMPD_TENSOR_F32;
            else if (strcmp(type, "f16") == 0)
                options.type = PMPD_TENSOR_F16;
            else if (strcmp(type, "anyprec") == 0)
                options.type = PMPD_TENSOR_ANYPREC;
            else if (strcmp(type, "q8") == 0)
                options.type = PMPD_TENSOR_Q8;
            else if (strcmp(type, "q4") == 0)
                options.type = PMPD_TENSOR_Q4;
            else if (strcmp(type, "q2cb") == 0)
                options.type = PMPD_TENSOR_Q2CB;
            else
                return usage();
        } else if (strcmp(argv[i], "--bits") == 0 && i + 1 < argc) {
            if (sscanf(argv[++i], "%u:%u", &options.anyprec_seed_bits, &options.anyprec_parent_bits) != 2)
                return usage();
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return usage();
        } else if (!in) {
            in = argv[i];
        } else if (!out) {
            out = argv[i];
        } else {
            return usage();
        }
    }
    if (!in || !out)
        return usage();
    if (isatty(fileno(stderr)))
        options.progress = convert_progress;
    status = pmpd_convert_file(in, out, &options, &summary, &err);
    if (status != PMPD_OK) {
        const char *name = summary.failed_input == PMPD_CONVERT_INPUT_TOKENIZER ? options.tokenizer_path
                           : summary.failed_input == PMPD_CONVERT_INPUT_OUTPUT  ? out
                                                                                : in;
        if (err.offset != PMPD_NO_OFFSET)
            fprintf(stderr, "pmpd-convert: %s: %s at byte offset %llu: %s\n", name, pmpd_strerror(status),
                    (unsigned long long)err.offset, err.message);
        else
            fprintf(stderr, "pmpd-convert: %s: %s: %s\n", name, pmpd_strerror(status), err.message);
        return 1;
    }
    printf("pmpd-convert: %s -> %s: %u tensors, %llu bytes, %llu parameters (%s)\n", in, out,
           (unsigned)summary.n_tensors, (unsigned long long)summary.bytes, (unsigned long long)summary.parameters,
           convert_type_name(options.type));
    return 0;
}
