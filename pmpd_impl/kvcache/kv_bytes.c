/* Bytes per token of every KV-cache storage mode (arena planning, reports). */
#include "pmpd.h"
#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/kvcache/pq_cache.h"
#include "pmpd_impl/kvcache/uniform_quant.h"

pmpd_status pmpd_kv_bytes_per_token(uint32_t kv_type, uint32_t n_kv_heads, uint32_t head_dim,
                                    uint32_t pq_key_sub_dim, uint32_t pq_value_sub_dim, uint32_t pq_bits,
                                    size_t *bytes)
{
    pmpd_pq_layout keys, values;
    size_t per_head;
    if (!bytes || n_kv_heads == 0 || head_dim == 0)
        return PMPD_ERR_INVALID_ARGUMENT;
    switch (kv_type) {
    case PMPD_KV_F32:
        per_head = 2 * (size_t)head_dim * sizeof(float);
        break;
    case PMPD_KV_F16:
        per_head = 2 * (size_t)head_dim * sizeof(uint16_t);
        break;
    case PMPD_KV_PQ:
        if (pmpd_pq_layout_init(&keys, head_dim, pq_key_sub_dim, pq_bits) != PMPD_OK ||
            pmpd_pq_layout_init(&values, head_dim, pq_value_sub_dim, pq_bits) != PMPD_OK)
            return PMPD_ERR_INVALID_ARGUMENT;
        *bytes = pmpd_pq_cache_bytes_per_token(&keys, &values, n_kv_heads);
        return *bytes ? PMPD_OK : PMPD_ERR_OVERFLOW;
    case PMPD_KV_INT8:
        per_head = 2 * pmpd_kv_uniform_row_bytes(head_dim, 8);
        break;
    case PMPD_KV_INT4:
        per_head = 2 * pmpd_kv_uniform_row_bytes(head_dim, 4);
        break;
    default:
        return PMPD_ERR_INVALID_ARGUMENT;
    }
    return pmpd_checked_mul(per_head, n_kv_heads, bytes) ? PMPD_OK : PMPD_ERR_OVERFLOW;
}
