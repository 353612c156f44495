#!/bin/sh
# Writes the single-header library to standard output: pmpd.h, then the
# whole implementation inside #ifdef PMPD_IMPLEMENTATION.
#
# Every internal header is emitted once, before any source file and outside
# any #if of theirs (a header first included inside a platform's #if block
# must still reach the other platforms).  Then the sources follow with their
# quoted includes removed.  Order is fixed: core, the other runtime folders
# alphabetically, platform ports, offline tools last (under #if PMPD_OFFLINE).
# Needs only POSIX sh, find, sort and awk.
set -eu
cd "$(dirname "$0")/../.."

runtime=$( { find pmpd_impl/core -name '*.c' | sort;
             find pmpd_impl -name '*.c' ! -path 'pmpd_impl/core/*' ! -path 'pmpd_impl/offline/*' | sort;
             find platform -name '*.c' | sort; } )
offline=$(find pmpd_impl/offline -name '*.c' 2>/dev/null | sort)

awk -v runtime="$runtime" -v offline="$offline" '
function is_include(line) {
    return line ~ /^[ \t]*#[ \t]*include[ \t]*"/
}
function include_target(line,    inc) {
    inc = line
    sub(/^[^"]*"/, "", inc)
    sub(/".*$/, "", inc)
    return inc
}
function check_readable(path,    line) {
    if ((getline line < path) < 0) {
        print "amalgamate: cannot read " path > "/dev/stderr"
        exit 1
    }
    close(path)
}
# Emits the headers path includes (recursively), each once.
function emit_headers_of(path,    line, n, i, incs) {
    check_readable(path)
    n = 0
    while ((getline line < path) > 0)
        if (is_include(line))
            incs[++n] = include_target(line)
    close(path)
    for (i = 1; i <= n; i++)
        emit_header(incs[i])
}
function emit_header(path,    line) {
    if (path in done)
        return
    done[path] = 1
    emit_headers_of(path)
    print "/* ---- " path " ---- */"
    while ((getline line < path) > 0)
        if (!is_include(line))
            print line
    close(path)
}
function emit_source(path,    line) {
    print "/* ---- " path " ---- */"
    while ((getline line < path) > 0)
        if (!is_include(line))
            print line
    close(path)
}
BEGIN {
    print "#if defined(PMPD_IMPLEMENTATION) && !defined(_POSIX_C_SOURCE) && (defined(__unix__) || defined(__APPLE__))"
    print "/* The POSIX port needs mmap and clock_gettime even under -std=c99. */"
    print "#define _POSIX_C_SOURCE 200809L"
    print "#endif"
    while ((getline line < "pmpd.h") > 0)
        print line
    close("pmpd.h")
    done["pmpd.h"] = 1
    print ""
    print "#ifdef PMPD_IMPLEMENTATION"
    print "#ifndef PMPD_IMPLEMENTATION_INCLUDED"
    print "#define PMPD_IMPLEMENTATION_INCLUDED"
    print "#define PMPD_AMALGAMATION 1"
    print "#if defined(__GNUC__)"
    print "#pragma GCC diagnostic push"
    print "#pragma GCC diagnostic ignored \"-Wunused-function\""
    print "#endif"
    nr = split(runtime, rfiles, "\n")
    no = split(offline, ofiles, "\n")
    for (i = 1; i <= nr; i++)
        if (rfiles[i] != "")
            emit_headers_of(rfiles[i])
    for (i = 1; i <= no; i++)
        if (ofiles[i] != "")
            emit_headers_of(ofiles[i])
    for (i = 1; i <= nr; i++)
        if (rfiles[i] != "")
            emit_source(rfiles[i])
    print "#if PMPD_OFFLINE"
    for (i = 1; i <= no; i++)
        if (ofiles[i] != "")
            emit_source(ofiles[i])
    print "#endif /* PMPD_OFFLINE */"
    print "#if defined(__GNUC__)"
    print "#pragma GCC diagnostic pop"
    print "#endif"
    print "#endif /* PMPD_IMPLEMENTATION_INCLUDED */"
    print "#endif /* PMPD_IMPLEMENTATION */"
}'
