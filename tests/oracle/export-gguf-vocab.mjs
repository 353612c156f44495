// Writes the byte-level BPE vocabulary of a (vocabulary-only) GGUF file as
// the text file pmpd-mkgguf --vocab-gpt2 reads:
//   node export-gguf-vocab.mjs VOCAB.gguf OUT
// Used on llama.cpp's own tokenizer test files (models/ggml-vocab-*.gguf,
// from the llama.cpp source bundle that the pinned node-llama-cpp ships),
// so their .inp/.out expected ids can be compared with pmpd's.  Reads the
// GGUF metadata by its published layout; tensors are not needed.
import { readFileSync, writeFileSync } from "node:fs";

const [inPath, outPath] = process.argv.slice(2);
const buf = readFileSync(inPath);
let at = 0;
const u32 = () => { const v = buf.readUInt32LE(at); at += 4; return v; };
const u64 = () => { const v = Number(buf.readBigUInt64LE(at)); at += 8; return v; };
const str = () => { const n = u64(); const s = buf.subarray(at, at + n); at += n; return s; };
const scalarSize = [1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8];
function value(type) {
    if (type === 8) return str();
    if (type === 9) {
        const et = u32(), n = u64(), out = new Array(n);
        for (let i = 0; i < n; i++) out[i] = value(et);
        return out;
    }
    const size = scalarSize[type];
    let v;
    if (type === 4) v = buf.readUInt32LE(at);
    else if (type === 5) v = buf.readInt32LE(at);
    else if (type === 7) v = buf[at] !== 0;
    else if (type === 10) v = Number(buf.readBigUInt64LE(at));
    else v = null;
    at += size;
    return v;
}
if (buf.toString("latin1", 0, 4) !== "GGUF") throw new Error(`${inPath} is not GGUF`);
at = 8;
u64(); // tensors
const nKv = u64(), kv = new Map();
for (let i = 0; i < nKv; i++) {
    const key = str().toString("utf8");
    kv.set(key, value(u32()));
}
if (kv.get("tokenizer.ggml.model")?.toString() !== "gpt2") throw new Error(`${inPath} is not a gpt2 vocabulary`);
const tokens = kv.get("tokenizer.ggml.tokens"), merges = kv.get("tokenizer.ggml.merges");
const types = kv.get("tokenizer.ggml.token_type") ?? tokens.map(() => 1);
const parts = [Buffer.from("pmpd-gpt2-vocab 1\n")];
const line = (s) => parts.push(Buffer.isBuffer(s) ? Buffer.concat([s, Buffer.from("\n")]) : Buffer.from(s + "\n"));
line(`pre ${kv.get("tokenizer.ggml.pre").toString()}`);
line(`bos ${kv.get("tokenizer.ggml.bos_token_id") ?? 0}`);
line(`eos ${kv.get("tokenizer.ggml.eos_token_id") ?? 0}`);
if (kv.has("tokenizer.ggml.eot_token_id")) line(`eot ${kv.get("tokenizer.ggml.eot_token_id")}`);
if (kv.has("tokenizer.ggml.add_bos_token")) line(`add_bos ${kv.get("tokenizer.ggml.add_bos_token") ? 1 : 0}`);
line(`tokens ${tokens.length}`);
tokens.forEach((t, i) => {
    if (t.includes(10) || t.length === 0) throw new Error(`token ${i} cannot be written on a line`);
    line(Buffer.concat([Buffer.from(`${types[i]} `), t]));
});
line(`merges ${merges.length}`);
merges.forEach((m) => line(m));
writeFileSync(outPath, Buffer.concat(parts));
console.log(`export-gguf-vocab: ${inPath}: ${tokens.length} tokens, ${merges.length} merges, pre ${kv.get("tokenizer.ggml.pre")}`);
