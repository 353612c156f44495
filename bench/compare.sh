#!/bin/sh
# make bench-compare: pmpd against llama.cpp on one synthetic Llama model of
# real shape (TinyLlama-1.1B's by default, random weights, the real 32,000-token
# Llama 2 vocabulary), decode and prefill, 1 thread and all cores, pmpd and
# llama.cpp run alternately for ROUNDS rounds; the median of each is reported.
#
# llama.cpp comes from the npm package node-llama-cpp (pinned to 3.22.1 in
# bench/package.json, its dependencies by bench/package-lock.json; installed
# under BUILD/bench-compare/npm with `npm install`, since npm ci refuses a
# lock that lists only this platform's prebuilt binaries), or, with
# LLAMA_BENCH=/path/to/llama-bench, from a natively built llama-bench.
#
# Environment (all optional):
#   BUILD          build tree holding the pmpd tools (default build)
#   ROUNDS         rounds per case (default 3)
#   THREADS        thread counts to time (default "1 <all cores>")
#   MKGGUF_ARGS    shape options for pmpd-mkgguf (default: its TinyLlama shape)
#   TOKENIZER      llama2.c tokenizer.bin for the vocabulary
#                  (default ../shared/models/llama2_tokenizer.bin)
#   PALETTE        the formats of the alloc cases (default q4,q2cb,nuq2,nuq3,nuq4)
#   LLAMA_BENCH    path of a llama-bench binary to time instead of the npm package
#   LLAMA_BENCH_LABEL  what that binary is (snapshot, build flags), for the table
#   MMAP           0 (default): pmpd and llama.cpp both read the weights into
#                  their own memory at start (pmpd-run --no-mmap, llama.cpp
#                  useMmap false); 1: both map the file.  On the 2-core Zen5 VM
#                  mapped weights streamed slower from a file whose page-cache
#                  pages had sat for hours than from fresh memory (pmpd q4 and
#                  nested 1.1-1.5x, llama.cpp 2-7% at 1 thread; a fresh copy of
#                  the file, mapped, was as fast as reading it), so reading
#                  keeps both off that history (docs/figures.md, "Page cache first")
#   CASES          weights to time (default "q4 q8 w8a8 anyprec4 anyprec3 anyprec2 anyprec-static";
#                  add q2cb to time it too: its converter learns codebooks per
#                  tensor, about 1 us per weight on one Zen3 core (pycode21M: 16 s
#                  on 1 thread, 9 s on 2), minutes for the 1.1B model; anyprec-nv4,
#                  -nv3, -nv2 and -nv-static are the nested weights converted with
#                  --vocabulary nested, the classifier nested too, and anyprec-q4v4
#                  .. -q4v-static with --vocabulary q4; allocB, e.g.
#                  alloc3.25, is the bit allocation at B bits per weight over
#                  PALETTE, pmpd-convert --budget-bits B: over an hour on 2 busy
#                  cores for the 1.1B model; allocBflat, e.g. alloc3.25flat, the
#                  same with --palette-flat, no sensitivity run: about 25 minutes;
#                  docs/palette.md)
#
# Writes BUILD/bench-compare.csv (metric,weights,threads,pmpd,llamacpp,ratio)
# and BUILD/bench-compare-bandwidth.csv (the weight bytes each decoded token
# reads, the rate they were read at and the bandwidth probe of the same run).
set -eu

BUILD=${BUILD:-build}
ROUNDS=${ROUNDS:-3}
ALL=$(nproc 2>/dev/null || echo 1)
THREADS=${THREADS:-$( [ "$ALL" -gt 1 ] && echo "1 $ALL" || echo 1 )}
MKGGUF_ARGS=${MKGGUF_ARGS:-}
TOKENIZER=${TOKENIZER:-../shared/models/llama2_tokenizer.bin}
CASES=${CASES:-q4 q8 w8a8 anyprec4 anyprec3 anyprec2 anyprec-static}
PALETTE=${PALETTE:-q4,q2cb,nuq2,nuq3,nuq4}
LLAMA_BENCH=${LLAMA_BENCH:-}
MMAP=${MMAP:-0}
NO_MMAP=
if [ "$MMAP" = 0 ]; then NO_MMAP=--no-mmap; fi
DECODE_TOKENS=128
PREFILL_TOKENS=512
DIR=$BUILD/bench-compare
CSV=$BUILD/bench-compare.csv
BW_CSV=$BUILD/bench-compare-bandwidth.csv
here=$(cd "$(dirname "$0")" && pwd)

say() { printf '%s\n' "$*" >&2; }
die() { say "bench-compare: $*"; exit 1; }

