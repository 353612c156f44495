#include "pmpd.h"

const char *pmpd_strerror(pmpd_status status)
{
    switch (status) {
    case PMPD_OK: return "ok";
    case PMPD_ERR_INVALID_ARGUMENT: return "invalid argument";
    case PMPD_ERR_OUT_OF_MEMORY: return "arena exhausted";
    case PMPD_ERR_OVERFLOW: return "size arithmetic overflow";
    case PMPD_ERR_IO: return "input/output error";
    case PMPD_ERR_NOT_FOUND: return "file not found";
    case PMPD_ERR_UNSUPPORTED: return "not supported by this build or platform";
    case PMPD_ERR_THREAD: return "thread creation failed";
    case PMPD_ERR_BUDGET: return "budget below the cheapest choice";
    case PMPD_ERR_FORMAT_MAGIC: return "bad magic number";
    case PMPD_ERR_FORMAT_VERSION: return "unsupported format version";
    case PMPD_ERR_FORMAT_TRUNCATED: return "truncated input";
    case PMPD_ERR_FORMAT_CHECKSUM: return "checksum mismatch";
    case PMPD_ERR_FORMAT_BOUNDS: return "offset or size out of bounds";
    case PMPD_ERR_FORMAT_ALIGNMENT: return "misaligned data";
    case PMPD_ERR_FORMAT_OVERLAP: return "overlapping regions";
    case PMPD_ERR_FORMAT_VALUE: return "invalid field value";
    case PMPD_ERR_FORMAT_SHAPE: return "invalid tensor shape";
    case PMPD_ERR_FORMAT_DUPLICATE: return "duplicate entry";
    case PMPD_ERR_FORMAT_MISSING: return "missing required entry";
    case PMPD_ERR_FORMAT_HPARAMS: return "inconsistent hyperparameters";
    case PMPD_ERR_FORMAT_NONFINITE: return "non-finite value";
    case PMPD_ERR_FORMAT_REQUIRED_SECTION: return "unknown required section";
    case PMPD_ERR_CONTEXT_FULL: return "context window full";
    case PMPD_ERR_TOKEN_RANGE: return "token id out of range";
    case PMPD_ERR_STATE: return "invalid session state";
    }
    return "unknown status";
}
