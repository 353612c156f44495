// Compares pmpd's token ids (one line of comma-separated ids per text, as
// pmpd-tokenize prints them) with an oracle's on the corpus:
//   node compare-tokenizer.mjs ORACLE PMPD_IDS [GGUF] [--special]
// ORACLE is "llama3-tokenizer-js" (the independent JS tokenizer; it always
// parses Llama 3's special tokens, so it is compared with --special runs
// only) or "llama.cpp" (node-llama-cpp's model.tokenize on GGUF, with
// specialTokens as given).  Neither adds BOS.  Prints the first difference
// per text and exits 1 if any text differs.
import { readFileSync, writeFileSync } from "node:fs";
import { corpus } from "./tokenizer-corpus.mjs";

const [oracle, idsPath, ggufPath, ...rest] = process.argv.slice(2);
const special = rest.includes("--special") || ggufPath === "--special";
const pmpd = readFileSync(idsPath, "utf8").split("\n").slice(0, corpus.length)
    .map((line) => (line === "" ? [] : line.split(",").map(Number)));
let expected;
if (oracle === "llama3-tokenizer-js") {
    const t = (await import("llama3-tokenizer-js")).default;
    expected = corpus.map((text) => t.encode(text, { bos: false, eos: false }));
} else if (oracle === "llama.cpp") {
    const { getLlama, LlamaLogLevel } = await import("node-llama-cpp");
    const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
    const model = await llama.loadModel({ modelPath: ggufPath, gpuLayers: 0 });
    expected = corpus.map((text) => Array.from(model.tokenize(text, special)));
    await model.dispose();
} else {
    console.error("usage: node compare-tokenizer.mjs llama3-tokenizer-js|llama.cpp PMPD_IDS [GGUF] [--special]");
    process.exit(2);
}
let differ = 0;
corpus.forEach((text, i) => {
    const a = pmpd[i] ?? [], b = expected[i];
    let k = 0;
    while (k < a.length && k < b.length && a[k] === b[k]) k++;
    if (k < a.length || k < b.length) {
        differ++;
        console.log(`text ${i} ${JSON.stringify(text.slice(0, 60))}: first difference at id ${k}: ` +
            `pmpd ${JSON.stringify(a.slice(k, k + 6))}, ${oracle} ${JSON.stringify(b.slice(k, k + 6))}`);
    }
});
const total = expected.reduce((s, e) => s + e.length, 0);
console.log(`${oracle}${special ? " (special tokens parsed)" : ""}: ${corpus.length - differ}/${corpus.length} texts ` +
    `equal (${total} ids)`);
process.exit(differ ? 1 : 0);