mkdir -p "$DIR"
[ -f "$TOKENIZER" ] || die "$TOKENIZER not found (set TOKENIZER to a llama2.c tokenizer.bin)"
for tool in pmpd-mkgguf pmpd-convert pmpd-run pmpd-bench; do
    [ -x "$BUILD/$tool" ] || die "$BUILD/$tool is missing (run make first)"
done

# ---- llama.cpp -------------------------------------------------------------
if [ -z "$LLAMA_BENCH" ]; then
    command -v node >/dev/null || die "node is needed for node-llama-cpp (or set LLAMA_BENCH)"
    if ! cmp -s "$here/package-lock.json" "$DIR/npm/package-lock.json" 2>/dev/null ||
       [ ! -d "$DIR/npm/node_modules/node-llama-cpp" ]; then
        say "bench-compare: installing node-llama-cpp (pinned) into $DIR/npm"
        rm -rf "$DIR/npm" && mkdir -p "$DIR/npm"
        cp "$here/package.json" "$here/package-lock.json" "$here/llamacpp-bench.mjs" "$DIR/npm/"
        (cd "$DIR/npm" && npm install --no-audit --no-fund --ignore-scripts >/dev/null 2>&1) ||
            die "npm ci failed (is the npm registry reachable?)"
    fi
    cp "$here/llamacpp-bench.mjs" "$DIR/npm/"
    LLAMA_VERSION="node-llama-cpp $(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$DIR/npm/node_modules/node-llama-cpp/package.json")"
else
    [ -x "$LLAMA_BENCH" ] || die "LLAMA_BENCH=$LLAMA_BENCH is not an executable"
    # llama-bench has no --version; say which build it is with LLAMA_BENCH_LABEL.
    LLAMA_VERSION="llama-bench ${LLAMA_BENCH_LABEL:-$LLAMA_BENCH}"
fi

# The prompt: this README, which gives well over 512 tokens.
PROMPT=$DIR/prompt.txt
cp "$here/../README.md" "$PROMPT"

# llama_rate GGUF decode|prefill THREADS -> tokens/s on stdout
# (The variant line is written to a file: llama_rate runs in a subshell.)
VARIANT_FILE=$DIR/llama-variant.txt
: > "$VARIANT_FILE"
llama_rate() {
    if [ -n "$LLAMA_BENCH" ]; then
        if [ "$2" = decode ]; then set -- "$1" "-p 0 -n $DECODE_TOKENS" "$3"; else set -- "$1" "-p $PREFILL_TOKENS -n 0" "$3"; fi
        # shellcheck disable=SC2086  # $2 is two options
        "$LLAMA_BENCH" -m "$1" $2 -t "$3" -mmp "$MMAP" -r 1 -o csv 2>/dev/null |
            awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { h = $i; gsub(/"/, "", h); if (h == "avg_ts") c = i }; next } c { gsub(/"/, "", $c); print $c }'
    else
        tokens=$DECODE_TOKENS
        [ "$2" = prefill ] && tokens=$PREFILL_TOKENS
        out=$(LLAMA_MMAP=$MMAP node "$DIR/npm/llamacpp-bench.mjs" "$1" "$2" "$3" "$PROMPT" "$tokens") ||
            die "llama.cpp run failed: $1 $2 $3"
        printf '%s' "$out" | sed -n 's/.*"variant":"\([^"]*\)".*"release":"\([^"]*\)".*/\1 CPU backend, \2/p' > "$VARIANT_FILE"
        printf '%s' "$out" | sed -n 's/.*"rate":\([0-9.e+-]*\).*/\1/p'
    fi
}

# pmpd_rate MODEL decode|prefill THREADS [pmpd-run options] -> "rate bytes_per_token"
pmpd_rate() {
    model=$1 mode=$2 threads=$3
    shift 3
    if [ "$mode" = decode ]; then
        # shellcheck disable=SC2086  # NO_MMAP is empty or one option
        log=$("$BUILD/pmpd-run" "$model" --prompt-file "$PROMPT" --prompt-tokens 8 -n $DECODE_TOKENS -t 0 \
              --ignore-eos --threads "$threads" $NO_MMAP "$@" 2>&1 >/dev/null) || die "pmpd-run failed: $log"
        rate=$(printf '%s\n' "$log" | sed -n 's/.*decode \([0-9.]*\) tokens\/s.*/\1/p')
        bytes=$(printf '%s\n' "$log" | sed -n 's/^weights: \([0-9]*\) bytes.*/\1/p')
    else
        # shellcheck disable=SC2086
        log=$("$BUILD/pmpd-run" "$model" --prompt-file "$PROMPT" --prompt-tokens $PREFILL_TOKENS -n 1 -t 0 \
              --threads "$threads" $NO_MMAP "$@" 2>&1 >/dev/null) || die "pmpd-run failed: $log"
        rate=$(printf '%s\n' "$log" | sed -n 's/.*prefill \([0-9.]*\) tokens\/s.*/\1/p')
        bytes=0
    fi
    n=$(printf '%s\n' "$log" | sed -n 's/^prompt \([0-9]*\) tokens.*/\1/p')
    [ -n "$rate" ] && [ -n "$bytes" ] || die "pmpd-run output not understood: $log"
    want=8
    [ "$mode" = prefill ] && want=$PREFILL_TOKENS
    [ "$n" = "$want" ] || die "the prompt gave $n tokens, not $want"
    echo "$rate $bytes"
}

