/* The layers' input moments and their LDLQ factors (hessian.h). */
#include "pmpd_impl/offline/ldlq/hessian.h"

#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/core/error.h"
#include "pmpd_impl/core/hadamard.h"
#include "pmpd_impl/offline/format/from_model.h"
#include "pmpd_impl/offline/precision/calibration_session.h"
#include "pmpd_impl/weights/rotated/rotated.h"

/* A hash of an input's bytes: matrices whose inputs hash alike in
 * consecutive calls read one input (q, k, v; gate, up: the forward pass
 * hands the observer the same floats once per matrix). */
static uint64_t hessian_checksum(const float *x, size_t n)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    size_t i;
    for (i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, x + i, sizeof bits);
        h = (h ^ bits) * UINT64_C(0x100000001b3);
    }
    return h;
}

/* x (n_tokens rows of cols) into set->columns as cols rows of n_tokens
 * doubles, the buffer grown as needed; 0 when out of memory. */
static int hessian_transpose(pmpd_hessian_set *set, const float *x, size_t n_tokens, size_t cols)
{
    size_t t, c;
    if (n_tokens * cols > set->column_capacity) {
        double *grown = (double *)realloc(set->columns, n_tokens * cols * sizeof *grown);
        if (!grown)
            return 0;
        set->columns = grown;
        set->column_capacity = n_tokens * cols;
    }
    for (t = 0; t < n_tokens; t++)
        for (c = 0; c < cols; c++)
            set->columns[c * n_tokens + t] = x[t * cols + c];
    return 1;
}

static void hessian_observe(void *context, const pmpd_tensor *w, const float *x, size_t n_tokens)
{
    pmpd_hessian_set *set = (pmpd_hessian_set *)context;
    pmpd_hessian *h;
    size_t cols = (size_t)w->dims[1], t, i, j;
    uint64_t sum;
    uint32_t index;
    int created;
    if (set->status != PMPD_OK)
        return;
    h = (pmpd_hessian *)pmpd_tensor_record_of((void **)&set->records, &set->n, &set->capacity, sizeof *set->records, w,
                                              &created);
    if (!h) {
        set->status = PMPD_ERR_OUT_OF_MEMORY;
        return;
    }
    index = (uint32_t)(h - set->records);
    sum = hessian_checksum(x, n_tokens * cols);
    if (created) {
        const pmpd_hessian *last = set->last < set->n ? &set->records[set->last] : NULL;
        if (last && last->head.cols == cols && last->checksum == sum) {
            h->owner = last->owner;
        } else {
            h->owner = index;
            h->moment = (double *)calloc(cols * cols, sizeof *h->moment);
            if (!h->moment) {
                set->status = PMPD_ERR_OUT_OF_MEMORY;
                return;
            }
        }
    }
    h->checksum = sum;
    h->tokens += n_tokens;
    set->last = index;
    if (h->owner != index)
        return;
    /* The upper triangle (pmpd_hessian_collect_set mirrors it), a column
     * pair's dot product over the tokens at a time from the transposed
     * input: a token at a time would stream the whole moment (4 MB at
     * 1024 columns) through the cache once per token. */
    if (!hessian_transpose(set, x, n_tokens, cols)) {
        set->status = PMPD_ERR_OUT_OF_MEMORY;
        return;
    }
    for (i = 0; i < cols; i++) {
        const double *xi = set->columns + i * n_tokens;
        double *row = h->moment + i * cols;
        for (j = i; j < cols; j++) {
            const double *xj = set->columns + j * n_tokens;
            double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
            for (t = 0; t + 4 <= n_tokens; t += 4) {
                s0 += xi[t] * xj[t];
                s1 += xi[t + 1] * xj[t + 1];
                s2 += xi[t + 2] * xj[t + 2];
                s3 += xi[t + 3] * xj[t + 3];
            }
            for (; t < n_tokens; t++)
                s0 += xi[t] * xj[t];
            row[j] += (s0 + s1) + (s2 + s3);
        }
    }
}

PMPD_INTERNAL pmpd_status pmpd_hessian_collect_set(const pmpd_model *model, const pmpd_calibration_set *text,
                                                   unsigned threads, pmpd_hessian_set *set)
{
    pmpd_status st;
    uint32_t i;
    memset(set, 0, sizeof *set);
    set->last = UINT32_MAX;
    st = pmpd_calibration_observe(model, text, threads, hessian_observe, set, &set->status);
    for (i = 0; i < set->n && st == PMPD_OK; i++) {
        pmpd_hessian *h = &set->records[i];
        const size_t cols = (size_t)h->head.cols;
        size_t r, c;
        if (h->owner != i || h->tokens == 0)
            continue;
        for (r = 0; r < cols; r++)
            for (c = r; c < cols; c++) {
                const double mean = h->moment[r * cols + c] / (double)h->tokens;
                h->moment[r * cols + c] = mean;
                h->moment[c * cols + r] = mean;
            }
    }
    return st;
}

