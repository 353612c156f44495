#include "examples/common/bench.h"
#include "examples/common/model_file.h"
#include "pmpd_impl/weights/w8a8/w8a8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "platform/platform.h"
#include "pmpd_impl/core/config.h"

double bench_now_seconds(void)
{
    return (double)pmpd_platform_now_ns() * 1e-9;
}

/* The value of a "key : value" line of /proc/cpuinfo, if line is that key. */
static int bench_cpuinfo_value(char *line, const char *key, char **value)
{
    size_t n = strlen(key);
    char *colon = strchr(line, ':');
    if (!colon || strncmp(line, key, n) || (line[n] != ' ' && line[n] != '\t' && line[n] != ':'))
        return 0;
    *value = colon + 1;
    while (**value == ' ' || **value == '\t')
        (*value)++;
    (*value)[strcspn(*value, "\n")] = 0;
    return 1;
}

void bench_cpu_model(char *out, size_t size)
{
    /* A hypervisor may report only "AMD EPYC": family and model (x86) or
     * implementer and part (Arm) tell the microarchitecture apart. */
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256], name[96] = "unknown CPU", family[16] = "", model[16] = "";
    char *v;
    if (f) {
        /* The first CPU's block ends at the first blank line. */
        while (fgets(line, sizeof line, f) && line[0] != '\n') {
            if (bench_cpuinfo_value(line, "model name", &v))
                snprintf(name, sizeof name, "%s", v);
            else if (bench_cpuinfo_value(line, "cpu family", &v) || bench_cpuinfo_value(line, "CPU implementer", &v))
                snprintf(family, sizeof family, "%s", v);
            else if (bench_cpuinfo_value(line, "model", &v) || bench_cpuinfo_value(line, "CPU part", &v))
                snprintf(model, sizeof model, "%s", v);
        }
        fclose(f);
    }
    if (family[0])
        snprintf(out, size, "%s (family %s, model %s)", name, family, model);
    else
        snprintf(out, size, "%s", name);
}

const char *bench_kernel_paths(void)
{
    /* The kernels compiled in, as chosen by the target macros (config.h). */
    return ""
#if PMPD_USE_AVX512
           "AVX-512 VNNI GEMV (q8/q4/q2cb, nested, nuq, vq); "
#endif
#if PMPD_USE_AVX2
           "AVX2+FMA kernels; w8a8 " PMPD_W8A8_KERNEL
#elif PMPD_USE_I8MM
           "NEON with SDOT and SMMLA kernels; w8a8 " PMPD_W8A8_KERNEL
#elif PMPD_USE_DOTPROD
           "NEON with SDOT kernels; w8a8 " PMPD_W8A8_KERNEL
#elif PMPD_USE_NEON
           "NEON kernels (Armv8.0); w8a8 " PMPD_W8A8_KERNEL
#else
           "scalar kernels; w8a8 " PMPD_W8A8_KERNEL
#endif
        ;
}

/* The size of cache index`index` of cpu 0 in bytes (0 if unknown), and its
 * level and whether it holds data (not only instructions). */
static size_t bench_cache_index(int index, int *level, int *data)
{
    char path[96], text[32];
    FILE *f;
    size_t value = 0;
    char unit = 0;
    *level = 0;
    *data = 0;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", index);
    if ((f = fopen(path, "r")) != NULL) {
        if (!fgets(text, sizeof text, f) || sscanf(text, "%d", level) != 1)
            *level = 0;
        fclose(f);
    }
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", index);
    if ((f = fopen(path, "r")) != NULL) {
        *data = fgets(text, sizeof text, f) && strncmp(text, "Instruction", 11) != 0;
        fclose(f);
    }
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    if (fgets(text, sizeof text, f) && sscanf(text, "%zu%c", &value, &unit) >= 1) {
        if (unit == 'K')
            value <<= 10;
        else if (unit == 'M')
            value <<= 20;
    } else {
        value = 0;
    }
    fclose(f);
    return value;
}

size_t bench_last_level_cache_bytes(void)
{
    size_t best = 0;
    int index, level, data;
    for (index = 0; index < 8; index++) {
        size_t value = bench_cache_index(index, &level, &data);
        if (value > best)
            best = value;
    }
    return best;
}

/* sysfs first; where a VM's kernel has no cache entries there, glibc's
 * sysconf reads the size from CPUID (seen: a Zen5 VM, 1 MiB; without it the
 * "in L2" rows used 1 MiB, the whole L2, and spilled). */
