#!/bin/sh
# Prefill rate of the in-order prefill against the out-of-order one
# (prefill_in_flight, docs/prefill.md), interleaved in one run so machine
# drift hits both alike; optionally beside llama.cpp's llama-bench on a GGUF
# of the same model.
#
#   sh bench/prefill-order.sh MODEL.pmpd [MODEL2.pmpd ...]
#
# Environment:
#   BUILD        where pmpd-run is (default build)
#   THREADS      thread counts (default "1 2")
#   IN_FLIGHT    --in-flight values; 1 = in order (default "1 2 3")
#   EXTRA        more pmpd-run options per configuration, ';'-separated
#                (e.g. "--in-flight 2 --float-threads 1"; default none)
#   ROUNDS       rounds, each running every configuration once (default 2)
#   TOKENS       prompt lengths in tokens (default 512; e.g. "64 512 1024")
#   PROMPT       prompt text file (default README.md)
#   LLAMA_GGUF   a GGUF of the same model for llama.cpp, timed beside by
#   LLAMA_BENCH  a llama-bench binary, or
#   LLAMA_NPM    the folder make bench-compare installs node-llama-cpp in
#                (build/bench-compare/npm)
set -eu
BUILD=${BUILD:-build}
THREADS=${THREADS:-"1 2"}
IN_FLIGHT=${IN_FLIGHT:-"1 2 3"}
EXTRA=${EXTRA:-}
ROUNDS=${ROUNDS:-2}
TOKENS=${TOKENS:-512}
PROMPT=${PROMPT:-README.md}
[ $# -ge 1 ] || { echo "usage: sh bench/prefill-order.sh MODEL.pmpd ..." >&2; exit 2; }

rate() { # MODEL THREADS OPTIONS... -> tokens/s
    model=$1 threads=$2
    shift 2
    # shellcheck disable=SC2068  # options are words
    "$BUILD/pmpd-run" "$model" --prompt-file "$PROMPT" --prompt-tokens "$tokens" -n 1 -t 0 --threads "$threads" $@ \
        2>&1 >/dev/null | sed -n 's/.*prefill \([0-9.]*\) tokens\/s.*/\1/p'
}

llama_rate() { # THREADS -> tokens/s
    if [ -n "${LLAMA_BENCH:-}" ]; then
        "$LLAMA_BENCH" -m "$LLAMA_GGUF" -p "$tokens" -n 0 -t "$1" -r 1 -o csv 2>/dev/null |
            awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { h = $i; gsub(/"/, "", h); if (h == "avg_ts") c = i }; next } c { gsub(/"/, "", $c); print $c }'
    else
        node "$LLAMA_NPM/llamacpp-bench.mjs" "$LLAMA_GGUF" prefill "$1" "$PROMPT" "$tokens" |
            sed -n 's/.*"rate":\([0-9.e+-]*\).*/\1/p'
    fi
}

printf 'round\ttokens\tthreads\tmodel\tconfiguration\tprefill tokens/s\n'
round=1
while [ "$round" -le "$ROUNDS" ]; do
    for tokens in $TOKENS; do
        for threads in $THREADS; do
            if [ -n "${LLAMA_BENCH:-}${LLAMA_NPM:-}" ]; then
                printf '%s\t%s\t%s\t%s\tllama.cpp\t%s\n' "$round" "$tokens" "$threads" "$(basename "$LLAMA_GGUF")" \
                    "$(llama_rate "$threads")"
            fi
            for model in "$@"; do
                for f in $IN_FLIGHT; do
                    printf '%s\t%s\t%s\t%s\t--in-flight %s\t%s\n' "$round" "$tokens" "$threads" "$(basename "$model")" \
                        "$f" "$(rate "$model" "$threads" --in-flight "$f")"
                done
                if [ -n "$EXTRA" ]; then
                    echo "$EXTRA" | tr ';' '\n' | while read -r options; do
                        [ -n "$options" ] || continue
                        # shellcheck disable=SC2086  # options are words
                        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$tokens" "$threads" "$(basename "$model")" \
                            "$options" "$(rate "$model" "$threads" $options)"
                    done
                fi
            done
        done
    done
    round=$((round + 1))
done
