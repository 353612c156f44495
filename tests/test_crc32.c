/* pmpd_crc32_update against a bit-at-a-time CRC-32 written here from the
 * definition, over every length that reaches a different mix of the paths
 * (table, 128- and 512-bit folding, their tails), at every start offset
 * within 16 bytes, chained at split points around the block sizes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd_impl/format/crc32.h"
#include "tests/support/test_support.h"

/* Long enough for the largest length at the largest offset. */
#define BUFFER_SIZE (((size_t)1 << 20) + 3 + 16)

/* One byte into the shift register (inverted convention, no final xor). */
static uint32_t oracle_byte(uint32_t reg, unsigned char byte)
{
    int k;
    reg ^= byte;
    for (k = 0; k < 8; k++)
        reg = (reg >> 1) ^ (0xEDB88320u & (0u - (reg & 1u)));
    return reg;
}

static uint32_t oracle(const unsigned char *p, size_t n)
{
    uint32_t reg = 0xFFFFFFFFu;
    size_t i;
    for (i = 0; i < n; i++)
        reg = oracle_byte(reg, p[i]);
    return ~reg;
}

static unsigned char *random_buffer(void)
{
    unsigned char *data = malloc(BUFFER_SIZE);
    test_rng rng;
    size_t i;
    assert_non_null(data);
    test_rng_seed(&rng, 20240611);
    for (i = 0; i < BUFFER_SIZE; i++)
        data[i] = (unsigned char)(test_rng_u32(&rng) >> 24);
    return data;
}

static void test_check_value(void **state)
{
    (void)state;
    assert_int_equal(pmpd_crc32_update(0, "123456789", 9), 0xCBF43926u);
    assert_int_equal(pmpd_crc32_update(0, "", 0), 0);
    assert_int_equal(pmpd_crc32_update(0xCBF43926u, "", 0), 0xCBF43926u);
}

/* The CRC of n bytes copied to the very end of an allocation, offset bytes
 * from its (malloc-aligned) start, so a sanitizer sees any read past the
 * end. */
static uint32_t crc_of_copy(const unsigned char *p, size_t n, size_t offset)
{
    unsigned char *copy = malloc(offset + n ? offset + n : 1);
    uint32_t crc;
    assert_non_null(copy);
    memcpy(copy + offset, p, n);
    crc = pmpd_crc32_update(0, copy + offset, n);
    free(copy);
    return crc;
}

/* Every length 0..600 and the selected long ones at every offset 0..15; the
 * oracle runs along the buffer once per offset and is compared at each
 * length it passes. */
static void check_lengths(const unsigned char *data)
{
    static const size_t long_lengths[] = {4095, 4096, 65537, ((size_t)1 << 20) + 3};
    const size_t longs = sizeof long_lengths / sizeof long_lengths[0];
    size_t offset;
    for (offset = 0; offset < 16; offset++) {
        const unsigned char *p = data + offset;
        uint32_t reg = 0xFFFFFFFFu;
        size_t n, next = 0;
        for (n = 0;; n++) {
            int is_long = next < longs && n == long_lengths[next];
            if (n <= 600 || is_long) {
                uint32_t got = is_long ? pmpd_crc32_update(0, p, n) : crc_of_copy(p, n, offset);
                if (got != ~reg)
                    fail_msg("length %zu at offset %zu: 0x%08x, expected 0x%08x", n, offset, (unsigned)got,
                             (unsigned)~reg);
            }
            if (is_long && ++next == longs)
                break;
            reg = oracle_byte(reg, p[n]);
        }
    }
}

static void test_random_lengths_and_offsets(void **state)
{
    unsigned char *data = random_buffer();
    (void)state;
    check_lengths(data);
    free(data);
}

static void test_constant_buffers(void **state)
{
    unsigned char *data = malloc(BUFFER_SIZE);
    (void)state;
    assert_non_null(data);
    memset(data, 0, BUFFER_SIZE);
    check_lengths(data);
    memset(data, 0xFF, BUFFER_SIZE);
    check_lengths(data);
    free(data);
}

/* update(update(0, a), b) == CRC of a || b, the split just around the 16-,
 * 64- and 256-byte blocks so each part ends in a different path and tail. */
static void test_chaining(void **state)
{
    static const size_t splits[] = {0,   1,   3,   15,  16,  17,  31,  32,  33,  63,  64,  65,   127,  128, 129,
                                    191, 192, 193, 255, 256, 257, 319, 320, 321, 511, 512, 513,  767,  768, 769,
                                    1023, 1024, 1025, 2047, 2048, 2049};
    static const size_t totals[] = {64, 300, 1100, 2049, 4096 + 37};
    unsigned char *data = random_buffer();
    size_t t, s, offset;
    (void)state;
    for (t = 0; t < sizeof totals / sizeof totals[0]; t++)
        for (offset = 0; offset < 16; offset += 5) {
            const unsigned char *p = data + offset;
            size_t total = totals[t];
            uint32_t expected = oracle(p, total);
            for (s = 0; s < sizeof splits / sizeof splits[0]; s++) {
                size_t a = splits[s] <= total ? splits[s] : total;
                size_t b = total - a;
                uint32_t head = pmpd_crc32_update(0, p, a);
                assert_int_equal(pmpd_crc32_update(head, p + a, b), expected);
                /* and from the other end, so the second part is the short one */
                head = pmpd_crc32_update(0, p, b);
                assert_int_equal(pmpd_crc32_update(head, p + b, a), expected);
            }
        }
    free(data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_value),
        cmocka_unit_test(test_random_lengths_and_offsets),
        cmocka_unit_test(test_constant_buffers),
        cmocka_unit_test(test_chaining),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
