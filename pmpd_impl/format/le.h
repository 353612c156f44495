/* Little-endian reads and writes, byte by byte, so file fields are read the
 * same way on any host and at any alignment. */
#ifndef PMPD_FORMAT_LE_H
#define PMPD_FORMAT_LE_H

#include <stdint.h>
#include <string.h>

static inline uint16_t pmpd_le_u16(const unsigned char *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t pmpd_le_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint64_t pmpd_le_u64(const unsigned char *p)
{
    return (uint64_t)pmpd_le_u32(p) | ((uint64_t)pmpd_le_u32(p + 4) << 32);
}

static inline float pmpd_le_f32(const unsigned char *p)
{
    uint32_t bits = pmpd_le_u32(p);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline void pmpd_le_put_u32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

static inline void pmpd_le_put_u64(unsigned char *p, uint64_t v)
{
    pmpd_le_put_u32(p, (uint32_t)v);
    pmpd_le_put_u32(p + 4, (uint32_t)(v >> 32));
}

static inline void pmpd_le_put_f32(unsigned char *p, float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    pmpd_le_put_u32(p, bits);
}

/* Finite test on the bit pattern: no libm, no dependence on -ffast-math. */
static inline int pmpd_f32_bits_finite(uint32_t bits)
{
    return (bits & 0x7F800000u) != 0x7F800000u;
}

static inline int pmpd_host_is_little_endian(void)
{
    const uint32_t probe = 1;
    unsigned char first;
    memcpy(&first, &probe, 1);
    return first == 1;
}

#endif
