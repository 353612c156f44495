/* Overflow-checked size arithmetic.  Every size computed from untrusted or
 * caller-given numbers goes through these: each returns 1 and writes the
 * result on success, 0 (leaving *out untouched) when the result does not
 * fit in size_t. */
#ifndef PMPD_CORE_CHECKED_H
#define PMPD_CORE_CHECKED_H

#include <stddef.h>
#include <stdint.h>

static inline int pmpd_checked_add(size_t a, size_t b, size_t *out)
{
    if (a > SIZE_MAX - b)
        return 0;
    *out = a + b;
    return 1;
}

static inline int pmpd_checked_mul(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a)
        return 0;
    *out = a * b;
    return 1;
}

/* Rounds value up to a multiple of align, which must be a power of two. */
static inline int pmpd_checked_align_up(size_t value, size_t align, size_t *out)
{
    size_t mask = align - 1;
    if (value > SIZE_MAX - mask)
        return 0;
    *out = (value + mask) & ~mask;
    return 1;
}

/* a*b*c, the common "rows x cols x element size" shape. */
static inline int pmpd_checked_mul3(size_t a, size_t b, size_t c, size_t *out)
{
    size_t ab;
    return pmpd_checked_mul(a, b, &ab) && pmpd_checked_mul(ab, c, out);
}

/* Same helpers on 64-bit file quantities, independent of size_t's width. */
static inline int pmpd_checked_add_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a > UINT64_MAX - b)
        return 0;
    *out = a + b;
    return 1;
}

static inline int pmpd_checked_mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a != 0 && b > UINT64_MAX / a)
        return 0;
    *out = a * b;
    return 1;
}

/* Narrows a 64-bit file quantity to size_t (fails on 32-bit hosts when the
 * value does not fit). */
static inline int pmpd_checked_u64_to_size(uint64_t v, size_t *out)
{
    if (v > (uint64_t)SIZE_MAX)
        return 0;
    *out = (size_t)v;
    return 1;
}

static inline int pmpd_is_power_of_two(size_t v)
{
    return v != 0 && (v & (v - 1)) == 0;
}

#endif
