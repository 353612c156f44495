#!/bin/sh
# Real byte-level BPE vocabularies against their expected ids: llama.cpp's
# tokenizer test files models/ggml-vocab-NAME.gguf with .inp (texts) and
# .out (the ids Hugging Face's tokenizers give), taken from the llama.cpp
# source bundle that the pinned node-llama-cpp package ships
# (llama/gitRelease.bundle, read with git).  Each vocabulary goes into a
# tiny synthetic model (pmpd-mkgguf --vocab-gpt2, via export-gguf-vocab.mjs),
# is converted, and pmpd-tokenize's ids must equal .out for every text and
# decode back to it.  A vocabulary with a pre-tokenizer pmpd lacks
# (deepseek-coder) must be refused by name.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
T=$ORACLE_TMP
bundle="$ORACLE_NPM/node_modules/node-llama-cpp/llama/gitRelease.bundle"
if ! command -v git >/dev/null 2>&1 || [ ! -f "$bundle" ]; then
    echo "check-tokenizer-vocab-files: SKIPPED (git or node-llama-cpp's llama.cpp bundle missing)" >&2
    [ "${ORACLE_REQUIRED:-0}" = 1 ] && exit 1
    exit 0
fi
git init -q --bare "$T/llama.cpp.git"
git --git-dir="$T/llama.cpp.git" fetch -q "$bundle" HEAD:refs/heads/release
cp "$here"/export-gguf-vocab.mjs "$here"/compare-vocab-test.mjs "$T"/
failed=0
for name in gpt-2 llama-bpe qwen2 starcoder refact mpt; do
    for ext in "" .inp .out; do
        git --git-dir="$T/llama.cpp.git" show "release:models/ggml-vocab-$name.gguf$ext" >"$T/$name.gguf$ext"
    done
    node "$T/export-gguf-vocab.mjs" "$T/$name.gguf" "$T/$name.vocab" >/dev/null
    "$BUILD/pmpd-mkgguf" "$T/$name-model.gguf" --vocab-gpt2 "$T/$name.vocab" --dim 64 --hidden 128 --layers 1 \
        --heads 2 --kv-heads 1 --seq-len 64 --type q8_0 --tied >/dev/null
    "$BUILD/pmpd-convert" "$T/$name-model.gguf" "$T/$name.pmpd" >/dev/null
    node "$T/compare-vocab-test.mjs" "$T/$name.gguf.inp" "$T/$name.gguf.out" --texts "$T/$name.texts"
    "$BUILD/pmpd-tokenize" "$T/$name.pmpd" "$T/$name.texts" --check-decode >"$T/$name.ids" || failed=1
    node "$T/compare-vocab-test.mjs" "$T/$name.gguf.inp" "$T/$name.gguf.out" "$T/$name.ids" || failed=1
done
git --git-dir="$T/llama.cpp.git" show release:models/ggml-vocab-deepseek-coder.gguf >"$T/deepseek-coder.gguf"
node "$T/export-gguf-vocab.mjs" "$T/deepseek-coder.gguf" "$T/deepseek-coder.vocab" >/dev/null
"$BUILD/pmpd-mkgguf" "$T/deepseek-coder-model.gguf" --vocab-gpt2 "$T/deepseek-coder.vocab" --dim 64 --hidden 128 \
    --layers 1 --heads 2 --kv-heads 1 --seq-len 64 --type q8_0 --tied >/dev/null
if "$BUILD/pmpd-convert" "$T/deepseek-coder-model.gguf" "$T/deepseek-coder.pmpd" >"$T/deepseek.log" 2>&1 ||
   ! grep -q '"deepseek-coder" is not a pre-tokenizer' "$T/deepseek.log"; then
    echo "deepseek-coder's pre-tokenizer was not refused by name:" >&2
    cat "$T/deepseek.log" >&2
    failed=1
else
    echo "deepseek-coder: refused: $(tail -1 "$T/deepseek.log")"
fi
exit $failed