/* n_sequences windows of length tokens cut from text: BOS, then length -
 * 1 consecutive tokens of the text (the last as the set's reference). */
static pmpd_status hessian_text_windows(const pmpd_model *model, const char *text, size_t text_length,
                                        uint32_t n_sequences, uint32_t length, pmpd_calibration_set *set,
                                        pmpd_error *err)
{
    const size_t need = (size_t)n_sequences * (length - 1);
    const size_t scratch_bytes = 24 * (text_length + 3) + 64;
    size_t n_tokens = 0, s;
    int32_t *tokens = (int32_t *)malloc((text_length + 2) * sizeof *tokens);
    void *block = malloc(scratch_bytes);
    pmpd_arena scratch;
    pmpd_status st = tokens && block ? PMPD_OK : PMPD_ERR_OUT_OF_MEMORY;
    if (st == PMPD_OK)
        st = pmpd_arena_init(&scratch, (char *)block + (64 - (uintptr_t)block % 64) % 64, scratch_bytes - 64);
    if (st == PMPD_OK)
        st = pmpd_tokenize_text(model, text, text_length, 0, tokens, text_length + 2, &n_tokens, &scratch);
    free(block);
    if (st != PMPD_OK) {
        free(tokens);
        return pmpd_error_set(err, st, PMPD_NO_OFFSET, "cannot tokenize LDLQ's calibration text");
    }
    if (n_tokens < need) {
        free(tokens);
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                              "LDLQ's calibration text gives %zu tokens; %u sequences of %u need %zu", n_tokens,
                              (unsigned)n_sequences, (unsigned)length, need);
    }
    memset(set, 0, sizeof *set);
    set->n_prompts = n_sequences;
    set->prompt_length = length - 1;
    set->output_length = 1;
    set->vocab_size = pmpd_model_get_info(model)->vocab_size;
    set->prompts = (int32_t *)malloc((size_t)n_sequences * (length - 1) * sizeof *set->prompts);
    set->reference = (int32_t *)malloc((size_t)n_sequences * sizeof *set->reference);
    if (!set->prompts || !set->reference) {
        free(tokens);
        return pmpd_error_set(err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory");
    }
    for (s = 0; s < n_sequences; s++) {
        const int32_t *from = tokens + s * (length - 1);
        set->prompts[s * (length - 1)] = (int32_t)pmpd_model_get_info(model)->bos_id;
        memcpy(set->prompts + s * (length - 1) + 1, from, (length - 2) * sizeof *from);
        set->reference[s] = from[length - 2];
    }
    free(tokens);
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_hessian_collect(const pmpd_build_model *b, uint32_t n_sequences, uint32_t length,
                                               const char *text, size_t text_length, uint64_t seed,
                                               unsigned threads, pmpd_hessian_set *set, pmpd_error *err)
{
    pmpd_build_opened opened;
    pmpd_calibration_config config;
    pmpd_calibration_set windows;
    uint32_t context;
    pmpd_status st;
    memset(set, 0, sizeof *set);
    memset(&windows, 0, sizeof windows);
    if (n_sequences == 0 || length < 2)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                              "LDLQ needs at least one calibration sequence of at least 2 tokens");
    st = pmpd_build_open(b, &opened, err);
    if (st != PMPD_OK)
        return st;
    context = pmpd_model_get_info(opened.model)->seq_len;
    if (length > context) {
        pmpd_build_close(&opened);
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                              "LDLQ's sequences of %u tokens exceed the model's context of %u", (unsigned)length,
                              (unsigned)context);
    }
    if (text) {
        st = hessian_text_windows(opened.model, text, text_length, n_sequences, length, &windows, err);
    } else {
        pmpd_calibration_config_init(&config);
        config.n_prompts = n_sequences;
        config.prompt_length = length - 2; /* sampled after BOS; the last token is the greedy one */
        config.output_length = 1;
        config.seed = seed;
        st = pmpd_calibration_set_sample(opened.model, &config, PMPD_CALIBRATION_TRAIN, &windows);
        if (st != PMPD_OK)
            pmpd_error_set(err, st, PMPD_NO_OFFSET, "cannot sample LDLQ's calibration text (%u x %u tokens)",
                           (unsigned)n_sequences, (unsigned)length);
    }
    if (st == PMPD_OK) {
        st = pmpd_hessian_collect_set(opened.model, &windows, threads, set);
        if (st != PMPD_OK)
            pmpd_error_set(err, st, PMPD_NO_OFFSET, "cannot run the float model over LDLQ's calibration text");
    }
    pmpd_calibration_set_free(&windows);
    pmpd_build_close(&opened);
    return st;
}

