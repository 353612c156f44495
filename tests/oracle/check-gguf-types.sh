#!/bin/sh
# GGUF tensor types against llama.cpp itself: for each ggml type pmpd imports,
# a small Llama model (dim 256, hidden 512, 2 layers, 4 heads, 2 KV heads,
# weights of std 0.1, the real Llama 2 vocabulary) written by pmpd-mkgguf in
# that type, converted by pmpd-convert to f32 (pmpd's decoding of the
# blocks) and continued greedily for 32 tokens from "Once upon a time" by
# pmpd-run; llama.cpp (tests/oracle/agree.mjs) continues the same GGUF from
# the same ids.
#
# The two continuations must agree up to the first disagreement, and there
# llama.cpp's own top two logits must have been within MARGIN_BOUND of each
# other (an excused disagreement).  Why a bound: for quantized weights
# llama.cpp rounds the activations to 8 bits before each product (Q8_0,
# Q8_1 or Q8_K blocks) while pmpd multiplies f32 activations by the decoded
# weights, so logits differ by a little noise and where llama.cpp was nearly
# undecided the two may pick different tokens.  Over seeds 1-3, these 14
# types and all 32 positions (89 disagreements) the largest such margin
# was 0.19, hence the bound 0.25; a decoder with Q4_K's nibbles swapped
# fails at margins of 0.26-0.36.  Run on an F32 GGUF of pmpd's decoded
# weights, llama.cpp gives pmpd's tokens exactly, so those disagreements are
# llama.cpp's rounding, not the decoding (which tests/test_gguf_types.c
# checks bit for bit).
#
# After an excused disagreement the check goes on rather than stopping:
# llama.cpp continues again from pmpd's tokens so far (its prompt is the
# prompt and pmpd's continuation up to and including that token), and the
# rest must agree under the same rule.  So all 32 of pmpd's tokens are
# checked as llama.cpp's greedy choice in pmpd's context; a wrong decoding
# shows as disagreements where llama.cpp was sure.
#
# Prints per type: the tokens before the first disagreement, the tokens of
# the 32 that llama.cpp chose too in pmpd's context, and each excused
# disagreement with its margin.  GGUF_TYPES and GGUF_SEED (default 1)
# narrow or vary a run.
set -u
BUILD=${BUILD:-build}
SHARED=${PMPD_SHARED:-../shared}
TMP=${ORACLE_TMP:-$BUILD/oracle/check-gguf-types}
MARGIN_BOUND=${MARGIN_BOUND:-0.25}
TOKENS=32
TYPES=${GGUF_TYPES:-"f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl q4_k q5_k q6_k iq4_xs q4_k_m"}
PROMPT="Once upon a time"
PROMPT_IDS="1,9038,2501,263,931" # BOS and the prompt in the Llama 2 vocabulary (checked below)

here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$TMP"
# agree.mjs imports node-llama-cpp: run it from beside ORACLE_NPM's modules.
ln -sfn "${ORACLE_NPM:?ORACLE_NPM names the folder holding node_modules}/node_modules" "$TMP/node_modules"
cp "$here/agree.mjs" "$TMP/agree.mjs"

failed=0
for type in $TYPES; do
    gguf="$TMP/$type.gguf" pmpd="$TMP/$type.pmpd"
    if ! "$BUILD/pmpd-mkgguf" "$gguf" --type "$type" --std 0.1 --seed "${GGUF_SEED:-1}" --dim 256 --hidden 512 \
            --layers 2 --heads 4 --kv-heads 2 --seq-len 256 --tokenizer "$SHARED/models/llama2_tokenizer.bin" >/dev/null ||
       ! "$BUILD/pmpd-convert" "$gguf" "$pmpd" --type f32 >/dev/null; then
        echo "check-gguf-types: $type: FAIL: could not write or convert the model"
        failed=1
        continue
    fi
    # --ignore-eos: exactly TOKENS ids (pmpd-run stops at
    # BOS, EOS and end-of-turn otherwise).
    ids=$("$BUILD/pmpd-run" "$pmpd" -p "$PROMPT" -n $TOKENS -t 0 --ids --ignore-eos 2>/dev/null)
    prompt_part=$(echo "$ids" | cut -d' ' -f1-5 | tr ' ' ',')
    ours=$(echo "$ids" | cut -d' ' -f6-)
    if [ "$prompt_part" != "$PROMPT_IDS" ] || [ "$(echo "$ours" | wc -w)" -ne $TOKENS ]; then
        echo "check-gguf-types: $type: FAIL: pmpd gave $ids (want $PROMPT_IDS then $TOKENS tokens)"
        failed=1
        continue
    fi
    # The walk (agree.mjs): each disagreement as "excused|failed POSITION
    # OURS THEIRS MARGIN" (POSITION from 0), then "first N".
    walk=$(node "$TMP/agree.mjs" "$gguf" "$PROMPT_IDS" "$(echo "$ours" | tr ' ' ',')" "$MARGIN_BOUND") || {
        echo "check-gguf-types: $type: FAIL: llama.cpp failed"
        failed=1
        continue
    }
    first=$(printf '%s\n' "$walk" | awk '$1 == "first" { print $2 }')
    excuses=$(printf '%s\n' "$walk" | awk '$1 == "excused" {
        printf " token %d: pmpd %s, llama.cpp %s (margin %s);", $2 + 1, $3, $4, $5 }')
    verdict=$(printf '%s\n' "$walk" | awk -v b="$MARGIN_BOUND" '$1 == "failed" {
        printf "FAIL at token %d: pmpd %s, llama.cpp %s with margin %s >= %s", $2 + 1, $3, $4, $5, b }')
    n_excused=$(printf '%s' "$excuses" | tr -cd ';' | wc -c)
    case $verdict in
        FAIL*)
            echo "check-gguf-types: $type: $verdict; before it, $n_excused excused:$excuses"
            failed=1 ;;
        *)
            echo "check-gguf-types: $type: OK: ${first:-$TOKENS} of $TOKENS before the first disagreement;" \
                 "$((TOKENS - n_excused)) of $TOKENS as llama.cpp chose in pmpd's context;" \
                 "$n_excused excused (margin < $MARGIN_BOUND):$excuses" ;;
    esac
done
exit $failed
