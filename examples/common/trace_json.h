/* Writes a session's schedule trace (pmpd_session_trace) as Chrome trace
 * JSON ("Trace Event Format": complete events, one track per thread),
 * which chrome://tracing, Perfetto and speedscope display. */
#ifndef PMPD_EXAMPLES_TRACE_JSON_H
#define PMPD_EXAMPLES_TRACE_JSON_H

#include <stdio.h>

#include "pmpd.h"

/* 0 on success; on failure a message on stderr naming path, and nonzero.
 * The file is written whole or not at all (temporary name, then rename). */
int example_trace_write(const pmpd_session *session, unsigned n_threads, const char *path);

#endif
