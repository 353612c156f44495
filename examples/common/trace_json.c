#include "examples/common/trace_json.h"

#include <string.h>

#include "pmpd_impl/core/error.h"
#include "pmpd_impl/offline/format/atomic_file.h"

/* Tensor names are file bytes: anything but printable ASCII is escaped. */
static void trace_json_string(FILE *f, const char *s, size_t length)
{
    size_t i;
    fputc('"', f);
    for (i = 0; i < length; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c > 0x7e)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static int trace_json_body(FILE *f, const pmpd_trace_event *events, size_t count, size_t dropped, unsigned n_threads)
{
    uint64_t origin = UINT64_MAX;
    size_t i;
    unsigned t;
    for (i = 0; i < count; i++)
        if (events[i].begin_ns < origin)
            origin = events[i].begin_ns;
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"dropped_events\":%zu},\"traceEvents\":[\n", dropped);
    for (t = 0; t < n_threads; t++)
        fprintf(f, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":%u,\"args\":{\"name\":\"%s %u\"}},\n", t,
                t == 0 ? "caller" : "worker", t);
    for (i = 0; i < count; i++) {
        const pmpd_trace_event *e = &events[i];
        fputs("{\"ph\":\"X\",\"pid\":1,\"name\":", f);
        trace_json_string(f, e->name, e->name_length);
        fprintf(f, ",\"cat\":\"%s\",\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f", e->category, (unsigned)e->thread,
                (double)(e->begin_ns - origin) * 1e-3, (double)(e->end_ns - e->begin_ns) * 1e-3);
        if (e->layer != PMPD_TRACE_NO_LAYER && e->chunk != PMPD_TRACE_NO_CHUNK)
            fprintf(f, ",\"args\":{\"layer\":%u,\"chunk\":%u}", (unsigned)e->layer, (unsigned)e->chunk);
        else if (e->layer != PMPD_TRACE_NO_LAYER)
            fprintf(f, ",\"args\":{\"layer\":%u}", (unsigned)e->layer);
        fputs(i + 1 < count ? "},\n" : "}\n", f);
    }
    fputs("]}\n", f);
    return ferror(f) ? -1 : 0;
}

int example_trace_write(const pmpd_session *session, unsigned n_threads, const char *path)
{
    const pmpd_trace_event *events;
    size_t count, dropped;
    pmpd_atomic_file out;
    pmpd_error err;
    pmpd_status st = pmpd_session_trace(session, &events, &count, &dropped);
    if (st == PMPD_OK)
        st = pmpd_atomic_open(&out, path, &err);
    else
        pmpd_error_set(&err, st, PMPD_NO_OFFSET, "%s", pmpd_strerror(st));
    if (st == PMPD_OK) {
        st = trace_json_body(out.f, events, count, dropped, n_threads) != 0
                 ? pmpd_error_set(&err, PMPD_ERR_IO, PMPD_NO_OFFSET, "cannot write %s", out.tmp)
                 : PMPD_OK;
        st = pmpd_atomic_finish(&out, st, &err);
    }
    if (st != PMPD_OK)
        fprintf(stderr, "pmpd-run: --trace %s: %s\n", path, err.message);
    else if (dropped)
        fprintf(stderr, "pmpd-run: --trace %s: %zu events written, %zu more did not fit\n", path, count, dropped);
    return st != PMPD_OK;
}
