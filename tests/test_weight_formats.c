/* The table of weight formats (pmpd_impl/weights/format.h): every type of
 * the file format has exactly one row, names round-trip through the public
 * API, and for every format the converter writes, the row's product
 * (linear) agrees with a brute-force product over the row's own
 * dequantized weights (row) on stories260K's matrices, whose 172-column
 * feed-forward rows end in a partial group.  A row wired to another
 * format's kernels, or a kernel that disagrees with its format's layout,
 * fails here. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pmpd.h"
#include "pmpd_impl/exec/pool.h"
#include "pmpd_impl/model/linear.h"
#include "pmpd_impl/model/model.h"
#include "pmpd_impl/offline/quant/quant.h"
#include "pmpd_impl/offline/w8a8/w8a8_build.h"
#include "pmpd_impl/offline/weights/encoders.h"
#include "pmpd_impl/weights/format.h"
#include "pmpd_impl/weights/nuq/nuq.h"
#include "pmpd_impl/weights/vq/vq.h"
#include "pmpd_impl/weights/w8a8/w8a8.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

/* Every value of pmpd_tensor_type the file format defines. */
static const pmpd_tensor_type all_types[] = {PMPD_TENSOR_F32,  PMPD_TENSOR_F16,     PMPD_TENSOR_Q8,   PMPD_TENSOR_Q4,
                                             PMPD_TENSOR_Q2CB, PMPD_TENSOR_ANYPREC, PMPD_TENSOR_W8A8, PMPD_TENSOR_NUQ,
                                             PMPD_TENSOR_VQ2,  PMPD_TENSOR_TCQ};
#define N_TYPES (sizeof all_types / sizeof all_types[0])

static int is_defined_type(size_t id)
{
    size_t i;
    for (i = 0; i < N_TYPES; i++)
        if ((size_t)all_types[i] == id)
            return 1;
    return 0;
}

