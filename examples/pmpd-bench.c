/* pmpd-bench: the figures pmpd is judged by, measured side by side in one
 * run: the machine's memory bandwidth first, then every kernel and model
 * figure as a ratio to it and to the scalar reference.
 *
 *   pmpd-bench [--quick] [--gemv] [--gemm] [--probe] [--attention] [--csv FILE] [--threads N] [--stream-mib N]
 *
 * --probe runs only the bandwidth probe (make bench-compare uses it);
 * --attention the probe and the KV-cache attention rows.
 * --gemv runs only the bandwidth probe and the GEMV rows (every type and
 * shape, 1 and all threads), plus each quantized kernel's ceiling with the
 * weights in L2: the loop for kernel work.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/common/bench.h"
#include "platform/platform.h"

static void usage(void)
{
    fprintf(stderr, "usage: pmpd-bench [--quick] [--gemv] [--gemm] [--probe] [--attention] [--csv FILE] [--threads N] [--stream-mib N]\n"
                    "  --gemv   only the bandwidth probe, the streamed GEMV rows and the kernels' L2 ceilings\n"
                    "  --gemm   only the bandwidth probe and the prefill GEMM of q4, q8, w8a8 through the format table\n"
                    "  --probe  only the bandwidth probe\n"
                    "  --attention  only the bandwidth probe and the attention rows\n");
}

int main(int argc, char **argv)
{
    bench_context ctx;
    size_t llc = bench_last_level_cache_bytes(), l2 = bench_l2_cache_bytes(), stream_mib = 0;
    char cpu[128];
    int i, probe_only = 0, attention_only = 0, gemm_only = 0;
    memset(&ctx, 0, sizeof ctx);
    ctx.threads = pmpd_platform_cpu_count();
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            ctx.quick = 1;
        } else if (strcmp(argv[i], "--gemv") == 0) {
            ctx.gemv_only = 1;
        } else if (strcmp(argv[i], "--gemm") == 0) {
            gemm_only = 1;
        } else if (strcmp(argv[i], "--probe") == 0) {
            probe_only = 1;
        } else if (strcmp(argv[i], "--attention") == 0) {
            attention_only = 1;
        } else if (strcmp(argv[i], "--csv") == 0 && i + 1 < argc) {
            ctx.csv = fopen(argv[++i], "w");
            if (!ctx.csv) {
                fprintf(stderr, "pmpd-bench: cannot write %s\n", argv[i]);
                return 1;
            }
            fprintf(ctx.csv, "section,name,value,unit,compared_with\n");
        } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            ctx.threads = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--stream-mib") == 0 && i + 1 < argc) {
            stream_mib = (size_t)strtoul(argv[++i], NULL, 10);
        } else {
            usage();
            return 2;
        }
    }
    if (ctx.threads < 1 || ctx.threads > 64) {
        fprintf(stderr, "pmpd-bench: --threads must be 1..64\n");
        return 2;
    }
    /* Four times the last-level cache (at least 256 MiB) defeats caching. */
    ctx.stream_bytes = stream_mib ? stream_mib << 20 : (4 * llc > ((size_t)256 << 20) ? 4 * llc : (size_t)256 << 20);
    /* Half the L2 (1 MiB where the OS does not say) for the rows that
     * measure a kernel with its weights in L2: room for the activations,
     * the output and what the L2's associativity wastes. */
    ctx.cached_bytes = l2 ? l2 / 2 : (size_t)1 << 20;
    bench_cpu_model(cpu, sizeof cpu);
    printf("pmpd-bench: %s; %s\n", cpu, bench_kernel_paths());
    printf("pmpd-bench: %d threads, L2 %zu KiB, last-level cache %zu MiB, streamed buffers %zu MiB\n", ctx.threads,
           l2 >> 10, llc >> 20, ctx.stream_bytes >> 20);
    if (bench_memory_bandwidth(&ctx) != 0)
        return 1;
    if (probe_only || attention_only || gemm_only) {
        int rc = (attention_only && bench_attention(&ctx) != 0) || (gemm_only && bench_formats(&ctx) != 0);
        if (ctx.csv)
            fclose(ctx.csv);
        return rc;
    }
    if (bench_anyprec(&ctx) != 0)
        return 1;
    if (bench_kernels(&ctx) != 0)
        return 1;
    if (bench_nuq(&ctx) != 0)
        return 1;
    if (!ctx.gemv_only && bench_formats(&ctx) != 0)
        return 1;
    if (!ctx.gemv_only && bench_attention(&ctx) != 0)
        return 1;
    if (ctx.csv)
        fclose(ctx.csv);
    return 0;
}