PMPD_INTERNAL const double *pmpd_hessian_find(const pmpd_hessian_set *set, const char *name, uint64_t cols)
{
    uint32_t i;
    if (!set)
        return NULL;
    for (i = 0; i < set->n; i++)
        if (set->records[i].head.cols == cols && strcmp(set->records[i].head.name, name) == 0)
            return set->records[set->records[i].owner].moment;
    return NULL;
}

/* Where a block size's factor lives in a record. */
static unsigned hessian_slot(size_t block)
{
    return block == 1 ? 0 : block == 2 ? 1 : 2;
}

/* moment (cols x cols) in the rotated domain: R H R^T, R the rotation of
 * a row (rotated.h: pmpd_rotated_rotate), into out (rotation x rotation);
 * each side rotated a row at a time. */
static pmpd_status hessian_rotate(const double *moment, size_t cols, uint64_t seed, double *out, size_t rotation)
{
    const size_t padded = (rotation + PMPD_ROTATED_BLOCK - 1) / PMPD_ROTATED_BLOCK * PMPD_ROTATED_BLOCK;
    const pmpd_rotated r = pmpd_rotated_make(cols, rotation, padded, seed);
    float *in = (float *)malloc(cols * sizeof *in), *v = (float *)malloc(padded * sizeof *v);
    double *half = (double *)malloc(cols * rotation * sizeof *half); /* H R^T */
    size_t i, c;
    if (!in || !v || !half) {
        free(in);
        free(v);
        free(half);
        return PMPD_ERR_OUT_OF_MEMORY;
    }
    for (i = 0; i < cols; i++) {
        for (c = 0; c < cols; c++)
            in[c] = (float)moment[i * cols + c];
        pmpd_rotated_rotate(&r, in, v);
        for (c = 0; c < rotation; c++)
            half[i * rotation + c] = v[c];
    }
    for (c = 0; c < rotation; c++) {
        for (i = 0; i < cols; i++)
            in[i] = (float)half[i * rotation + c];
        pmpd_rotated_rotate(&r, in, v);
        for (i = 0; i < rotation; i++)
            out[i * rotation + c] = v[i];
    }
    for (i = 0; i < rotation; i++) /* symmetric again after float rounding */
        for (c = i + 1; c < rotation; c++)
            out[i * rotation + c] = out[c * rotation + i] = 0.5 * (out[i * rotation + c] + out[c * rotation + i]);
    free(in);
    free(v);
    free(half);
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_hessian_factors(pmpd_hessian_set *set, size_t block, uint64_t seed, pmpd_error *err)
{
    uint32_t i;
    for (i = 0; i < set->n; i++) {
        pmpd_hessian *h = &set->records[i];
        const size_t cols = (size_t)h->head.cols, rotation = pmpd_hadamard_size(cols);
        pmpd_ldlq *f = &h->factors[hessian_slot(block)];
        double *rotated;
        pmpd_status st;
        if (h->owner != i || !h->moment || f->n)
            continue;
        if (rotation == 0 || rotation > SIZE_MAX / sizeof(double) / rotation)
            return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET, "%s has no rotation size",
                                  h->head.name);
        rotated = (double *)malloc(rotation * rotation * sizeof *rotated);
        st = rotated ? hessian_rotate(h->moment, cols, seed, rotated, rotation) : PMPD_ERR_OUT_OF_MEMORY;
        if (st == PMPD_OK)
            st = pmpd_ldlq_factor(rotated, rotation, block, f);
        free(rotated);
        if (st != PMPD_OK)
            return pmpd_error_set(err, st, PMPD_NO_OFFSET, "cannot factor the input moment of %s for LDLQ",
                                  h->head.name);
    }
    return PMPD_OK;
}

PMPD_INTERNAL const pmpd_ldlq *pmpd_hessian_factor(const pmpd_hessian_set *set, const char *name, uint64_t cols,
                                                   size_t block)
{
    uint32_t i;
    if (!set)
        return NULL;
    for (i = 0; i < set->n; i++)
        if (set->records[i].head.cols == cols && strcmp(set->records[i].head.name, name) == 0) {
            const pmpd_ldlq *f = &set->records[set->records[i].owner].factors[hessian_slot(block)];
            return f->n && f->block == block ? f : NULL;
        }
    return NULL;
}

PMPD_INTERNAL void pmpd_hessian_free(pmpd_hessian_set *set)
{
    uint32_t i, s;
    for (i = 0; i < set->n; i++) {
        free(set->records[i].moment);
        for (s = 0; s < 3; s++)
            pmpd_ldlq_free(&set->records[i].factors[s]);
    }
    free(set->records);
    free(set->columns);
    memset(set, 0, sizeof *set);
}
