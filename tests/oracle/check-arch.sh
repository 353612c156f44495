#!/bin/sh
# The forward pass of each architecture variant against llama.cpp itself
# (node-llama-cpp, run by tests/oracle/run.sh): a tiny f32 GGUF of random
# weights from pmpd-mkgguf, converted to f32 by pmpd-convert, continued
# greedily by pmpd-run and by llama.cpp (greedy.mjs) from the same prompt
# ids.  The two continuations must agree token for token; the first
# disagreement is excused only where llama.cpp's own top two logits are
# closer than MARGIN (llama.cpp keeps its KV cache in f16 and sums in
# another order, so a near tie may fall either way), and the comparison
# stops there because the continuations then diverge.
#
# The weights have standard deviation STD = 0.1, not mkgguf's 0.02: with
# 0.02 the logits of a random model are nearly flat and most tokens are
# near ties, so the test would excuse almost anything; much larger (0.5)
# makes the logits so large that llama.cpp's f16 KV cache moves them by
# more than 0.1 and genuine agreement looks like failure.  At 0.1 the
# median margin over all variants is about 0.27 and pmpd still agrees on
# near ties of 0.002.  ARCH_ONLY=NAME runs one variant.
set -u
BUILD=${BUILD:-build}
ORACLE_NPM=${ORACLE_NPM:?run through tests/oracle/run.sh}
ORACLE_TMP=${ORACLE_TMP:?run through tests/oracle/run.sh}
here=$(cd "$(dirname "$0")" && pwd)
ORACLE_TMP=$(cd "$ORACLE_TMP" && pwd) # node runs from there: paths must not be relative
shared=${PMPD_SHARED:-$here/../../../shared}
N=${ARCH_TOKENS:-64}
MARGIN=${ARCH_MARGIN:-0.01}
STD=${ARCH_STD:-0.1}
ONLY=${ARCH_ONLY:-}
PROMPT="Once upon a time"

for tool in pmpd-mkgguf pmpd-convert pmpd-run; do
    [ -x "$BUILD/$tool" ] || { echo "check-arch: $BUILD/$tool is not built" >&2; exit 1; }
done
llama2="$shared/models/llama2_tokenizer.bin"
tok512="$shared/models/tok512.bin"
[ -f "$llama2" ] && [ -f "$tok512" ] || { echo "check-arch: $shared/models lacks the tokenizers" >&2; exit 1; }

# greedy.mjs resolves node-llama-cpp next to itself.
cp "$here/greedy.mjs" "$ORACLE_TMP/greedy.mjs"
ln -sf "$ORACLE_NPM/node_modules" "$ORACLE_TMP/node_modules"

failed=0
printf '%-22s %-8s %-12s %-16s %s\n' variant equal first-diff "margin there" verdict

# variant NAME TOKENIZER MKGGUF-OPTIONS...
variant() {
    name=$1 tokenizer=$2
    shift 2
    [ -z "$ONLY" ] || [ "$ONLY" = "$name" ] || return 0
    dir="$ORACLE_TMP/$name"
    mkdir -p "$dir"
    if ! "$BUILD/pmpd-mkgguf" "$dir/m.gguf" --type f32 --std "$STD" --tokenizer "$tokenizer" "$@" >"$dir/log" 2>&1 ||
       ! "$BUILD/pmpd-convert" "$dir/m.gguf" "$dir/m.pmpd" >>"$dir/log" 2>&1 ||
       ! "$BUILD/pmpd-run" "$dir/m.pmpd" -p "$PROMPT" -n "$N" -t 0 --ids --ignore-eos >"$dir/pmpd.out" 2>"$dir/pmpd.err"; then
        cat "$dir/log" "$dir/pmpd.err" 2>/dev/null >&2
        printf '%-22s %s\n' "$name" "FAILED (pmpd side, see above)"
        failed=1
        return
    fi
    # pmpd-run --ids prints the prompt's ids, then the generated ones.
    n_prompt=$(sed -n 's/^prompt \([0-9]*\) tokens.*/\1/p' "$dir/pmpd.err")
    tr ' ' '\n' <"$dir/pmpd.out" | sed '/^$/d' >"$dir/pmpd.ids"
    ids=$(head -n "$n_prompt" "$dir/pmpd.ids" | paste -sd, -)
    tail -n "+$((n_prompt + 1))" "$dir/pmpd.ids" >"$dir/pmpd.gen"
    if ! (cd "$ORACLE_TMP" && node greedy.mjs "$dir/m.gguf" "$N" "$ids") >"$dir/llama.out" 2>"$dir/llama.err"; then
        cat "$dir/llama.err" >&2
        printf '%-22s %s\n' "$name" "FAILED (llama.cpp did not run the file)"
        failed=1
        return
    fi
    line=$(paste -d' ' "$dir/pmpd.gen" "$dir/llama.out" | awk -v n="$N" -v bound="$MARGIN" '
        NF == 3 && !done { if ($1 == $2) { equal++; next } first = NR; margin = $3; done = 1 }
        END {
            if (NR < n) { printf "%d %s %s %s", equal, "-", "-", "FAIL (only " NR " tokens)"; exit }
            if (!done) { printf "%d/%d %s %s %s", equal, n, "none", "-", "ok"; exit }
            verdict = margin + 0 < bound + 0 ? "ok (excused)" : "FAIL"
            printf "%d/%d %s %s %s", equal, n, "token " first, margin, verdict
        }')
    set -- $line
    printf '%-22s %-8s %-12s %-16s %s\n' "$name" "$1" "$2 ${3:-}" "${4:-}" "${5:-} ${6:-}"
    case "$line" in *FAIL*) failed=1 ;; esac
}

