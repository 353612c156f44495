/* GGUF v3 importer. */
#include "pmpd_impl/offline/import/import.h"

#include "pmpd_impl/core/error.h"

PMPD_INTERNAL pmpd_status pmpd_import_gguf(const unsigned char *data, size_t size, pmpd_build_model *out,
                                           pmpd_error *err)
{
    (void)data;
    (void)size;
    (void)out;
    return pmpd_error_set(err, PMPD_ERR_UNSUPPORTED, 0, "GGUF import is not implemented yet");
}
