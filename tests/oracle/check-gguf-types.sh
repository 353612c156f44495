#!/bin/sh
# GGUF tensor types against llama.cpp itself: for each ggml type pmpd imports,
# a small Llama model (dim 256, hidden 512, 2 layers, 4 heads, 2 KV heads,
# the real Llama 2 vocabulary) written by pmpd-mkgguf in that type, converted
# by pmpd-convert to f32 (pmpd's decoding of the blocks) and continued
# greedily for 32 tokens from "Once upon a time" by pmpd-run; llama.cpp
# (tests/oracle/greedy.mjs) continues the same GGUF from the same ids.
#
# The continuations must agree up to the first disagreement, and that
# disagreement (if any) must be one where llama.cpp's own top two logits
# were within MARGIN_BOUND of each other.  Why a bound: for quantized weights
# llama.cpp quantizes the activations to 8 bits before each product (Q8_0,
# Q8_1 or Q8_K blocks) while pmpd multiplies f32 activations by the decoded
# weights, so logits differ by a little noise; where llama.cpp was nearly
# undecided the two may pick different tokens, after which the sequences
# part.  With weights of std 0.1 (logits with gaps of about 0.2-1) the
# largest margin at a first disagreement seen over these types and seeds
# 1-4 was 0.14; a wrong block decoding moves logits by whole units.  Run
# against an f32 GGUF of pmpd's decoded weights, llama.cpp gave pmpd's 32
# tokens exactly, so the disagreements are that arithmetic, not the decoding.
# (The decoders are also compared bit for bit in tests/test_gguf_types.c.)
#
# Prints per type: tokens matched of 32, and whether the first disagreement
# was excused.
set -u
BUILD=${BUILD:-build}
SHARED=${PMPD_SHARED:-../shared}
TMP=${ORACLE_TMP:-$BUILD/oracle/check-gguf-types}
MARGIN_BOUND=${MARGIN_BOUND:-0.15}
TOKENS=32
TYPES=${GGUF_TYPES:-"f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl q4_k q5_k q6_k iq4_xs q4_k_m"}
PROMPT="Once upon a time"
PROMPT_IDS="1,9038,2501,263,931" # BOS and the prompt in the Llama 2 vocabulary (checked below)

here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$TMP"
# greedy.mjs imports node-llama-cpp: run it from beside ORACLE_NPM's modules.
ln -sfn "${ORACLE_NPM:?ORACLE_NPM names the folder holding node_modules}/node_modules" "$TMP/node_modules"
cp "$here/greedy.mjs" "$TMP/greedy.mjs"

failed=0 excused=0
for type in $TYPES; do
    gguf="$TMP/$type.gguf" pmpd="$TMP/$type.pmpd"
    if ! "$BUILD/pmpd-mkgguf" "$gguf" --type "$type" --std 0.1 --seed 1 --dim 256 --hidden 512 --layers 2 \
            --heads 4 --kv-heads 2 --seq-len 256 --tokenizer "$SHARED/models/llama2_tokenizer.bin" >/dev/null ||
       ! "$BUILD/pmpd-convert" "$gguf" "$pmpd" --type f32 >/dev/null; then
        echo "check-gguf-types: $type: could not write or convert the model"
        failed=1
        continue
    fi
    ours=$("$BUILD/pmpd-run" "$pmpd" -p "$PROMPT" -n $TOKENS -t 0 --ids 2>/dev/null)
    theirs=$(node "$TMP/greedy.mjs" "$gguf" $TOKENS "$PROMPT_IDS") || { echo "check-gguf-types: $type: llama.cpp failed"; failed=1; continue; }
    verdict=$(printf '%s\n' "$theirs" | awk -v ours="$ours" -v prompt="$PROMPT_IDS" -v bound="$MARGIN_BOUND" -v want=$TOKENS '
        BEGIN { n = split(ours, id, " "); p = split(prompt, pid, ",") }
        { got[NR] = $1; margin[NR] = $2 }
        END {
            for (i = 1; i <= p; i++)
                if (id[i] != pid[i]) { print "FAIL prompt ids differ: pmpd " ours; exit }
            if (NR != want) { print "FAIL llama.cpp gave " NR " tokens"; exit }
            for (i = 1; i <= want; i++) {
                if (id[p + i] == got[i]) continue
                if (margin[i] + 0 < bound + 0)
                    printf "EXCUSED %d of %d matched; token %d: pmpd %s, llama.cpp %s with margin %s < %s\n", i - 1, want, i, id[p + i], got[i], margin[i], bound
                else
                    printf "FAIL %d of %d matched; token %d: pmpd %s, llama.cpp %s with margin %s >= %s\n", i - 1, want, i, id[p + i], got[i], margin[i], bound
                exit
            }
            printf "OK %d of %d matched\n", want, want
        }')
    echo "check-gguf-types: $type: $verdict"
    case $verdict in
        FAIL*) failed=1 ;;
        EXCUSED*) excused=$((excused + 1)) ;;
    esac
done
echo "check-gguf-types: $excused types had an excused first disagreement (llama.cpp margin < $MARGIN_BOUND)"
exit $failed
