#!/bin/sh
# pmpd-run as a process (make check-cli, run by make check-native):
#   --tokenize: stories260K's ids for "Once upon a time" are llama2.c's
#     (the first ids of ../shared/vectors/stories260K_once_greedy.ids);
#   --no-mmap: the model read into memory continues greedily as llama2.c
#     does, and a truncated file is refused with the mapped path's message;
#   --info: exits 0 and names the shape, tokenizer ids and tensor types;
#   --chat: a scripted conversation (two messages, /reset) on stories260K
#     with --template zephyr exits 0 after two replies; without --template a
#     SentencePiece model is refused (exit 1, naming --template); an unknown
#     template name is a usage error (exit 2); a GGUF's chat template
#     (pmpd-mkgguf --chat-template) survives conversion and names the format;
#   --trace: writes a Chrome trace whose events name the model's tensors
#     and attention (JSON checked by python3 where it exists); an unwritable
#     path fails with exit 1 and leaves no file;
#   pmpd-convert --type keep-closest on a Q4_K_M GGUF lists each tensor's
#     choice (Q4_K -> q4, Q6_K -> q8, norms f32); an unknown --type is a
#     usage error that names keep-closest;
#   every container fuzz seed (fuzz/corpus/container/*.pmpd) loads and
#     decodes, so a format version bump cannot leave the fuzzer stuck at
#     the version check.
set -u
BUILD=${BUILD:-build}
MODELS=${MODELS:-../shared/models}
VECTORS=${VECTORS:-../shared/vectors}
run=$BUILD/pmpd-run
dir=$(mktemp -d "${TMPDIR:-/tmp}/pmpd-check-run.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
fail() { echo "check-run: FAIL: $*"; exit 1; }

"$BUILD/pmpd-convert" "$MODELS/stories260K.bin" "$dir/s.pmpd" --tokenizer "$MODELS/tok512.bin" >/dev/null 2>&1 ||
    fail "pmpd-convert stories260K"

# llama2.c encodes the prompt as 5 ids (BOS first); the vector file holds them.
want=$(tr -s ' \n' '\n\n' < "$VECTORS/stories260K_once_greedy.ids" | grep . | head -n 5 | tr '\n' ' ')
got=$("$run" "$dir/s.pmpd" --tokenize -p "Once upon a time" | tr '\n' ' ') || fail "--tokenize exit status"
[ "$got" = "$want" ] || fail "--tokenize: got '$got', llama2.c '$want'"
[ "$("$run" "$dir/s.pmpd" --tokenize -p "" | tr '\n' ' ')" = "1 " ] || fail "--tokenize of an empty prompt is not BOS"

# --no-mmap: the model read into memory decodes llama2.c's greedy run (the
# prompt's 5 ids and 20 more), and a truncated file gets the mapped path's
# refusal.
want=$(tr -s ' \n' '\n\n' < "$VECTORS/stories260K_once_greedy.ids" | grep . | head -n 25 | tr '\n' ' ')
got=$("$run" "$dir/s.pmpd" --no-mmap -p "Once upon a time" -t 0 -n 20 --ids 2>/dev/null | tr -s ' \n' '\n\n' |
      grep . | tr '\n' ' ') || fail "--no-mmap exit status"
[ "$got" = "$want" ] || fail "--no-mmap: got '$got', llama2.c '$want'"
head -c 1000 "$dir/s.pmpd" > "$dir/short.pmpd"
"$run" "$dir/short.pmpd" > /dev/null 2> "$dir/short.mapped"
[ $? -eq 1 ] || fail "a truncated model was not refused"
"$run" "$dir/short.pmpd" --no-mmap > /dev/null 2> "$dir/short.read"
[ $? -eq 1 ] || fail "a truncated model was not refused with --no-mmap"
cmp -s "$dir/short.mapped" "$dir/short.read" ||
    fail "--no-mmap refuses a truncated model otherwise: '$(cat "$dir/short.read")' against '$(cat "$dir/short.mapped")'"

"$run" --info "$dir/s.pmpd" > "$dir/info" 2>&1 || fail "--info exit status"
for words in "dim 64, hidden 172, layers 5, heads 8, kv heads 4, head_dim 8, vocab 512, seq_len 512" \
    "bos 1, eos 2, eot none" "f32 47" "f16"; do
    grep -q "$words" "$dir/info" || fail "--info does not say '$words': $(cat "$dir/info")"
done

printf 'hello\nwho are you?\n/reset\n' | "$run" "$dir/s.pmpd" --chat --template zephyr -t 0 -n 16 \
    > "$dir/chat.out" 2> "$dir/chat.err" || fail "--chat exit status: $(cat "$dir/chat.err")"
grep -q "^2 replies, 1 resets" "$dir/chat.err" || fail "--chat: not two replies and one reset: $(cat "$dir/chat.err")"

printf 'hello\n' | "$run" "$dir/s.pmpd" --chat > /dev/null 2> "$dir/refused"
[ $? -eq 1 ] || fail "--chat without --template on a SentencePiece model was not refused"
grep -q -- "--template" "$dir/refused" || fail "the refusal does not name --template"
"$run" "$dir/s.pmpd" --chat --template jinja < /dev/null > /dev/null 2>&1
[ $? -eq 2 ] || fail "--template jinja was not a usage error"
# A GGUF's tokenizer.chat_template travels into the container and names the
# chat format: no --template needed.
zephyr="{% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|>\n' + message['content'] + eos_token }}{% endif %}{% endfor %}{{ '<|assistant|>' }}"
"$BUILD/pmpd-mkgguf" "$dir/t.gguf" --tokenizer "$MODELS/tok512.bin" --dim 64 --hidden 128 --layers 1 --heads 2 \
    --kv-heads 1 --seq-len 128 --type f32 --chat-template "$zephyr" > /dev/null 2>&1 || fail "pmpd-mkgguf --chat-template"
"$BUILD/pmpd-convert" "$dir/t.gguf" "$dir/t.pmpd" > /dev/null 2>&1 || fail "pmpd-convert of a GGUF with a chat template"
"$run" --info "$dir/t.pmpd" | grep -q "chat template: stored (${#zephyr} bytes), format zephyr by its chat template" ||
    fail "--info does not report the stored template: $("$run" --info "$dir/t.pmpd" | grep 'chat template')"
printf 'hi\n' | "$run" "$dir/t.pmpd" --chat -t 0 -n 4 > /dev/null 2> "$dir/t.err" || fail "--chat with a stored template"
grep -q "chat template zephyr (from chat template)" "$dir/t.err" || fail "--chat did not use the stored template"
"$BUILD/pmpd-mkgguf" "$dir/k.gguf" --tokenizer "$MODELS/tok512.bin" --dim 256 --hidden 256 --layers 1 --heads 4 \
    --kv-heads 2 --seq-len 64 --type q4_k_m > /dev/null 2>&1 || fail "pmpd-mkgguf --type q4_k_m"
"$BUILD/pmpd-convert" "$dir/k.gguf" "$dir/k.pmpd" --type keep-closest > "$dir/k.out" 2>&1 ||
    fail "pmpd-convert --type keep-closest: $(cat "$dir/k.out")"
for line in "keep-closest token_embd.weight *Q4_K *-> q4" "keep-closest output.weight *Q6_K *-> q8" \
    "keep-closest blk.0.attn_q.weight *Q4_K *-> q4" "keep-closest blk.0.attn_v.weight *Q6_K *-> q8" \
    "keep-closest blk.0.attn_norm.weight *F32 *-> f32"; do
    grep -q "$line" "$dir/k.out" || fail "keep-closest summary lacks '$line': $(cat "$dir/k.out")"
done
"$BUILD/pmpd-convert" "$dir/k.gguf" "$dir/k2.pmpd" --type q3 > /dev/null 2> "$dir/k.err"
[ $? -eq 2 ] || fail "pmpd-convert --type q3 was not a usage error"
grep -q "keep-closest" "$dir/k.err" || fail "the --type refusal does not name keep-closest: $(cat "$dir/k.err")"
"$run" "$dir/s.pmpd" -p "Once upon a time" -n 8 -t 0 --threads 2 --trace "$dir/trace.json" >/dev/null 2>"$dir/trace.err" ||
    fail "--trace exit status: $(cat "$dir/trace.err")"
grep -q '"name":"blk.0.attn_q.weight","cat":"product"' "$dir/trace.json" || fail "--trace: no product event of blk.0.attn_q"
grep -q '"name":"attention","cat":"attention"' "$dir/trace.json" || fail "--trace: no attention event"
if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d["traceEvents"]) > 100' \
        "$dir/trace.json" || fail "--trace: not JSON, or too few events"
fi
"$run" "$dir/s.pmpd" -n 2 --trace "$dir/missing/trace.json" >/dev/null 2>&1 && fail "--trace into a missing directory succeeded"
[ ! -e "$dir/missing" ] || fail "--trace into a missing directory left a file"
# The container fuzzer's seeds must be models this build runs, or the
# fuzzer stops at their version check and never reaches the tensors' own
# checks (the anyprec and tcq seeds had gone stale that way).
for seed in fuzz/corpus/container/*.pmpd; do
    "$run" "$seed" -n 2 -t 0 > /dev/null 2> "$dir/seed.err" ||
        fail "fuzz seed $seed does not load (re-convert it as fuzz/tools/make_seeds.c says): $(cat "$dir/seed.err")"
done

echo "check-run: --tokenize, --no-mmap, --info, --chat, --trace, pmpd-convert --type keep-closest, fuzz container seeds: all passed"
