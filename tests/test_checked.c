/* Overflow-checked size arithmetic at the limits of size_t and uint64_t. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "pmpd_impl/core/checked.h"

static void test_add(void **state)
{
    size_t r = 7;
    (void)state;
    assert_true(pmpd_checked_add(SIZE_MAX - 1, 1, &r));
    assert_true(r == SIZE_MAX);
    assert_false(pmpd_checked_add(SIZE_MAX, 1, &r));
    assert_true(r == SIZE_MAX);
    assert_false(pmpd_checked_add(SIZE_MAX / 2 + 1, SIZE_MAX / 2 + 1, &r));
    assert_true(pmpd_checked_add(0, 0, &r) && r == 0);
}

static void test_mul(void **state)
{
    size_t r = 0, half = (size_t)1 << (sizeof(size_t) * 4);
    (void)state;
    assert_true(pmpd_checked_mul(0, SIZE_MAX, &r) && r == 0);
    assert_true(pmpd_checked_mul(SIZE_MAX, 1, &r) && r == SIZE_MAX);
    assert_true(pmpd_checked_mul(half - 1, half + 1, &r) && r == SIZE_MAX);
    assert_false(pmpd_checked_mul(half, half, &r));
    assert_false(pmpd_checked_mul(SIZE_MAX / 3 + 1, 3, &r));
    assert_true(pmpd_checked_mul3(2, 3, 4, &r) && r == 24);
    assert_false(pmpd_checked_mul3(half, 2, half, &r));
}

static void test_align_up(void **state)
{
    size_t r = 0;
    (void)state;
    assert_true(pmpd_checked_align_up(0, 64, &r) && r == 0);
    assert_true(pmpd_checked_align_up(1, 64, &r) && r == 64);
    assert_true(pmpd_checked_align_up(64, 64, &r) && r == 64);
    assert_true(pmpd_checked_align_up(SIZE_MAX - 63, 64, &r) && r == SIZE_MAX - 63);
    assert_false(pmpd_checked_align_up(SIZE_MAX - 62, 64, &r));
    assert_false(pmpd_checked_align_up(SIZE_MAX, 2, &r));
    assert_true(pmpd_checked_align_up(SIZE_MAX, 1, &r) && r == SIZE_MAX);
}

static void test_u64_and_narrowing(void **state)
{
    uint64_t r = 0;
    size_t s = 0;
    (void)state;
    assert_false(pmpd_checked_add_u64(UINT64_MAX, 1, &r));
    assert_true(pmpd_checked_add_u64(UINT64_MAX - 5, 5, &r) && r == UINT64_MAX);
    assert_false(pmpd_checked_mul_u64(UINT64_C(1) << 32, UINT64_C(1) << 32, &r));
    assert_true(pmpd_checked_mul_u64(UINT64_C(1) << 31, UINT64_C(1) << 32, &r) && r == UINT64_C(1) << 63);
    assert_true(pmpd_checked_u64_to_size((uint64_t)SIZE_MAX, &s) && s == SIZE_MAX);
    if (sizeof(size_t) < sizeof(uint64_t))
        assert_false(pmpd_checked_u64_to_size((uint64_t)SIZE_MAX + 1, &s));
}

static void test_power_of_two(void **state)
{
    (void)state;
    assert_false(pmpd_is_power_of_two(0));
    assert_true(pmpd_is_power_of_two(1));
    assert_true(pmpd_is_power_of_two((size_t)1 << (sizeof(size_t) * 8 - 1)));
    assert_false(pmpd_is_power_of_two(SIZE_MAX));
    assert_false(pmpd_is_power_of_two(96));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add),
        cmocka_unit_test(test_mul),
        cmocka_unit_test(test_align_up),
        cmocka_unit_test(test_u64_and_narrowing),
        cmocka_unit_test(test_power_of_two),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
