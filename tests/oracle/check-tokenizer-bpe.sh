#!/bin/sh
# Byte-level BPE tokenization against two independent oracles, on the
# corpus in tokenizer-corpus.mjs:
#   - llama3-tokenizer-js (its own JS implementation of Llama 3's
#     tokenizer), whose vocabulary and merges pmpd-mkgguf puts in a GGUF;
#   - llama.cpp (node-llama-cpp's model.tokenize) on that GGUF with
#     tokenizer.ggml.pre llama-bpe, qwen2, smollm and gpt-2, with and
#     without special-token parsing.
# pmpd's ids come from pmpd-tokenize on the converted container; without
# special parsing it also checks that the ids decode back to the text.  A
# control run compares llama-bpe ids with llama.cpp under qwen2's
# pre-tokenizer, which must differ, so the comparison can fail.
# The vocabulary (4.7 MB) and models live in ORACLE_TMP, never in the tree.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
T=$ORACLE_TMP
cp "$here"/tokenizer-corpus.mjs "$here"/compare-tokenizer.mjs "$here"/export-llama3-vocab.mjs \
   "$here"/write-corpus.mjs "$T"/
ln -sfn "$ORACLE_NPM/node_modules" "$T/node_modules"
node "$T/export-llama3-vocab.mjs" "$T/llama3.vocab"
node "$T/write-corpus.mjs" "$T/corpus.bin"
failed=0
for pre in llama-bpe qwen2 smollm gpt-2; do
    "$BUILD/pmpd-mkgguf" "$T/$pre.gguf" --vocab-gpt2 "$T/llama3.vocab" --pre "$pre" --dim 64 --hidden 128 \
        --layers 1 --heads 2 --kv-heads 1 --seq-len 256 --type q8_0 --tied >/dev/null
    "$BUILD/pmpd-convert" "$T/$pre.gguf" "$T/$pre.pmpd" >/dev/null
    "$BUILD/pmpd-tokenize" "$T/$pre.pmpd" "$T/corpus.bin" --check-decode >"$T/$pre.ids" || failed=1
    "$BUILD/pmpd-tokenize" "$T/$pre.pmpd" "$T/corpus.bin" --special >"$T/$pre.special.ids" || failed=1
    echo "-- pre-tokenizer $pre"
    node "$T/compare-tokenizer.mjs" llama.cpp "$T/$pre.ids" "$T/$pre.gguf" || failed=1
    node "$T/compare-tokenizer.mjs" llama.cpp "$T/$pre.special.ids" "$T/$pre.gguf" --special || failed=1
    if [ "$pre" = llama-bpe ]; then
        node "$T/compare-tokenizer.mjs" llama3-tokenizer-js "$T/$pre.special.ids" --special || failed=1
    fi
done
echo "-- control: llama-bpe ids against llama.cpp with qwen2's pre-tokenizer (must differ)"
if node "$T/compare-tokenizer.mjs" llama.cpp "$T/llama-bpe.ids" "$T/qwen2.gguf" >"$T/control.log" 2>&1; then
    echo "the control comparison found no difference: the comparison cannot fail" >&2
    failed=1
else
    tail -1 "$T/control.log"
fi
exit $failed
