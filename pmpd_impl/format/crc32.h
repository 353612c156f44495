#ifndef PMPD_FORMAT_CRC32_H
#define PMPD_FORMAT_CRC32_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd_impl/core/config.h"

/* Continues a CRC-32 over size more bytes; start with crc = 0.
 * pmpd_crc32_update(0, "123456789", 9) == 0xCBF43926. */
PMPD_INTERNAL uint32_t pmpd_crc32_update(uint32_t crc, const void *data, size_t size);

#endif
