/* Offline any-precision quantizer.  Each row's weights are sorted once; in
 * one dimension every k-means cluster is a contiguous run of the sorted
 * values, so a cluster is a pair of boundaries and a tree level is a list of
 * boundaries.  The seed level comes from a weighted Lloyd iteration; every
 * later level splits each run at the point that minimises the weighted
 * squared error of the two halves (the exact optimal 2-means in 1-D, found
 * by one scan over prefix sums).  A child's code is its parent's code with
 * one more bit (0 = lower half), so k-bit codes are prefixes of parent codes.
 * Every step is linear in the row or better (radix sort, binary searches for
 * the Lloyd boundaries), so a 1B-weight model converts in minutes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd.h"
#include "pmpd_impl/offline/precision/anyprec_quantize.h"
#include "pmpd_impl/offline/precision/anyprec_sort.h"
#include "pmpd_impl/weights/anyprec/anyprec.h"

#define ANYPREC_QUANTIZE_LLOYD_ROUNDS 100

typedef struct anyprec_quantize_item {
    float value;
    float weight;
    uint32_t col;
} anyprec_quantize_item;

typedef struct anyprec_quantize_work {
    anyprec_quantize_item *items;
    uint32_t *order;  /* columns in sorted order */
    uint64_t *sort_scratch;
    unsigned char *codes; /* parent code of each column */
    double *sum_w, *sum_wv, *sum_wvv; /* prefix sums over the sorted items */
    size_t *bounds[PMPD_ANYPREC_MAX_BITS + 1]; /* level k: 2^k + 1 boundaries */
    double *centroids[PMPD_ANYPREC_MAX_BITS + 1];
    /* Byte and bit of each column of a superblock in each plane's slice,
     * asked of the layout once per call instead of once per weight. */
    unsigned short place_byte[PMPD_ANYPREC_MAX_BITS][PMPD_ANYPREC_SUPER];
    unsigned char place_bit[PMPD_ANYPREC_MAX_BITS][PMPD_ANYPREC_SUPER];
} anyprec_quantize_work;

static double anyprec_quantize_cost(const anyprec_quantize_work *q, size_t a, size_t b)
{
    double w = q->sum_w[b] - q->sum_w[a], wv = q->sum_wv[b] - q->sum_wv[a];
    return w > 0.0 ? (q->sum_wvv[b] - q->sum_wvv[a]) - wv * wv / w : 0.0;
}

/* Weighted mean of run [a, b), or fallback when the run is empty. */
static double anyprec_quantize_mean(const anyprec_quantize_work *q, size_t a, size_t b, double fallback)
{
    double w = q->sum_w[b] - q->sum_w[a];
    return w > 0.0 ? (q->sum_wv[b] - q->sum_wv[a]) / w : fallback;
}

/* The first index in [lo, n) whose value is above mid, n if none. */
static size_t anyprec_quantize_above(const anyprec_quantize_work *q, size_t lo, size_t n, double mid)
{
    size_t hi = n;
    while (lo < hi) {
        size_t m = lo + (hi - lo) / 2;
        if (q->items[m].value <= mid)
            lo = m + 1;
        else
            hi = m;
    }
    return lo;
}

static void anyprec_quantize_seed(anyprec_quantize_work *q, size_t n, unsigned seed_bits)
{
    size_t clusters = (size_t)1 << seed_bits, i, j, round;
    size_t *b = q->bounds[seed_bits];
    double *c = q->centroids[seed_bits], total = q->sum_w[n];
    /* Start from weighted quantiles. */
    b[0] = 0;
    for (i = 1, j = 0; i < clusters; i++) {
        while (j < n && q->sum_w[j] < total * (double)i / (double)clusters)
            j++;
        b[i] = j;
    }
    b[clusters] = n;
    for (round = 0; round < ANYPREC_QUANTIZE_LLOYD_ROUNDS; round++) {
        int changed = 0;
        for (i = 0; i < clusters; i++)
            c[i] = anyprec_quantize_mean(q, b[i], b[i + 1], q->items[b[i] < n ? b[i] : n - 1].value);
        /* Nearest centroid: the boundary is the first value above the
         * midpoint (not before the previous boundary); the values are
         * sorted, so a binary search finds it. */
        for (i = 1, j = 0; i < clusters; i++) {
            j = anyprec_quantize_above(q, j, n, 0.5 * (c[i - 1] + c[i]));
            changed |= b[i] != j;
            b[i] = j;
        }
        if (!changed)
            break;
    }
    for (i = 0; i < clusters; i++)
        c[i] = anyprec_quantize_mean(q, b[i], b[i + 1], q->items[b[i] < n ? b[i] : n - 1].value);
}

