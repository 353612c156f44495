/* The rotated formats' shared header (rotated_build.h). */
#include "pmpd_impl/offline/rotated/rotated_build.h"

#include <string.h>

#include "pmpd_impl/format/le.h"

PMPD_INTERNAL void pmpd_rotated_put_header(unsigned char *out, size_t size, const char *magic, uint32_t version,
                                           size_t rows, size_t cols, unsigned width, size_t rotation,
                                           uint64_t seed)
{
    memset(out, 0, size);
    memcpy(out, magic, 4);
    pmpd_le_put_u32(out + 4, version);
    pmpd_le_put_u32(out + 8, (uint32_t)rows);
    pmpd_le_put_u32(out + 12, (uint32_t)cols);
    pmpd_le_put_u32(out + 16, width);
    pmpd_le_put_u32(out + 20, (uint32_t)rotation);
    pmpd_le_put_u64(out + 24, seed);
}