# ---- models (made once per shape; remade when the tool that makes them changes)
MODELS=$DIR/shape-$(printf '%s' "${MKGGUF_ARGS:-default}" | tr -c 'A-Za-z0-9' '_')
mkdir -p "$MODELS"
fresh() { [ -f "$1" ] && [ ! "$2" -nt "$1" ]; }
gguf() { # gguf TYPE -> path
    f=$MODELS/model-$1.gguf
    if ! fresh "$f" "$BUILD/pmpd-mkgguf"; then
        say "bench-compare: writing $f"
        # shellcheck disable=SC2086  # MKGGUF_ARGS holds options
        "$BUILD/pmpd-mkgguf" "$f" --type "$1" --tokenizer "$TOKENIZER" $MKGGUF_ARGS >&2 || die "pmpd-mkgguf failed"
    fi
    echo "$f"
}
container() { # container NAME pmpd-convert-options... -> path
    name=$1
    shift
    f=$MODELS/model-$name.pmpd
    if ! fresh "$f" "$BUILD/pmpd-convert" || [ "$F16" -nt "$f" ]; then
        say "bench-compare: converting to $f"
        start=$(date +%s)
        "$BUILD/pmpd-convert" "$F16" "$f" "$@" >&2 || die "pmpd-convert failed"
        say "bench-compare: $name conversion took $(( $(date +%s) - start )) s"
    fi
    echo "$f"
}
F16=$(gguf f16)
Q4_0=$(gguf q4_0)
Q8_0=$(gguf q8_0)

# anyprec[-nv|-q4v](4|3|2|-static) -> the nested container whose embedding
# and classifier are q8, nested (-nv) or q4 (-q4v), decoded at that width
# or under the static 4/3/2 schedule.
nested_case() {
    rest=${1#anyprec}
    case $rest in
    -nv*) name=anyprec-nv; vocabulary=nested; rest=${rest#-nv} ;;
    -q4v*) name=anyprec-q4v; vocabulary=q4; rest=${rest#-q4v} ;;
    *) name=anyprec; vocabulary=q8 ;;
    esac
    case $rest in
    4|3|2) run="--bits 4:$rest" ;;
    -static) run="--schedule 4:4,3,2" ;;
    *) die "unknown case $1" ;;
    esac
    echo "$(container $name --type anyprec --bits 2:4 --vocabulary $vocabulary)|$run|-"
}

# weights -> "pmpd-model|pmpd-run options|llama.cpp model or -"
case_spec() {
    case $1 in
    q4) echo "$(container q4 --type q4)||$Q4_0" ;;
    q8) echo "$(container q8 --type q8)||$Q8_0" ;;
    q2cb) echo "$(container q2cb --type q2cb)||-" ;;
    w8a8) echo "$(container w8a8 --type w8a8)||-" ;;
    anyprec*) nested_case "$1" ;;
    alloc*flat)
        bits=${1#alloc}
        bits=${bits%flat}
        echo "$(container "alloc-$bits-$(printf '%s' "$PALETTE" | tr -c 'A-Za-z0-9.' '_')-flat" --budget-bits "$bits" \
            --palette "$PALETTE" --palette-flat --threads "$ALL")||-" ;;
    alloc*)
        # The file is named by budget and palette, so either change converts anew.
        bits=${1#alloc}
        echo "$(container "alloc-$bits-$(printf '%s' "$PALETTE" | tr -c 'A-Za-z0-9.' '_')" --budget-bits "$bits" \
            --palette "$PALETTE" --threads "$ALL")||-" ;;
    *) die "unknown case $1" ;;
    esac
}
for w in $CASES; do case_spec "$w" >/dev/null; done

