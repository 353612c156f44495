#include "pmpd_impl/offline/format/tensor_records.h"

#include <stdlib.h>
#include <string.h>

PMPD_INTERNAL void *pmpd_tensor_record_of(void **records, uint32_t *n, uint32_t *capacity, size_t record_size,
                                          const pmpd_tensor *w, int *created)
{
    unsigned char *base = (unsigned char *)*records;
    pmpd_tensor_record *r;
    uint32_t i;
    *created = 0;
    for (i = 0; i < *n; i++)
        if (((const pmpd_tensor_record *)(void *)(base + i * record_size))->key == (const void *)w)
            return base + i * record_size;
    if (*n == *capacity) {
        uint32_t grown = *capacity ? 2 * *capacity : 32;
        base = (unsigned char *)realloc(*records, grown * record_size);
        if (!base)
            return NULL;
        *records = base;
        *capacity = grown;
    }
    r = (pmpd_tensor_record *)(void *)(base + (*n)++ * record_size);
    memset(r, 0, record_size);
    r->key = w;
    r->cols = w->dims[1];
    memcpy(r->name, w->name, w->name_length);
    *created = 1;
    return r;
}
