/* Writing GGUF fields to a stream: little-endian scalars, strings as a u64
 * length and bytes, metadata as (key, u32 value type, value).  A failed
 * write marks the stream, and later writes do nothing, so the caller checks
 * once at the end.  Without a FILE the stream only counts, which sizes the
 * metadata before the header that states its length is written. */
#include "pmpd_impl/offline/synth/synth.h"

#include <errno.h>
#include <string.h>

#include "pmpd_impl/format/le.h"

PMPD_INTERNAL void pmpd_gguf_bytes(pmpd_gguf_out *o, const void *data, size_t n)
{
    if (o->failed || n == 0)
        return;
    if (o->f && fwrite(data, 1, n, o->f) != n)
        o->failed = errno > 0 ? errno : -1;
    else
        o->written += n;
}

PMPD_INTERNAL void pmpd_gguf_u32(pmpd_gguf_out *o, uint32_t v)
{
    unsigned char b[4];
    pmpd_le_put_u32(b, v);
    pmpd_gguf_bytes(o, b, sizeof b);
}

PMPD_INTERNAL void pmpd_gguf_u64(pmpd_gguf_out *o, uint64_t v)
{
    unsigned char b[8];
    pmpd_le_put_u64(b, v);
    pmpd_gguf_bytes(o, b, sizeof b);
}

PMPD_INTERNAL void pmpd_gguf_string(pmpd_gguf_out *o, const char *s, size_t n)
{
    pmpd_gguf_u64(o, n);
    pmpd_gguf_bytes(o, s, n);
}

PMPD_INTERNAL void pmpd_gguf_pad(pmpd_gguf_out *o)
{
    static const unsigned char zeros[PMPD_SYNTH_ALIGNMENT];
    pmpd_gguf_bytes(o, zeros, (size_t)((PMPD_SYNTH_ALIGNMENT - o->written % PMPD_SYNTH_ALIGNMENT) % PMPD_SYNTH_ALIGNMENT));
}

static void gguf_key(pmpd_gguf_out *o, const char *key, uint32_t type)
{
    pmpd_gguf_string(o, key, strlen(key));
    pmpd_gguf_u32(o, type);
    o->n_keys++;
}

PMPD_INTERNAL void pmpd_gguf_kv_u32(pmpd_gguf_out *o, const char *key, uint32_t v)
{
    gguf_key(o, key, PMPD_GGUF_UINT32);
    pmpd_gguf_u32(o, v);
}

PMPD_INTERNAL void pmpd_gguf_kv_f32(pmpd_gguf_out *o, const char *key, float v)
{
    unsigned char b[4];
    gguf_key(o, key, PMPD_GGUF_FLOAT32);
    pmpd_le_put_f32(b, v);
    pmpd_gguf_bytes(o, b, sizeof b);
}

PMPD_INTERNAL void pmpd_gguf_kv_bool(pmpd_gguf_out *o, const char *key, int v)
{
    unsigned char b = v ? 1 : 0;
    gguf_key(o, key, PMPD_GGUF_BOOL);
    pmpd_gguf_bytes(o, &b, 1);
}

PMPD_INTERNAL void pmpd_gguf_kv_string(pmpd_gguf_out *o, const char *key, const char *v)
{
    gguf_key(o, key, PMPD_GGUF_STRING);
    pmpd_gguf_string(o, v, strlen(v));
}

PMPD_INTERNAL void pmpd_gguf_kv_array(pmpd_gguf_out *o, const char *key, uint32_t element_type, uint64_t count)
{
    gguf_key(o, key, PMPD_GGUF_ARRAY);
    pmpd_gguf_u32(o, element_type);
    pmpd_gguf_u64(o, count);
}
