#!/bin/sh
# Decode tokens/s of pmpd q4, nested 2-bit and the static 4/3/2 schedule at
# several thread counts, on a synthetic model made on the machine itself
# (for a lent many-core host: it needs only a C compiler and make), and
# optionally the same from an older source tree, alternated round by round.
#
#   sh bench/decode-scaling.sh            from the repository root
#   THREADS      thread counts (default "1 4 8 16")
#   ROUNDS       rounds (default 2)
#   OLD          an older pmpd source tree to build and time beside this one
#                (e.g. from `git archive REV | tar -x -C DIR`), or empty
#   TOKENIZER    llama2.c tokenizer.bin (default ../shared/models/llama2_tokenizer.bin)
#   MKGGUF_ARGS  shape options for pmpd-mkgguf (default: TinyLlama-1.1B's shape)
#   WORK         where the models go (default /tmp/pmpd-decode-scaling)
# Prints one line per round, thread count and tree: tokens/s of q4, nested
# 2-bit and static 4/3/2 (pmpd-run MODEL -n 128 -t 0 --ignore-eos from BOS).
set -e
THREADS=${THREADS:-1 4 8 16}
ROUNDS=${ROUNDS:-2}
TOKENIZER=${TOKENIZER:-../shared/models/llama2_tokenizer.bin}
WORK=${WORK:-/tmp/pmpd-decode-scaling}
JOBS=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
make -j"$JOBS" build/pmpd-run build/pmpd-convert build/pmpd-mkgguf >/dev/null
[ -z "$OLD" ] || make -C "$OLD" -j"$JOBS" build/pmpd-run >/dev/null
mkdir -p "$WORK"
# shellcheck disable=SC2086
build/pmpd-mkgguf "$WORK/f16.gguf" --type f16 --tokenizer "$TOKENIZER" $MKGGUF_ARGS >/dev/null
build/pmpd-convert "$WORK/f16.gguf" "$WORK/q4.pmpd" --type q4 --threads "$JOBS" >/dev/null
build/pmpd-convert "$WORK/f16.gguf" "$WORK/nested.pmpd" --type anyprec --bits 2:4 --threads "$JOBS" >/dev/null
rm -f "$WORK/f16.gguf"
cat "$WORK/q4.pmpd" "$WORK/nested.pmpd" >/dev/null
rate() { # pmpd-run model threads [options]
    run=$1 model=$2 threads=$3
    shift 3
    "$run" "$WORK/$model" -n 128 -t 0 --ignore-eos --threads "$threads" "$@" 2>&1 >/dev/null |
        sed -n 's/.*decode \([0-9.]*\) tokens\/s.*/\1/p'
}
for r in $(seq "$ROUNDS"); do
    for t in $THREADS; do
        for tree in . $OLD; do
            run=$tree/build/pmpd-run
            echo "round $r threads $t tree $tree: q4 $(rate "$run" q4.pmpd "$t")" \
                "nested-2bit $(rate "$run" nested.pmpd "$t" --bits 4:2)" \
                "static-4/3/2 $(rate "$run" nested.pmpd "$t" --schedule 4:4,3,2)"
        done
    done
done
