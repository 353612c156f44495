#!/bin/sh
# `make check-oracles`: tests whose oracle is another program from npm
# (llama.cpp itself through node-llama-cpp, an independent Llama 3
# tokenizer), pinned in tests/oracle/package.json and installed once into
# BUILD/oracle/npm.  Each tests/oracle/check-*.sh is one test: it gets
#   ORACLE_NPM  the folder holding node_modules/ (run node scripts from it)
#   BUILD       pmpd's build folder (its tools are built before this runs)
#   ORACLE_TMP  a scratch folder of its own
# and exits non-zero on a mismatch.  When the npm registry cannot be reached
# the tests are skipped with a message saying so (never silently); set
# ORACLE_REQUIRED=1 to make that a failure instead.
set -u
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-build}
npm_dir="$BUILD/oracle/npm"

skip() {
    echo "check-oracles: SKIPPED ($1): the llama.cpp and tokenizer oracle tests did not run" >&2
    [ "${ORACLE_REQUIRED:-0}" = 1 ] && exit 1
    exit 0
}

command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || skip "node or npm not installed"
if ! cmp -s "$here/package-lock.json" "$npm_dir/package-lock.json" 2>/dev/null ||
   [ ! -d "$npm_dir/node_modules/node-llama-cpp" ]; then
    echo "check-oracles: installing the pinned npm oracles into $npm_dir"
    rm -rf "$npm_dir" && mkdir -p "$npm_dir"
    cp "$here/package.json" "$here/package-lock.json" "$npm_dir/"
    # npm install, not npm ci: ci refuses this lock, which omits the
    # platform packages npm skipped when it was written.  --ignore-scripts:
    # node-llama-cpp's prebuilt binaries are optional
    # dependencies; its install script would only try to build from source.
    (cd "$npm_dir" && npm install --no-audit --no-fund --ignore-scripts >install.log 2>&1) || {
        tail -5 "$npm_dir/install.log" >&2
        rm -f "$npm_dir/package-lock.json"
        skip "npm install failed: is the npm registry reachable?"
    }
fi
npm_dir=$(cd "$npm_dir" && pwd)

# The checks run JOBS at a time (each is one thread of llama.cpp plus pmpd's
# tools), each into its own log, printed whole in name order.
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 1)}
for test in "$here"/check-*.sh; do
    [ -f "$test" ] || continue
    name=$(basename "$test" .sh)
    rm -rf "$BUILD/oracle/$name" && mkdir -p "$BUILD/oracle/$name"
    printf '%s\n' "$test"
done | ORACLE_NPM="$npm_dir" BUILD="$BUILD" xargs -P "$JOBS" -I{} sh -c '
    tmp="$BUILD/oracle/$(basename "{}" .sh)"
    ORACLE_TMP="$tmp" sh "{}" >"$tmp.log" 2>&1; echo $? >"$tmp.status"'

failed=0 ran=0
for test in "$here"/check-*.sh; do
    [ -f "$test" ] || continue
    name=$(basename "$test" .sh)
    echo "== oracle $name"
    cat "$BUILD/oracle/$name.log"
    if [ "$(cat "$BUILD/oracle/$name.status" 2>/dev/null)" = 0 ]; then
        ran=$((ran + 1))
    else
        echo "== oracle $name: FAILED"
        failed=1
    fi
done
[ $failed = 0 ] || exit 1
echo "check-oracles: $ran passed"
