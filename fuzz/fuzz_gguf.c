/* GGUF importer; an accepted file is serialized and reopened by the loader. */
#include "fuzz/import_roundtrip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_import_roundtrip(pmpd_import_gguf, data, size);
}
