#include "examples/common/bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platform/platform.h"

double bench_now_seconds(void)
{
    return (double)pmpd_platform_now_ns() * 1e-9;
}

size_t bench_last_level_cache_bytes(void)
{
    size_t best = 0;
    int index;
    for (index = 0; index < 8; index++) {
        char path[96], text[32];
        FILE *f;
        size_t value;
        char unit = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
        f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(text, sizeof text, f) && sscanf(text, "%zu%c", &value, &unit) >= 1) {
            if (unit == 'K')
                value <<= 10;
            else if (unit == 'M')
                value <<= 20;
            if (value > best)
                best = value;
        }
        fclose(f);
    }
    return best;
}

typedef struct stream_job {
    const uint64_t *words;
    size_t count;
    uint64_t sink;
} stream_job;

/* Eight independent accumulators so the loop is limited by loads, not by a
 * dependency chain; the XOR result is kept so nothing is optimized away. */
static void stream_read(void *raw)
{
    stream_job *job = (stream_job *)raw;
    const uint64_t *w = job->words;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    size_t i, n = job->count & ~(size_t)7;
    for (i = 0; i < n; i += 8) {
        a0 ^= w[i];
        a1 ^= w[i + 1];
        a2 ^= w[i + 2];
        a3 ^= w[i + 3];
        a4 ^= w[i + 4];
        a5 ^= w[i + 5];
        a6 ^= w[i + 6];
        a7 ^= w[i + 7];
    }
    job->sink = a0 ^ a1 ^ a2 ^ a3 ^ a4 ^ a5 ^ a6 ^ a7;
}

static double stream_once(const uint64_t *words, size_t count, int threads)
{
    pmpd_thread handles[64];
    stream_job jobs[64];
    size_t per = count / (size_t)threads;
    double start;
    int t;
    start = bench_now_seconds();
    for (t = 0; t < threads; t++) {
        jobs[t].words = words + per * (size_t)t;
        jobs[t].count = per;
        if (threads == 1)
            stream_read(&jobs[t]);
        else if (pmpd_thread_start(&handles[t], stream_read, &jobs[t]) != PMPD_OK)
            return -1.0;
    }
    if (threads > 1)
        for (t = 0; t < threads; t++)
            pmpd_thread_join(&handles[t]);
    return (double)(per * (size_t)threads * sizeof(uint64_t)) / (bench_now_seconds() - start) * 1e-9;
}

int bench_memory_bandwidth(bench_context *ctx)
{
    size_t count = ctx->stream_bytes / sizeof(uint64_t), i;
    uint64_t *words = (uint64_t *)malloc(count * sizeof(uint64_t));
    int rep, reps = ctx->quick ? 2 : 5;
    char note[128];
    if (!words) {
        fprintf(stderr, "pmpd-bench: cannot allocate %zu bytes for the bandwidth probe\n", ctx->stream_bytes);
        return -1;
    }
    for (i = 0; i < count; i++)
        words[i] = i * 0x9E3779B97F4A7C15ull;
    ctx->bw_one_gbs = ctx->bw_all_gbs = 0;
    for (rep = 0; rep < reps; rep++) {
        double one = stream_once(words, count, 1);
        double all = stream_once(words, count, ctx->threads);
        if (one > ctx->bw_one_gbs)
            ctx->bw_one_gbs = one;
        if (all > ctx->bw_all_gbs)
            ctx->bw_all_gbs = all;
    }
    free(words);
    bench_section(ctx, "memory read bandwidth (best of runs)");
    snprintf(note, sizeof note, "stream over %zu MiB", ctx->stream_bytes >> 20);
    bench_row(ctx, "bandwidth", "1 thread", ctx->bw_one_gbs, "GB/s", note);
    snprintf(note, sizeof note, "%d threads", ctx->threads);
    bench_row(ctx, "bandwidth", "all threads", ctx->bw_all_gbs, "GB/s", note);
    return 0;
}

void bench_section(const bench_context *ctx, const char *title)
{
    (void)ctx;
    printf("\n%s\n", title);
    printf("  %-40s %12s  %-8s %s\n", "what", "value", "unit", "compared with");
}

void bench_row(const bench_context *ctx, const char *section, const char *name, double value,
               const char *unit, const char *comparison)
{
    printf("  %-40s %12.3f  %-8s %s\n", name, value, unit, comparison ? comparison : "");
    fflush(stdout);
    if (ctx->csv)
        fprintf(ctx->csv, "\"%s\",\"%s\",%.6g,\"%s\",\"%s\"\n", section, name, value, unit,
                comparison ? comparison : "");
}
