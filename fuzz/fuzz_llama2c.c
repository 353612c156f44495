/* llama2.c checkpoint importer (legacy and version 1); an accepted
 * checkpoint is serialized and reopened by the runtime loader. */
#include "fuzz/import_roundtrip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_import_roundtrip(pmpd_import_llama2c, data, size);
}