static void test_one_row_per_type(void **state)
{
    size_t i, j;
    pmpd_tensor_type parsed = PMPD_TENSOR_F16;
    (void)state;
    for (i = 0; i < N_TYPES; i++) {
        const pmpd_weight_format *f = pmpd_weight_format_of(all_types[i]);
        const char *name = pmpd_tensor_type_name(all_types[i]);
        assert_non_null(f);
        assert_int_equal(f->type, all_types[i]);
        assert_non_null(name);
        assert_string_equal(name, f->name);
        /* A product, in one step or in two (prepare, rows, shares). */
        assert_true(f->linear ? !f->prepare && !f->rows && !f->shares : f->prepare && f->rows && f->shares);
        assert_non_null(f->row);
        assert_int_equal(pmpd_tensor_type_from_name(name, &parsed), PMPD_OK);
        assert_int_equal(parsed, all_types[i]);
        assert_ptr_equal(pmpd_weight_format_named(name), f);
        /* The converter writes every format the runtime reads. */
        assert_non_null(pmpd_weight_encoder_of(all_types[i]));
        for (j = 0; j < i; j++)
            assert_string_not_equal(name, pmpd_tensor_type_name(all_types[j]));
    }
    /* Ids no format has, and names nobody defined. */
    for (i = 0; i < 300; i++) {
        if (is_defined_type(i))
            continue;
        assert_null(pmpd_weight_format_of((uint32_t)i));
        assert_null(pmpd_tensor_type_name((pmpd_tensor_type)i));
        assert_null(pmpd_weight_encoder_of((uint32_t)i));
    }
    parsed = PMPD_TENSOR_F16;
    assert_int_equal(pmpd_tensor_type_from_name("q3", &parsed), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_tensor_type_from_name("Q4", &parsed), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_tensor_type_from_name("", &parsed), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_tensor_type_from_name(NULL, &parsed), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_tensor_type_from_name("q4", NULL), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(parsed, PMPD_TENSOR_F16);
}

static void test_sizes_follow_the_shape(void **state)
{
    uint64_t dims[2] = {5, 33}, bytes = 0, vector[1] = {7};
    (void)state;
    assert_int_equal(pmpd_weight_tensor_bytes(PMPD_TENSOR_F32, 2, dims, &bytes), PMPD_OK);
    assert_int_equal(bytes, 5 * 33 * 4);
    assert_int_equal(pmpd_weight_tensor_bytes(PMPD_TENSOR_F16, 1, vector, &bytes), PMPD_OK);
    assert_int_equal(bytes, 7 * 2);
    /* q4: 2 row blocks x 2 groups of 72 bytes (qformat.h). */
    assert_int_equal(pmpd_weight_tensor_bytes(PMPD_TENSOR_Q4, 2, dims, &bytes), PMPD_OK);
    assert_int_equal(bytes, 2 * 2 * 72);
    /* Group-quantized layouts interleave rows: vectors have none. */
    assert_int_equal(pmpd_weight_tensor_bytes(PMPD_TENSOR_Q8, 1, vector, &bytes), PMPD_ERR_FORMAT_SHAPE);
    /* Nested tensors describe their own size. */
    assert_int_equal(pmpd_weight_tensor_bytes(PMPD_TENSOR_ANYPREC, 2, dims, &bytes), PMPD_ERR_FORMAT_VALUE);
    assert_int_equal(pmpd_weight_tensor_bytes(99, 2, dims, &bytes), PMPD_ERR_FORMAT_VALUE);
    dims[0] = 0;
    assert_int_equal(pmpd_weight_tensor_bytes(PMPD_TENSOR_F32, 2, dims, &bytes), PMPD_ERR_FORMAT_SHAPE);
    dims[0] = UINT64_MAX / 2;
    assert_int_equal(pmpd_weight_tensor_bytes(PMPD_TENSOR_F32, 2, dims, &bytes), PMPD_ERR_FORMAT_SHAPE);
}

static unsigned char pool_memory[1 << 14];
/* Scratch is 64-byte aligned by contract (model/linear.h). */
static unsigned char scratch_memory[(1 << 16) + 64];


/* |rotated weight k of row r| of a NUQ (nm bound) or VQ (vm bound) tensor. */
static double rotated_magnitude(const pmpd_tensor *t, const pmpd_nuq_matrix *nm, const pmpd_vq_matrix *vm, size_t r,
                                size_t k)
{
    if (t->type == PMPD_TENSOR_NUQ)
        return nm->scale[r] * fabs(pmpd_nuq_levels(nm->bits)[pmpd_nuq_get(nm->index + r * nm->row_bytes, k, nm->bits)]);
    return vm->scale[r] * pmpd_vq_unit(vm->pair_bits) *
           fabs((double)pmpd_vq_book(vm->pair_bits)[2 * pmpd_vq_get(vm->index + r * vm->row_bytes, k / 2,
                                                                    vm->pair_bits) + k % 2]);
}

/* The largest error int8 activations in groups of 32 (scale absmax/127,
 * round to nearest) can add to sum_c w[c] x[c]: half a step per element.
 * Nested weights also round each group's scale to an integer multiple of a
 * per-superblock unit (at most 4096 steps): allow twice that. */
static double activation_bound(const float *w, const float *x, size_t cols, double slack)
{
    double bound = 0;
    size_t g, c;
    for (g = 0; g < cols; g += 32) {
        double absmax = 0, weight = 0;
        for (c = g; c < cols && c < g + 32; c++) {
            absmax = fabs(x[c]) > absmax ? fabs(x[c]) : absmax;
            weight += fabs(w[c]);
        }
        bound += slack * absmax / 254.0 * weight;
    }
    return bound;
}

static void check_matrix(const pmpd_tensor *t, pmpd_pool *pool, test_rng *rng)
{
    const pmpd_weight_format *f = pmpd_weight_format_of(t->type);
    size_t rows = (size_t)t->dims[0], cols = (size_t)t->dims[1], r, c, need = 0;
    float *w = (float *)malloc(rows * cols * sizeof(float));
    float *x = (float *)malloc(cols * sizeof(float));
    float *y = (float *)malloc(rows * sizeof(float));
    int float_weights = t->type == PMPD_TENSOR_F32 || t->type == PMPD_TENSOR_F16;
    pmpd_w8a8_matrix w8a8;
    assert_non_null(w);
    assert_non_null(x);
    assert_non_null(y);
    for (r = 0; r < rows; r++)
        f->row(t, r, w + r * cols);
    /* W8A8 activations saturate beyond 127 steps of the tensor's static
     * scale: keep them inside its calibrated range. */
    if (t->type == PMPD_TENSOR_W8A8)
        pmpd_w8a8_bind(t->data, t->dims[0], t->dims[1], &w8a8);
    for (c = 0; c < cols; c++)
        x[c] = test_rng_normal(rng) * (t->type == PMPD_TENSOR_W8A8 ? 30.0f * w8a8.activation_scale : 1.0f);
    unsigned char *scratch = (unsigned char *)test_aligned(scratch_memory);
    assert_int_equal(pmpd_linear_scratch_bytes(t, 1, 1, &need), PMPD_OK);
    assert_true(need <= 1 << 16);
    pmpd_linear(t, x, 1, y, scratch, pool, 0);
    for (r = 0; r < rows; r++) {
        double exact = 0, magnitude = 0, bound;
        for (c = 0; c < cols; c++) {
            exact += (double)w[r * cols + c] * x[c];
            magnitude += fabs((double)w[r * cols + c] * x[c]);
        }
        bound = 1e-5 * magnitude + 1e-30;
        if (t->type == PMPD_TENSOR_W8A8) {
            double weight = 0;
            for (c = 0; c < cols; c++)
                weight += fabs(w[r * cols + c]);
            bound += 0.5 * w8a8.activation_scale * weight; /* half a step per element */
        } else if (t->type == PMPD_TENSOR_NUQ || t->type == PMPD_TENSOR_VQ2) {
            /* Float rounding relative to the norms (the rotation keeps
             * them), plus the int8 activations' half step per rotated
             * column times the row's rotated weights (VQ's input steps
             * are NUQ's, reordered within blocks). */
            double wn = 0, xn = 0;
            pmpd_nuq_matrix nm;
            pmpd_vq_matrix vm;
            pmpd_rotated rotated;
            float *act;
            const float *d;
            size_t k;
            for (c = 0; c < cols; c++) {
                wn += (double)w[r * cols + c] * w[r * cols + c];
                xn += (double)x[c] * x[c];
            }
            if (t->type == PMPD_TENSOR_NUQ) {
                pmpd_nuq_bind(t->data, t->dims[0], t->dims[1], &nm);
                rotated = pmpd_nuq_rotated(&nm);
            } else {
                pmpd_vq_bind(t->data, t->dims[0], t->dims[1], &vm);
                rotated = pmpd_vq_rotated(&vm);
            }
            act = (float *)malloc(pmpd_rotated_act_bytes(&rotated, 1) + rotated.padded * sizeof(float));
            assert_non_null(act);
            pmpd_rotated_prepare_tokens(&rotated, x, 0, 1, 1, act,
                                        act + pmpd_rotated_act_bytes(&rotated, 1) / sizeof(float));
            d = pmpd_rotated_act_d(&rotated, act, 1);
            for (k = 0; k < rotated.rotation; k++)
                bound += 0.5 * d[k / PMPD_ROTATED_BLOCK] * rotated_magnitude(t, &nm, &vm, r, k);
            bound += 1e-5 * sqrt(wn * xn);
            free(act);
        } else if (!float_weights)
            bound += activation_bound(w + r * cols, x, cols, t->type == PMPD_TENSOR_ANYPREC ? 2.0 : 1.0);
        if (fabs(y[r] - exact) > bound)
            fail_msg("%s %.*s row %zu: linear %g, dequantized rows give %g (bound %g)", f->name, (int)t->name_length,
                     t->name, r, (double)y[r], exact, bound);
    }
    /* Formats without their own figure read the whole tensor. */
    if (!f->bytes_read)
        assert_int_equal(pmpd_linear_bytes_read(t, 0), t->size);
    else
        assert_true(pmpd_linear_bytes_read(t, 0) <= t->size);
    free(w);
    free(x);
    free(y);
}

/* q, k, v (and gate, up) as one group give what three (two) separate
 * products give, bit for bit, for 1 and 5 tokens and 2 threads. */
static void check_group(const pmpd_model *m, pmpd_pool *pool, test_rng *rng)
{
    const pmpd_layer_weights *lw = &m->layers[0];
    const pmpd_tensor *qkv[3];
    size_t cols = (size_t)lw->wq->dims[1], n, i, k, total = 0;
    float *x, *alone, *grouped, *out[3];
    unsigned char *scratch = (unsigned char *)test_aligned(scratch_memory);
    qkv[0] = lw->wq, qkv[1] = lw->wk, qkv[2] = lw->wv;
    for (k = 0; k < 3; k++)
        total += (size_t)qkv[k]->dims[0];
    x = (float *)malloc(5 * cols * sizeof(float));
    alone = (float *)malloc(5 * total * sizeof(float));
    grouped = (float *)malloc(5 * total * sizeof(float));
    assert_true(x && alone && grouped);
    for (n = 1; n <= 5; n += 4) {
        size_t need = 0, offset = 0;
        for (k = 0; k < 3; k++) {
            assert_int_equal(pmpd_linear_scratch_bytes(qkv[k], n, 2, &need), PMPD_OK);
            assert_true(need <= 1 << 16);
        }
        for (i = 0; i < n * cols; i++)
            x[i] = test_rng_normal(rng) * 0.1f;
        for (k = 0; k < 3; k++) {
            pmpd_linear(qkv[k], x, n, alone + offset, scratch, pool, 0);
            out[k] = grouped + offset;
            offset += n * (size_t)qkv[k]->dims[0];
        }
        pmpd_linear_group(qkv, 3, x, n, out, scratch, pool, 0);
        assert_memory_equal(alone, grouped, offset * sizeof(float));
    }
    free(x);
    free(alone);
    free(grouped);
}

/* Row counts that are no multiple of 4 (5, 7, 3): the group's rows are
 * laid end to end in blocks of 4, which must not straddle two matrices. */
static void test_group_with_awkward_rows(void **state)
{
    static const size_t rows[3] = {5, 7, 3};
    static const uint32_t types[2] = {PMPD_TENSOR_Q4, PMPD_TENSOR_W8A8};
    /* Enough work (rows x cols x tokens) for the pool to split it. */
    const size_t cols = 1024, n = 16;
    unsigned char *scratch = (unsigned char *)test_aligned(scratch_memory);
    float *w = (float *)malloc(7 * 1024 * sizeof(float)), *x = (float *)malloc(16 * 1024 * sizeof(float));
    float alone[16 * 15], grouped[16 * 15], *out[3];
    pmpd_tensor t[3];
    const pmpd_tensor *group[3];
    void *data[3];
    pmpd_arena arena;
    pmpd_pool *pool = NULL;
    test_rng rng;
    size_t i, k, ti, offset;
    (void)state;
    assert_true(w && x);
    test_rng_seed(&rng, 21);
    pmpd_arena_init(&arena, pool_memory, sizeof pool_memory);
    assert_int_equal(pmpd_pool_create(&arena, 2, 0, &pool), PMPD_OK);
    for (i = 0; i < n * cols; i++)
        x[i] = test_rng_normal(&rng);
    for (ti = 0; ti < 2; ti++) {
        for (k = 0, offset = 0; k < 3; k++) {
            uint64_t dims[2], bytes = 0;
            for (i = 0; i < rows[k] * cols; i++)
                w[i] = test_rng_normal(&rng);
            memset(&t[k], 0, sizeof t[k]);
            t[k].type = types[ti];
            t[k].n_dims = 2;
            t[k].dims[0] = dims[0] = rows[k];
            t[k].dims[1] = dims[1] = cols;
            if (types[ti] == PMPD_TENSOR_W8A8) {
                pmpd_w8a8_layout layout;
                assert_int_equal(pmpd_w8a8_compute_layout(rows[k], cols, 0, &layout), PMPD_OK);
                bytes = layout.total;
                data[k] = malloc((size_t)bytes);
                assert_int_equal(pmpd_w8a8_encode(w, rows[k], cols, 0.05f, NULL, 0, data[k], (size_t)bytes), PMPD_OK);
            } else {
                assert_int_equal(pmpd_weight_tensor_bytes(types[ti], 2, dims, &bytes), PMPD_OK);
                data[k] = malloc((size_t)bytes);
                assert_int_equal(pmpd_quant_matrix(types[ti], w, rows[k], cols, 0, data[k], (size_t)bytes), PMPD_OK);
            }
            t[k].data = data[k];
            t[k].size = bytes;
            group[k] = &t[k];
            pmpd_linear(&t[k], x, n, alone + offset, scratch, pool, 0);
            out[k] = grouped + offset;
            offset += n * rows[k];
        }
        pmpd_linear_group(group, 3, x, n, out, scratch, pool, 0);
        assert_memory_equal(alone, grouped, offset * sizeof(float));
        for (k = 0; k < 3; k++)
            free(data[k]);
    }
    pmpd_pool_destroy(pool);
    free(w);
    free(x);
}

static void test_product_matches_dequantized_rows(void **state)
{
    size_t i, k;
    test_rng rng;
    pmpd_arena arena;
    pmpd_pool *pool = NULL;
    (void)state;
    test_rng_seed(&rng, 14);
    pmpd_arena_init(&arena, pool_memory, sizeof pool_memory);
    /* The worker on the stack size pmpd.h promises is enough. */
    assert_int_equal(pmpd_pool_create(&arena, 2, TEST_WORKER_STACK_BYTES, &pool), PMPD_OK);
    for (i = 0; i < N_TYPES; i++) {
        char path[128];
        test_opened_file o;
        const pmpd_model *m;
        /* TCQ's Viterbi encoder takes seconds natively and minutes under
         * qemu: tests/test_tcq.c checks its products. */
        if (all_types[i] == PMPD_TENSOR_TCQ)
            continue;
        snprintf(path, sizeof path, "/tmp/pmpd-test-formats-%ld-%s.pmpd", (long)getpid(),
                 pmpd_tensor_type_name(all_types[i]));
        assert_int_equal(test_convert_stories(all_types[i], path), PMPD_OK);
        assert_int_equal(test_open_file(path, &o), PMPD_OK);
        unlink(path);
        m = o.model;
        /* Layer 0's matrices (square, 172 columns, 172 rows) and the
         * classifier; under qemu one layer is enough. */
        for (k = 0; k < 7; k++) {
            const pmpd_layer_weights *lw = &m->layers[0];
            const pmpd_tensor *t = k == 0   ? lw->wq
                                   : k == 1 ? lw->wk
                                   : k == 2 ? lw->wo
                                   : k == 3 ? lw->w_up
                                   : k == 4 ? lw->w_down
                                   : k == 5 ? lw->w_gate
                                            : m->classifier;
            check_matrix(t, pool, &rng);
        }
        check_group(m, pool, &rng);
        /* The matrices went to the asked format (the vocabulary to q8 for
         * the quantized ones). */
        assert_int_equal(m->layers[0].w_down->type, all_types[i]);
        test_file_close(&o);
    }
    pmpd_pool_destroy(pool);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_row_per_type),
        cmocka_unit_test(test_sizes_follow_the_shape),
        cmocka_unit_test(test_group_with_awkward_rows),
        cmocka_unit_test(test_product_matches_dequantized_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