size_t bench_l2_cache_bytes(void)
{
    int index, level, data;
    for (index = 0; index < 8; index++) {
        size_t value = bench_cache_index(index, &level, &data);
        if (level == 2 && data)
            return value;
    }
#if defined(_SC_LEVEL2_CACHE_SIZE)
    {
        long value = sysconf(_SC_LEVEL2_CACHE_SIZE);
        if (value > 0)
            return (size_t)value;
    }
#endif
    return 0;
}

typedef struct stream_job {
    const uint64_t *words;
    size_t count;
    unsigned streams; /* 1, or 4: the quarters of words read side by side */
    uint64_t sink;
} stream_job;

/* Eight independent accumulators so the loop is limited by loads, not by a
 * dependency chain; the XOR result is kept so nothing is optimized away.
 * Four streams: a cache line from each quarter in turn, as kernels that
 * read several slices or row ranges at once do (on the 2-core Zen5 VM one
 * stream read 28-32 GB/s and four 33-37, and q4's GEMV, which reads four,
 * ran above the one-stream figure). */
static void stream_read(void *raw)
{
    stream_job *job = (stream_job *)raw;
    const size_t part = job->count / job->streams & ~(size_t)7;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    size_t i;
    unsigned q;
    for (i = 0; i < part; i += 8)
        for (q = 0; q < job->streams; q++) {
            const uint64_t *w = job->words + q * part + i;
            a0 ^= w[0];
            a1 ^= w[1];
            a2 ^= w[2];
            a3 ^= w[3];
            a4 ^= w[4];
            a5 ^= w[5];
            a6 ^= w[6];
            a7 ^= w[7];
        }
    job->sink = a0 ^ a1 ^ a2 ^ a3 ^ a4 ^ a5 ^ a6 ^ a7;
}

static double stream_once(const uint64_t *words, size_t count, int threads, unsigned streams)
{
    pmpd_thread handles[64];
    stream_job jobs[64];
    size_t per = count / (size_t)threads / (8 * streams) * (8 * streams);
    double start;
    int t;
    start = bench_now_seconds();
    for (t = 0; t < threads; t++) {
        jobs[t].words = words + per * (size_t)t;
        jobs[t].count = per;
        jobs[t].streams = streams;
        if (threads == 1)
            stream_read(&jobs[t]);
        else if (pmpd_thread_start(&handles[t], stream_read, &jobs[t], 0) != PMPD_OK)
            return -1.0;
    }
    if (threads > 1)
        for (t = 0; t < threads; t++)
            pmpd_thread_join(&handles[t]);
    return (double)(per * (size_t)threads * sizeof(uint64_t)) / (bench_now_seconds() - start) * 1e-9;
}

/* The probe is the best of one and four streams per thread, so that no
 * kernel's access pattern reads faster than "the bandwidth". */
