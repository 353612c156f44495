/* The KV bytes a session holds, for pmpd_session_kv_bytes. */
#include "pmpd.h"
#include "pmpd_impl/model/kv_cache.h"
#include "pmpd_impl/model/session.h"

pmpd_status pmpd_session_kv_bytes(const pmpd_session *session, size_t *bytes)
{
    if (!session || !bytes)
        return PMPD_ERR_INVALID_ARGUMENT;
    if (session->live != PMPD_SESSION_LIVE)
        return PMPD_ERR_STATE;
    *bytes = pmpd_kv_cache_bytes_in_use(&session->kv, session->position);
    return PMPD_OK;
}
