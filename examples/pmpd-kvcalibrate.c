/* pmpd-kvcalibrate IN OUT [--sub 2|4] [--bits B] [--shared] [--sequences N] [--length N] [--iterations N]
 *                  [--seed S]
 *
 * Trains the product-quantized KV-cache codebooks of a .pmpd model from
 * text the model samples itself (no dataset needed) and writes a copy of
 * the container with the codebook section, ready for `pmpd-run --kv pq`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd.h"

static int kvcalibrate_usage(void)
{
    fprintf(stderr, "usage: pmpd-kvcalibrate IN OUT [--sub 2|4] [--bits 1-8] [--shared] [--sequences N] [--length N]\n"
                    "                        [--iterations N] [--seed S]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    pmpd_pq_calibration_options options;
    pmpd_error err;
    pmpd_status st;
    int i;
    pmpd_pq_calibration_options_init(&options);
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--shared")) {
            options.per_layer = 0;
        } else if (a[0] == '-' && a[1] != '\0') {
            unsigned long n;
            char *end;
            if (!v)
                return kvcalibrate_usage();
            n = strtoul(v, &end, 10);
            if (*end != '\0' || end == v)
                return kvcalibrate_usage();
            i++;
            if (!strcmp(a, "--sub") && (n == 2 || n == 4))
                options.key_sub_dim = options.value_sub_dim = (uint32_t)n;
            else if (!strcmp(a, "--bits") && n >= 1 && n <= 8)
                options.bits = (uint32_t)n;
            else if (!strcmp(a, "--sequences") && n >= 1 && n <= 4096)
                options.n_sequences = (uint32_t)n;
            else if (!strcmp(a, "--length") && n >= 2 && n <= 1u << 20)
                options.sequence_length = (uint32_t)n;
            else if (!strcmp(a, "--iterations") && n >= 1 && n <= 1000)
                options.iterations = (uint32_t)n;
            else if (!strcmp(a, "--seed"))
                options.seed = n;
            else
                return kvcalibrate_usage();
        } else if (!in) {
            in = a;
        } else if (!out) {
            out = a;
        } else {
            return kvcalibrate_usage();
        }
    }
    if (!in || !out)
        return kvcalibrate_usage();
    pmpd_error_clear(&err);
    st = pmpd_pq_calibrate_file(in, out, &options, &err);
    if (st != PMPD_OK) {
        fprintf(stderr, "pmpd-kvcalibrate: %s: %s%s%s\n", in, pmpd_strerror(st), err.message[0] ? ": " : "",
                err.message);
        return 1;
    }
    printf("pmpd-kvcalibrate: %s -> %s (%u-dim subspaces, %u-bit codes, %s codebooks, %u texts x %u tokens)\n", in,
           out, (unsigned)options.key_sub_dim, (unsigned)options.bits, options.per_layer ? "per-layer" : "shared",
           (unsigned)options.n_sequences, (unsigned)options.sequence_length);
    return 0;
}