int bench_memory_bandwidth(bench_context *ctx)
{
    size_t count = ctx->stream_bytes / sizeof(uint64_t), i;
    uint64_t *words = (uint64_t *)malloc(count * sizeof(uint64_t));
    int rep, reps = ctx->quick ? 2 : 5;
    double best[2][2] = {{0.0, 0.0}, {0.0, 0.0}}; /* [one thread, all][1 stream, 4] */
    char note[160];
    unsigned v;
    if (!words) {
        fprintf(stderr, "pmpd-bench: cannot allocate %zu bytes for the bandwidth probe\n", ctx->stream_bytes);
        return -1;
    }
    for (i = 0; i < count; i++)
        words[i] = i * 0x9E3779B97F4A7C15ull;
    for (rep = 0; rep < reps; rep++)
        for (v = 0; v < 2; v++) {
            double one = stream_once(words, count, 1, v ? 4 : 1);
            double all = stream_once(words, count, ctx->threads, v ? 4 : 1);
            best[0][v] = one > best[0][v] ? one : best[0][v];
            best[1][v] = all > best[1][v] ? all : best[1][v];
        }
    ctx->bw_one_gbs = best[0][0] > best[0][1] ? best[0][0] : best[0][1];
    ctx->bw_all_gbs = best[1][0] > best[1][1] ? best[1][0] : best[1][1];
    free(words);
    bench_section(ctx, "memory read bandwidth (best of runs)");
    snprintf(note, sizeof note, "read of %zu MiB; 1 stream %.1f, 4 streams %.1f", ctx->stream_bytes >> 20,
             best[0][0], best[0][1]);
    bench_row(ctx, "bandwidth", "1 thread", ctx->bw_one_gbs, "GB/s", note);
    snprintf(note, sizeof note, "%d threads; 1 stream each %.1f, 4 streams %.1f", ctx->threads, best[1][0],
             best[1][1]);
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

unsigned bench_pool_threads(const bench_context *ctx)
{
    return ctx->threads > PMPD_MAX_THREADS ? PMPD_MAX_THREADS : (unsigned)ctx->threads;
}

int bench_pools_start(const bench_context *ctx, bench_pools *pools)
{
    unsigned threads = bench_pool_threads(ctx);
    size_t pool_bytes = 0, single_bytes = 0, total;
    pmpd_arena arena;
    pools->all = pools->single = NULL;
    pools->buffer = NULL;
    if (pmpd_pool_plan(threads, &pool_bytes) != PMPD_OK || pmpd_pool_plan(1, &single_bytes) != PMPD_OK)
        return -1;
    total = pool_bytes + single_bytes + 4 * PMPD_ARENA_ALIGNMENT;
    pools->buffer = malloc(total);
    if (!pools->buffer || pmpd_arena_init(&arena, pools->buffer, total) != PMPD_OK ||
        pmpd_pool_create(&arena, threads, 0, &pools->all) != PMPD_OK ||
        pmpd_pool_create(&arena, 1, 0, &pools->single) != PMPD_OK) {
        fprintf(stderr, "pmpd-bench: cannot start the worker pool\n");
        bench_pools_stop(pools);
        return -1;
    }
    return 0;
}

void bench_pools_stop(bench_pools *pools)
{
    if (pools->all)
        pmpd_pool_destroy(pools->all);
    if (pools->single)
        pmpd_pool_destroy(pools->single);
    free(pools->buffer);
    pools->all = pools->single = NULL;
    pools->buffer = NULL;
}

double bench_seconds_per_call(const bench_context *ctx, double budget, double quick_budget, size_t copies,
                              void (*step)(void *job, size_t copy), void *job)
{
    double start = bench_now_seconds(), elapsed;
    size_t calls = 0;
    if (ctx->quick)
        budget = quick_budget;
    do {
        step(job, calls % copies);
        calls++;
        elapsed = bench_now_seconds() - start;
    } while (elapsed < budget || calls < copies);
    return elapsed / (double)calls;
}

void bench_random_bytes(unsigned char *bytes, size_t n, uint64_t seed)
{
    uint64_t state = seed;
    size_t i;
    for (i = 0; i < n; i++) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        bytes[i] = (unsigned char)(state >> 24);
    }
}

void bench_synthetic_info(pmpd_model_info *info, uint32_t n_layers, uint32_t vocab_size)
{
    memset(info, 0, sizeof *info);
    info->dim = 2048;
    info->hidden_dim = 5632;
    info->n_layers = n_layers;
    info->n_heads = 32;
    info->n_kv_heads = 4;
    info->head_dim = 64;
    info->vocab_size = vocab_size;
    info->seq_len = 256;
    info->rope_theta = 10000.0f;
    info->norm_eps = 1e-5f;
    info->shared_classifier = 1;
    info->bos_id = 1;
    info->eos_id = 2;
}

#define BENCH_MODEL_ARENA_BYTES ((size_t)16 << 20)

int bench_model_open(pmpd_status built, pmpd_build_model *b, const char *label, example_model *out)
{
    pmpd_status st = built;
    memset(out, 0, sizeof *out);
    if (st == PMPD_OK)
        st = example_model_open(b, BENCH_MODEL_ARENA_BYTES, out);
    pmpd_build_free(b);
    if (st == PMPD_OK)
        return 0;
    /* The arena is allocated only once the container is made. */
    if (out->arena_block)
        fprintf(stderr, "pmpd-bench: the synthetic %s model does not load\n", label);
    else
        fprintf(stderr, "pmpd-bench: cannot build the synthetic %s model\n", label);
    example_model_close(out);
    return -1;
}

#undef BENCH_MODEL_ARENA_BYTES

pmpd_session *bench_session_open(const pmpd_model *model, const pmpd_session_config *config, void **block)
{
    pmpd_session *s = NULL;
    pmpd_arena arena;
    size_t bytes = 0;
    *block = NULL;
    if (pmpd_session_plan(model, config, &bytes) != PMPD_OK || !(*block = example_arena_block(bytes)))
        return NULL;
    pmpd_arena_init(&arena, example_aligned(*block), bytes);
    if (pmpd_session_create(model, config, &arena, &s) != PMPD_OK) {
        free(*block);
        *block = NULL;
        return NULL;
    }
    return s;
}
