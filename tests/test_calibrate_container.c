/* pmpd-calibrate's path (pmpd_schedule_calibrate_file) on .pmpd inputs:
 * f16 layers are quantized (the float model is the reference) and the KV
 * codebooks and tokenizer come through byte for byte; nested layers are
 * kept byte for byte (calibrated at their widest width) and earlier
 * schedule sections are replaced, not duplicated; other weight types are
 * refused with an error naming the type, and nothing is written.  Small
 * calibration sets: the solvers' quality is test_schedule_solver's job. */
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
#include "pmpd_impl/model/model.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

static void tmp_path(char *out, size_t size, const char *what)
{
    snprintf(out, size, "/tmp/pmpd-test-calcont-%ld-%s.pmpd", (long)getpid(), what);
}

static void open_model(const char *path, test_opened_file *o)
{
    assert_int_equal(test_open_file(path, o), PMPD_OK);
}

static void convert(uint32_t type, const char *out)
{
    assert_int_equal(test_convert_stories(type, out), PMPD_OK);
}

static void small_options(pmpd_schedule_calibration_options *o)
{
    pmpd_schedule_calibration_options_init(o);
    /* As small as the solvers allow: under qemu every evaluation is slow. */
    o->sets.n_prompts = 2;
    o->sets.prompt_length = 3;
    o->sets.output_length = 8;
    o->candidates = 2;
    o->learned.epochs = 3;
    o->learned.hidden = 8;
}

static const pmpd_section *find_section(const pmpd_model *m, uint32_t kind, uint32_t *count)
{
    const pmpd_section *found = NULL;
    uint32_t i;
    *count = 0;
    for (i = 0; i < m->n_sections; i++)
        if (m->sections[i].kind == kind) {
            found = &m->sections[i];
            ++*count;
        }
    return found;
}

static void assert_same_section(const pmpd_model *a, const pmpd_model *b, uint32_t kind)
{
    uint32_t na, nb;
    const pmpd_section *sa = find_section(a, kind, &na), *sb = find_section(b, kind, &nb);
    assert_int_equal(na, 1);
    assert_int_equal(nb, 1);
    assert_true(sa->size == sb->size);
    assert_int_equal(sa->version, sb->version);
    assert_memory_equal(sa->data, sb->data, (size_t)sa->size);
}

static void assert_has_schedules(const pmpd_model *m)
{
    uint32_t n;
    assert_non_null(find_section(m, PMPD_SECTION_PRECISION_SCHEDULE, &n));
    assert_int_equal(n, 1);
    assert_non_null(find_section(m, PMPD_SECTION_LEARNED_SCHEDULER, &n));
    assert_int_equal(n, 1);
}

/* f16 layers with KV codebooks -> nested, codebooks and tokenizer intact;
 * then that nested output again -> the same tensors, schedules replaced. */
static void test_float_then_nested_container(void **state)
{
    char f16[128], pq[128], nested[128], again[128];
    pmpd_pq_calibration_options pq_options;
    pmpd_schedule_calibration_options o;
    pmpd_schedule_calibration_report r;
    pmpd_error err;
    test_opened_file in, out, twice;
    uint32_t i;
    (void)state;
    tmp_path(f16, sizeof f16, "f16");
    tmp_path(pq, sizeof pq, "f16pq");
    tmp_path(nested, sizeof nested, "nested");
    tmp_path(again, sizeof again, "again");
    convert(PMPD_TENSOR_F16, f16);
    pmpd_pq_calibration_options_init(&pq_options);
    pq_options.n_sequences = 1;
    pq_options.sequence_length = 32;
    pq_options.iterations = 2;
    assert_int_equal(pmpd_pq_calibrate_file(f16, pq, &pq_options, NULL), PMPD_OK);
    small_options(&o);
    assert_int_equal(pmpd_schedule_calibrate_file(pq, nested, &o, &r, &err), PMPD_OK);
    assert_int_equal(r.calibrated_on, PMPD_CALIBRATED_ON_FLOAT);
    assert_int_equal(r.input_type, PMPD_TENSOR_F16);
    assert_int_equal(r.n_rows, 6);
    open_model(pq, &in);
    open_model(nested, &out);
    assert_int_equal(out.model->layers[0].wq->type, PMPD_TENSOR_ANYPREC);
    assert_int_equal(out.model->tok_embedding->type, PMPD_TENSOR_Q8);
    assert_same_section(in.model, out.model, PMPD_SECTION_KV_CODEBOOKS);
    assert_same_section(in.model, out.model, PMPD_SECTION_TOKENIZER);
    assert_has_schedules(out.model);

    assert_int_equal(pmpd_schedule_calibrate_file(nested, again, &o, &r, &err), PMPD_OK);
    assert_int_equal(r.calibrated_on, PMPD_CALIBRATED_ON_WIDEST);
    assert_int_equal(r.seed_bits, 2);
    assert_int_equal(r.parent_bits, 4);
    open_model(again, &twice);
    assert_int_equal(twice.model->n_tensors, out.model->n_tensors);
    for (i = 0; i < out.model->n_tensors; i++) {
        assert_true(twice.model->tensors[i].size == out.model->tensors[i].size);
        assert_memory_equal(twice.model->tensors[i].data, out.model->tensors[i].data,
                            (size_t)out.model->tensors[i].size);
    }
    assert_same_section(out.model, twice.model, PMPD_SECTION_KV_CODEBOOKS);
    assert_has_schedules(twice.model);
    assert_int_equal(twice.model->n_sections, out.model->n_sections);
    test_file_close(&in);
    test_file_close(&out);
    test_file_close(&twice);
    remove(f16);
    remove(pq);
    remove(nested);
    remove(again);
}

static void test_errors_name_the_reason(void **state)
{
    char q4[128], out[128], nested[128];
    pmpd_schedule_calibration_options o;
    pmpd_error err;
    (void)state;
    tmp_path(q4, sizeof q4, "q4");
    tmp_path(out, sizeof out, "never");
    tmp_path(nested, sizeof nested, "anyprec");
    convert(PMPD_TENSOR_Q4, q4);
    small_options(&o);
    assert_int_equal(pmpd_schedule_calibrate_file(q4, out, &o, NULL, &err), PMPD_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.message, "blk.0.attn_q.weight is q4"));
    assert_int_equal(access(out, F_OK), -1);
    convert(PMPD_TENSOR_ANYPREC, nested);
    o.seed_bits = 3;
    o.parent_bits = 4;
    assert_int_equal(pmpd_schedule_calibrate_file(nested, out, &o, NULL, &err), PMPD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "widths 2:4"));
    o.seed_bits = o.parent_bits = 0;
    o.tokenizer_path = "tok512.bin";
    assert_int_equal(pmpd_schedule_calibrate_file(nested, out, &o, NULL, &err), PMPD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "carries its own tokenizer"));
    o.tokenizer_path = NULL;
    o.weighted = 1;
    assert_int_equal(pmpd_schedule_calibrate_file(nested, out, &o, NULL, &err), PMPD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "already nested"));
    assert_int_equal(pmpd_schedule_calibrate_file("/nonexistent/in.pmpd", out, &o, NULL, &err), PMPD_ERR_NOT_FOUND);
    assert_non_null(strstr(err.message, "/nonexistent/in.pmpd"));
    assert_int_equal(access(out, F_OK), -1);
    remove(q4);
    remove(nested);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_float_then_nested_container),
        cmocka_unit_test(test_errors_name_the_reason),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