static void anyprec_quantize_split_level(anyprec_quantize_work *q, unsigned level)
{
    size_t clusters = (size_t)1 << level, i, s;
    const size_t *b = q->bounds[level];
    size_t *child = q->bounds[level + 1];
    const double *c = q->centroids[level];
    double *cc = q->centroids[level + 1];
    for (i = 0; i < clusters; i++) {
        size_t lo = b[i], hi = b[i + 1], best = hi;
        double best_cost = 0.0;
        for (s = lo + 1; s < hi; s++) {
            double cost = anyprec_quantize_cost(q, lo, s) + anyprec_quantize_cost(q, s, hi);
            if (best == hi || cost < best_cost) {
                best = s;
                best_cost = cost;
            }
        }
        child[2 * i] = lo;
        child[2 * i + 1] = best;
        child[2 * i + 2] = hi;
        cc[2 * i] = anyprec_quantize_mean(q, lo, best, c[i]);
        cc[2 * i + 1] = anyprec_quantize_mean(q, best, hi, c[i]);
    }
}

/* The k-bit code's place in the stored table: plane p (code bit k-1-p)
 * is index bit p. */
static size_t anyprec_quantize_index(size_t code, unsigned k)
{
    size_t index = 0;
    unsigned p;
    for (p = 0; p < k; p++)
        index |= ((code >> (k - 1 - p)) & 1u) << p;
    return index;
}

/* Centroids as scale * entry + offset with entries 0..max spanning the
 * row's smallest to largest centroid, max = 127 from 4 bits on and 63 below
 * (pmpd_anyprec_table_max): error at most 1/254 (1/126) of that span.
 * scale_at and offset_at may be unaligned (the caller's buffer). */
static void anyprec_quantize_store_table(const double *centroids, unsigned bits, unsigned char *scale_at,
                                         unsigned char *offset_at, unsigned char *table)
{
    size_t i, entries = (size_t)1 << bits;
    double lo = centroids[0], hi = centroids[0], top = pmpd_anyprec_table_max(bits);
    float scale, offset;
    for (i = 1; i < entries; i++) {
        lo = centroids[i] < lo ? centroids[i] : lo;
        hi = centroids[i] > hi ? centroids[i] : hi;
    }
    scale = (float)((hi - lo) / top);
    offset = (float)lo;
    memcpy(scale_at, &scale, sizeof scale);
    memcpy(offset_at, &offset, sizeof offset);
    for (i = 0; i < entries; i++) {
        double v = hi > lo ? (centroids[i] - lo) / (hi - lo) * top : 0.0;
        table[anyprec_quantize_index(i, bits)] = (unsigned char)lrint(v < 0.0 ? 0.0 : v);
    }
}