# Llama 2 / TinyLlama-style: separate classifier, then the embedding as classifier.
variant llama-untied "$llama2" --dim 128 --hidden 256 --layers 2 --heads 4 --kv-heads 4 --seq-len 256 --seed 11
variant llama-tied "$llama2" --dim 128 --hidden 256 --layers 2 --heads 4 --kv-heads 4 --seq-len 256 --seed 12 --tied
# Llama 3.1/3.2: rope_freqs.weight divisors, rope base 500000, eps 1e-5 spelled out.
variant llama3-rope-freqs "$llama2" --dim 256 --hidden 512 --layers 2 --heads 4 --kv-heads 2 --seq-len 256 --seed 13 \
    --rope-freqs --rope-theta 500000 --norm-eps 1e-5 --tied
# Qwen2: Q/K/V biases, NeoX rotation, rope base 1e6, eps 1e-6.
variant qwen2-bias "$llama2" --arch qwen2 --dim 128 --hidden 256 --layers 2 --heads 4 --kv-heads 2 --seq-len 256 \
    --seed 14 --rope-theta 1000000 --norm-eps 1e-6
variant qwen2-bias-tied "$llama2" --arch qwen2 --dim 256 --hidden 512 --layers 2 --heads 4 --kv-heads 1 \
    --seq-len 256 --seed 15 --tied
# Grouped-query attention: kv_heads = heads, heads/2, heads/4.
variant gqa-1 "$tok512" --dim 256 --hidden 512 --layers 2 --heads 8 --kv-heads 8 --seq-len 256 --seed 16
variant gqa-2 "$tok512" --dim 256 --hidden 512 --layers 2 --heads 8 --kv-heads 4 --seq-len 256 --seed 17
variant gqa-4 "$tok512" --dim 256 --hidden 512 --layers 2 --heads 8 --kv-heads 2 --seq-len 256 --seed 18
# Head widths 64 and 128 (SmolLM2 / Llama, Llama 3.2 3B).
variant head-dim-64 "$tok512" --dim 256 --hidden 512 --layers 2 --heads 4 --kv-heads 2 --seq-len 256 --seed 19
variant head-dim-128 "$tok512" --dim 512 --hidden 768 --layers 2 --heads 4 --kv-heads 2 --seq-len 256 --seed 20
# head_dim 64 with dim 128 and 4 heads: queries are 256 wide (key_length).
variant head-dim-ne-dim "$llama2" --dim 128 --hidden 256 --layers 2 --heads 4 --kv-heads 2 --seq-len 256 --seed 21 \
    --head-dim 64

[ $failed = 0 ] || { echo "check-arch: a variant disagrees with llama.cpp beyond the margin bound $MARGIN" >&2; exit 1; }
echo "check-arch: every variant equals llama.cpp's greedy continuation ($N tokens; a first disagreement is excused only where llama.cpp's top-2 margin < $MARGIN)"
