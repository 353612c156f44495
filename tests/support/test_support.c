#include "tests/support/test_support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_flag(const char *name)
{
    const char *r = getenv(name);
    return r && *r && strcmp(r, "0") != 0;
}

int test_reduced(void)
{
    return test_flag("PMPD_TEST_REDUCED");
}

int test_emulated(void)
{
    return test_flag("PMPD_TEST_EMULATED");
}

const char *test_shared_dir(void)
{
    const char *env = getenv("PMPD_SHARED");
    return env && env[0] ? env : "../shared";
}

char *test_shared_path(char *out, size_t out_size, const char *relative)
{
    snprintf(out, out_size, "%s/%s", test_shared_dir(), relative);
    return out;
}

unsigned char *test_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    unsigned char *data;
    long length;
    *size = 0;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) != 0 || (length = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return NULL;
    }
    data = (unsigned char *)malloc(length ? (size_t)length : 1);
    if (data && fread(data, 1, (size_t)length, f) != (size_t)length) {
        free(data);
        data = NULL;
    }
    fclose(f);
    if (data)
        *size = (size_t)length;
    return data;
}

size_t test_read_vector_ids(const char *name, int32_t *ids, size_t max)
{
    char path[512], relative[256];
    size_t size, n = 0;
    char *text, *p, *end;
    snprintf(relative, sizeof relative, "vectors/%s", name);
    text = (char *)test_read_file(test_shared_path(path, sizeof path, relative), &size);
    if (!text)
        return 0;
    text = (char *)realloc(text, size + 1);
    text[size] = '\0';
    for (p = text; n < max; p = end) {
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        ids[n++] = (int32_t)v;
    }
    free(text);
    return n;
}

int32_t test_argmax(const float *logits, size_t n)
{
    size_t i, best = 0;
    for (i = 1; i < n; i++)
        if (logits[i] > logits[best])
            best = i;
    return (int32_t)best;
}

double test_softmax_kl(const float *ref, const float *got, size_t n)
{
    double mr = ref[0], mg = got[0], zr = 0.0, zg = 0.0, kl = 0.0;
    size_t i;
    for (i = 1; i < n; i++) {
        mr = ref[i] > mr ? ref[i] : mr;
        mg = got[i] > mg ? got[i] : mg;
    }
    for (i = 0; i < n; i++) {
        zr += exp(ref[i] - mr);
        zg += exp(got[i] - mg);
    }
    for (i = 0; i < n; i++) {
        double lr = ref[i] - mr - log(zr), lg = got[i] - mg - log(zg);
        kl += exp(lr) * (lr - lg);
    }
    return kl;
}

void test_rng_seed(test_rng *rng, uint64_t seed)
{
    rng->state = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
    if (rng->state == 0)
        rng->state = 1;
}

uint32_t test_rng_u32(test_rng *rng)
{
    uint64_t x = rng->state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng->state = x;
    return (uint32_t)((x * 0x2545F4914F6CDD1Dull) >> 32);
}

float test_rng_uniform(test_rng *rng)
{
    return (float)((double)test_rng_u32(rng) / 2147483648.0 - 1.0);
}

float test_rng_normal(test_rng *rng)
{
    double u1 = ((double)test_rng_u32(rng) + 1.0) / 4294967297.0;
    double u2 = (double)test_rng_u32(rng) / 4294967296.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* Scores are computed twice (for the maximum, then for the weights) so no
 * buffer depends on n. */
static double test_attention_score(const float *q, const float *k, size_t dim)
{
    double s = 0.0;
    size_t d;
    for (d = 0; d < dim; d++)
        s += (double)q[d] * k[d];
    return s / sqrt((double)dim);
}

void test_softmax_attention(const float *q, size_t heads, size_t dim, const float *k, const float *v,
                            size_t row_stride, size_t n, double *out)
{
    size_t h, t, d;
    for (h = 0; h < heads; h++) {
        const float *qh = q + h * dim;
        double max = -INFINITY, sum = 0.0;
        for (t = 0; t < n; t++) {
            double s = test_attention_score(qh, k + t * row_stride, dim);
            max = s > max ? s : max;
        }
        for (d = 0; d < dim; d++)
            out[h * dim + d] = 0.0;
        for (t = 0; t < n; t++) {
            double w = exp(test_attention_score(qh, k + t * row_stride, dim) - max);
            sum += w;
            for (d = 0; d < dim; d++)
                out[h * dim + d] += w * v[t * row_stride + d];
        }
        for (d = 0; d < dim; d++)
            out[h * dim + d] /= sum;
    }
}

size_t test_byte_level_piece(unsigned b, char *out)
{
    unsigned cp = b, k = 0, c;
    if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE))) {
        for (c = 0; c < b; c++)
            if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE)))
                k++;
        cp = 0x100 + k;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}