# ---- the runs --------------------------------------------------------------
probe=$("$BUILD/pmpd-bench" --probe)
CPU=$(printf '%s\n' "$probe" | sed -n '1s/^pmpd-bench: //p')
BW1=$(printf '%s\n' "$probe" | awk '$1 == "1" && $2 == "thread" { print $3 }')
BWALL=$(printf '%s\n' "$probe" | awk '$1 == "all" && $2 == "threads" { print $3 }')
RAW=$DIR/raw.txt
: > "$RAW"
start=$(date +%s)
round=1
while [ $round -le "$ROUNDS" ]; do
    for threads in $THREADS; do
        for metric in decode prefill; do
            # llama.cpp's Q4_0 rate is the reference of every pmpd-only type.
            r=$(llama_rate "$Q4_0" $metric "$threads")
            echo "$metric llama-q4_0 $threads $r" >> "$RAW"
            for w in $CASES; do
                [ $metric = prefill ] && case $w in anyprec4|anyprec-nv4|q4|q8|q2cb|w8a8) ;; *) continue ;; esac
                spec=$(case_spec "$w")
                model=${spec%%|*}; rest=${spec#*|}; opts=${rest%%|*}; ref=${rest#*|}
                # shellcheck disable=SC2086  # opts holds options
                set -- $(pmpd_rate "$model" $metric "$threads" $opts)
                echo "$metric $w $threads $1 $2" >> "$RAW"
                if [ "$ref" != - ] && [ "$ref" != "$Q4_0" ]; then
                    r=$(llama_rate "$ref" $metric "$threads")
                    echo "$metric llama-$w $threads $r" >> "$RAW"
                fi
            done
            say "bench-compare: round $round, $threads thread(s), $metric done ($(( $(date +%s) - start )) s)"
        done
    done
    round=$((round + 1))
done

# ---- the table ---------------------------------------------------------------
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "metric,weights,threads,pmpd,llamacpp,ratio" > "$CSV"
echo "metric,weights,threads,bytes_per_token,weights_gbs,probe_gbs,fraction_of_probe" > "$BW_CSV"
printf '\nbench-compare: %s\n' "$CPU"
LLAMA_VARIANT=$(cat "$VARIANT_FILE")
printf 'llama.cpp: %s%s, %s\n' "$LLAMA_VERSION" "${LLAMA_VARIANT:+, $LLAMA_VARIANT}" \
    "$( [ "$MMAP" = 0 ] && echo "weights read into memory by both (MMAP=0)" || echo "weights mapped by both (MMAP=1)")"
printf 'model: pmpd-mkgguf %s; %s rounds, medians; decode %d tokens after an 8-token prompt, prefill %d tokens\n' \
    "${MKGGUF_ARGS:-(defaults: TinyLlama-1.1B shape)}" "$ROUNDS" "$DECODE_TOKENS" "$PREFILL_TOKENS"
printf 'bandwidth probe: %s GB/s (1 thread), %s GB/s (all threads)\n\n' "$BW1" "$BWALL"
printf '%-8s %-15s %7s %10s %10s %7s %12s %8s %8s\n' metric weights threads pmpd llama.cpp ratio "bytes/token" "GB/s" "of probe"
for metric in decode prefill; do
    for threads in $THREADS; do
        for w in $CASES; do
            grep -q "^$metric $w $threads " "$RAW" || continue
            p=$(awk -v m=$metric -v w="$w" -v t="$threads" '$1 == m && $2 == w && $3 == t { print $4 }' "$RAW" | median)
            bytes=$(awk -v m=$metric -v w="$w" -v t="$threads" '$1 == m && $2 == w && $3 == t { print $5 }' "$RAW" | median)
            ref=llama-$w
            grep -q "^$metric $ref $threads " "$RAW" || ref=llama-q4_0
            l=$(awk -v m=$metric -v w="$ref" -v t="$threads" '$1 == m && $2 == w && $3 == t { print $4 }' "$RAW" | median)
            ratio=$(awk -v a="$p" -v b="$l" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
            printf '%s,%s,%s,%.1f,%.1f,%s\n' $metric "$w" "$threads" "$p" "$l" "$ratio" >> "$CSV"
            bw=$BWALL
            [ "$threads" = 1 ] && bw=$BW1
            if [ $metric = decode ]; then
                gbs=$(awk -v b="$bytes" -v r="$p" 'BEGIN { printf "%.2f", b * r * 1e-9 }')
                frac=$(awk -v g="$gbs" -v p="$bw" 'BEGIN { printf "%.0f%%", (p > 0 ? 100 * g / p : 0) }')
                echo "$metric,$w,$threads,$bytes,$gbs,$bw,$(awk -v g="$gbs" -v p="$bw" 'BEGIN { printf "%.3f", (p > 0 ? g / p : 0) }')" >> "$BW_CSV"
            else
                gbs=-; frac=-; bytes=-
            fi
            printf '%-8s %-15s %7s %10.1f %10.1f %7s %12s %8s %8s\n' $metric "$w" "$threads" "$p" "$l" "${ratio}x" \
                "$bytes" "$gbs" "$frac"
        done
    done
done
printf '\nratio = pmpd / llama.cpp (Q8_0 for q8, Q4_0 for every other type); %s and %s written in %d s\n' \
    "$CSV" "$BW_CSV" $(( $(date +%s) - start ))