static void anyprec_quantize_row(anyprec_quantize_work *q, const float *row, const float *importance, size_t n,
                                 unsigned seed_bits, unsigned parent_bits, const pmpd_anyprec_layout *layout,
                                 const pmpd_anyprec_matrix *m, unsigned char *out, uint32_t r)
{
    size_t i, j, clusters = (size_t)1 << parent_bits;
    unsigned k, p;
    uint32_t s;
    pmpd_anyprec_sort_row(row, n, q->order, q->sort_scratch);
    for (i = 0; i < n; i++) {
        uint32_t col = q->order[i];
        q->items[i].value = row[col];
        q->items[i].weight = importance ? importance[col] : 1.0f;
        q->items[i].col = col;
    }
    q->sum_w[0] = q->sum_wv[0] = q->sum_wvv[0] = 0.0;
    for (i = 0; i < n; i++) {
        double w = q->items[i].weight, v = q->items[i].value;
        q->sum_w[i + 1] = q->sum_w[i] + w;
        q->sum_wv[i + 1] = q->sum_wv[i] + w * v;
        q->sum_wvv[i + 1] = q->sum_wvv[i] + w * v * v;
    }
    anyprec_quantize_seed(q, n, seed_bits);
    for (k = seed_bits; k < parent_bits; k++)
        anyprec_quantize_split_level(q, k);
    for (k = seed_bits; k <= parent_bits; k++)
        anyprec_quantize_store_table(q->centroids[k], k, out + layout->width_offset[k] + r * sizeof(float),
                                     out + layout->offset_offset[k] + r * sizeof(float),
                                     out + layout->table_offset[k] + ((size_t)r << k));
    for (i = 0; i < clusters; i++)
        for (j = q->bounds[parent_bits][i]; j < q->bounds[parent_bits][i + 1]; j++)
            q->codes[q->items[j].col] = (unsigned char)i;
    /* Cleared first, all planes: planes 0 and 1 may share a slice.  Only
     * the row's own bytes: a shared partial superblock holds other rows'
     * between them (anyprec.h), which other threads may be writing.  The
     * view's pointers are const; the bytes are ours to write. */
    for (p = 0; p < parent_bits; p++)
        for (s = 0; s < m->superblocks; s++) {
            unsigned char *block = (unsigned char *)(uintptr_t)pmpd_anyprec_block(m, p, r, s);
            size_t h, span = s < m->full ? PMPD_ANYPREC_GROUP : m->tail_span;
            for (h = 0; h < pmpd_anyprec_super_bytes(m->paired, p); h += PMPD_ANYPREC_GROUP)
                memset(block + h, 0, span);
        }
    /* Bits in column order: each superblock's bytes are written in one
     * place instead of scattered in value order. */
    for (p = 0; p < parent_bits; p++) {
        unsigned shift = parent_bits - 1 - p;
        uint32_t c;
        for (c = 0; c < n; c++) {
            unsigned slot = pmpd_anyprec_slot(m, c, &s);
            unsigned char *block = (unsigned char *)(uintptr_t)pmpd_anyprec_block(m, p, r, s);
            block[q->place_byte[p][slot]] |= (unsigned char)(((q->codes[c] >> shift) & 1u) << q->place_bit[p][slot]);
        }
    }
}

static void anyprec_quantize_free(anyprec_quantize_work *q)
{
    unsigned k;
    free(q->items);
    free(q->order);
    free(q->sort_scratch);
    free(q->codes);
    free(q->sum_w);
    free(q->sum_wv);
    free(q->sum_wvv);
    for (k = 0; k <= PMPD_ANYPREC_MAX_BITS; k++) {
        free(q->bounds[k]);
        free(q->centroids[k]);
    }
}

static void anyprec_quantize_header(unsigned char *out, uint64_t rows, uint64_t cols, unsigned seed_bits,
                                    unsigned parent_bits)
{
    unsigned i;
    memset(out, 0, PMPD_ANYPREC_HEADER_BYTES);
    memcpy(out, "ANYP", 4);
    out[4] = (unsigned char)seed_bits;
    out[5] = (unsigned char)parent_bits;
    out[6] = PMPD_ANYPREC_VERSION;
    for (i = 0; i < 4; i++) {
        out[8 + i] = (unsigned char)(rows >> (8 * i));
        out[12 + i] = (unsigned char)(cols >> (8 * i));
    }
}

