/* The input ranges W8A8 calibrates from (offline/w8a8/w8a8_ranges.c), on
 * the real trained pycode21M: every linear layer of every block is seen,
 * with the number of values a prefill of the calibration text gives; the
 * quantiles are ordered and bounded by the absmax, which equals the
 * largest channel absmax; and the choice of hot channels follows its rule
 * (checked against the channel ranges by brute force).  Prints the table
 * docs/w8a8.md's outlier statistics come from. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd.h"
#include "pmpd_impl/offline/w8a8/w8a8_build.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

static int by_value(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static void test_pycode_ranges(void **state)
{
    test_opened_model m;
    pmpd_calibration_config config;
    pmpd_w8a8_ranges ranges;
    uint32_t i, c;
    (void)state;
    if (test_reduced())
        skip(); /* a 21.7M-parameter f32 model under qemu/ASan: the native run covers it */
    assert_int_equal(test_open_shared("models/pycode21M.bin", "models/llama2_tokenizer.bin", PMPD_TENSOR_F32, &m),
                     PMPD_OK);
    pmpd_calibration_config_init(&config);
    config.n_prompts = 8;
    config.prompt_length = 8;
    config.output_length = 24;
    assert_int_equal(pmpd_w8a8_ranges_collect(m.model, &config, &ranges), PMPD_OK);
    /* 6 blocks x 7 matrices and the classifier. */
    assert_int_equal(ranges.n, 6 * 7 + 1);
    print_message("pycode21M linear inputs (%u prompts x %u tokens):\n", config.n_prompts,
                  config.prompt_length + config.output_length);
    print_message("  tensor                    absmax   p99.9   absmax/p99.9  max/median channel  hot\n");
    for (i = 0; i < ranges.n; i++) {
        const pmpd_w8a8_range *r = &ranges.ranges[i];
        float *sorted = (float *)malloc((size_t)r->head.cols * sizeof(float)), p999 = pmpd_w8a8_range_quantile(r, 0.999);
        float p99 = pmpd_w8a8_range_quantile(r, 0.99), largest = 0.0f;
        pmpd_w8a8_choice choice;
        uint32_t expected_hot = 0;
        assert_non_null(sorted);
        /* Every block matrix saw every calibration token once (the prompts
         * carry a BOS beyond prompt_length); the classifier only each
         * prompt's last position. */
        assert_int_equal(r->values % r->head.cols, 0);
        if (strncmp(r->head.name, "blk.", 4) == 0) {
            assert_int_equal(r->values / r->head.cols, ranges.ranges[0].values / ranges.ranges[0].head.cols);
            assert_true(r->values / r->head.cols >=
                        (uint64_t)config.n_prompts * (config.prompt_length + config.output_length));
        } else {
            assert_int_equal(r->values / r->head.cols, config.n_prompts);
        }
        assert_true(p99 <= p999 && p999 <= r->absmax && p99 > 0.0f);
        for (c = 0; c < r->head.cols; c++)
            largest = r->channel_absmax[c] > largest ? r->channel_absmax[c] : largest;
        assert_true(largest == r->absmax);
        memcpy(sorted, r->channel_absmax, (size_t)r->head.cols * sizeof(float));
        qsort(sorted, (size_t)r->head.cols, sizeof(float), by_value);
        for (c = 0; c < r->head.cols; c++)
            expected_hot += (double)r->channel_absmax[c] > PMPD_W8A8_OUTLIER_RATIO * (double)sorted[r->head.cols / 2];
        if (expected_hot > r->head.cols / 32)
            expected_hot = (uint32_t)(r->head.cols / 32);
        assert_int_equal(pmpd_w8a8_choose(r, 1, PMPD_W8A8_OUTLIER_RATIO, &choice), PMPD_OK);
        assert_int_equal(choice.n_hot, expected_hot);
        for (c = 0; c < choice.n_hot; c++)
            assert_true((double)r->channel_absmax[choice.hot[c]] > PMPD_W8A8_OUTLIER_RATIO * (double)sorted[r->head.cols / 2]);
        print_message("  %-24s %8.3f %7.3f %10.1f %14.1f %10u\n", r->head.name, (double)r->absmax, (double)p999,
                      (double)(r->absmax / p999), (double)(sorted[r->head.cols - 1] / sorted[r->head.cols / 2]),
                      (unsigned)choice.n_hot);
        free(choice.hot);
        free(sorted);
    }
    pmpd_w8a8_ranges_free(&ranges);
    test_opened_close(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pycode_ranges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