PMPD_INTERNAL pmpd_status pmpd_anyprec_quantize_rows(const float *w, uint64_t rows, uint64_t cols,
                                                     const float *importance, unsigned seed_bits,
                                                     unsigned parent_bits, uint64_t row_begin, uint64_t row_end,
                                                     void *out, size_t out_size, int write_header)
{
    anyprec_quantize_work *q;
    pmpd_anyprec_layout layout;
    pmpd_status status;
    size_t n, r, i;
    unsigned k;
    if (!w || !out)
        return PMPD_ERR_INVALID_ARGUMENT;
    status = pmpd_anyprec_compute_layout(rows, cols, seed_bits, parent_bits, PMPD_ANYPREC_VERSION, &layout);
    if (status != PMPD_OK)
        return status;
    if (out_size < layout.total || row_begin > row_end || row_end > rows)
        return PMPD_ERR_INVALID_ARGUMENT;
    /* A call that does not write the header reads it: it must be the
     * header this call would write (the layout follows its version). */
    if (!write_header) {
        const unsigned char *h = (const unsigned char *)out;
        if (memcmp(h, "ANYP", 4) != 0 || h[4] != seed_bits || h[5] != parent_bits || h[6] != PMPD_ANYPREC_VERSION)
            return PMPD_ERR_INVALID_ARGUMENT;
    }
    n = (size_t)cols;
    if (importance)
        for (i = 0; i < n; i++)
            if (!(importance[i] > 0.0f) || !isfinite(importance[i]))
                return PMPD_ERR_INVALID_ARGUMENT;
    for (r = (size_t)row_begin; r < (size_t)row_end; r++)
        for (i = 0; i < n; i++)
            if (!isfinite(w[r * n + i]))
                return PMPD_ERR_FORMAT_NONFINITE;
    q = (anyprec_quantize_work *)calloc(1, sizeof *q);
    if (!q)
        return PMPD_ERR_OUT_OF_MEMORY;
    q->items = (anyprec_quantize_item *)malloc(n * sizeof *q->items);
    q->order = (uint32_t *)malloc(n * sizeof *q->order);
    q->sort_scratch = (uint64_t *)malloc(2 * n * sizeof *q->sort_scratch);
    q->codes = (unsigned char *)malloc(n);
    q->sum_w = (double *)malloc((n + 1) * sizeof(double));
    q->sum_wv = (double *)malloc((n + 1) * sizeof(double));
    q->sum_wvv = (double *)malloc((n + 1) * sizeof(double));
    status = q->items && q->order && q->sort_scratch && q->codes && q->sum_w && q->sum_wv && q->sum_wvv
                 ? PMPD_OK
                 : PMPD_ERR_OUT_OF_MEMORY;
    for (k = seed_bits; k <= parent_bits && status == PMPD_OK; k++) {
        q->bounds[k] = (size_t *)malloc((((size_t)1 << k) + 1) * sizeof(size_t));
        q->centroids[k] = (double *)malloc(((size_t)1 << k) * sizeof(double));
        if (!q->bounds[k] || !q->centroids[k])
            status = PMPD_ERR_OUT_OF_MEMORY;
    }
    if (status == PMPD_OK) {
        pmpd_anyprec_matrix m;
        unsigned p, c, bit;
        if (write_header)
            anyprec_quantize_header((unsigned char *)out, rows, cols, seed_bits, parent_bits);
        pmpd_anyprec_bind(out, rows, cols, &m);
        for (p = 0; p < parent_bits; p++)
            for (c = 0; c < PMPD_ANYPREC_SUPER; c++) {
                q->place_byte[p][c] = (unsigned short)pmpd_anyprec_bit_place(m.paired, p, c, &bit);
                q->place_bit[p][c] = (unsigned char)bit;
            }
        for (r = (size_t)row_begin; r < (size_t)row_end; r++)
            anyprec_quantize_row(q, w + r * n, importance, n, seed_bits, parent_bits, &layout, &m,
                                 (unsigned char *)out, (uint32_t)r);
    }
    anyprec_quantize_free(q);
    free(q);
    return status;
}

pmpd_status pmpd_anyprec_quantize(const float *w, uint64_t rows, uint64_t cols, const float *importance,
                                  unsigned seed_bits, unsigned parent_bits, uint64_t row_begin,
                                  uint64_t row_end, void *out, size_t out_size)
{
    /* The call that starts at row 0 writes the header; calls on other rows
     * read it. */
    return pmpd_anyprec_quantize_rows(w, rows, cols, importance, seed_bits, parent_bits, row_begin, row_end, out,
                                      out_size, row_begin == 0);
}

#undef ANYPREC_QUANTIZE_LLOYD_ROUNDS
