// Compares pmpd-tokenize's ids with the expected ids of one of llama.cpp's
// tokenizer test files: node compare-vocab-test.mjs NAME.gguf.inp NAME.gguf.out PMPD_IDS
// .inp holds the texts separated by "\n__ggml_vocab_test__\n"; .out one
// line of space-separated ids per text (Hugging Face's tokenizer, no BOS).
// With "--texts OUT" instead of PMPD_IDS it writes the texts NUL-separated
// for pmpd-tokenize.
import { readFileSync, writeFileSync } from "node:fs";

const [inpPath, outPath, third, fourth] = process.argv.slice(2);
const sep = Buffer.from("\n__ggml_vocab_test__\n");
const inp = readFileSync(inpPath), texts = [];
for (let start = 0; start < inp.length;) {
    const end = inp.indexOf(sep, start);
    if (end < 0) break;
    texts.push(inp.subarray(start, end));
    start = end + sep.length;
}
if (third === "--texts") {
    writeFileSync(fourth, Buffer.concat(texts.map((t) => Buffer.concat([t, Buffer.from([0])]))));
    process.exit(0);
}
const expected = readFileSync(outPath, "utf8").split("\n").slice(0, texts.length)
    .map((l) => l.trim() === "" ? [] : l.trim().split(/\s+/).map(Number));
const got = readFileSync(third, "utf8").split("\n").slice(0, texts.length)
    .map((l) => (l === "" ? [] : l.split(",").map(Number)));
let differ = 0, ids = 0;
texts.forEach((t, i) => {
    const a = got[i] ?? [], b = expected[i] ?? [];
    ids += b.length;
    let k = 0;
    while (k < a.length && k < b.length && a[k] === b[k]) k++;
    if (k < a.length || k < b.length) {
        differ++;
        console.log(`text ${i} ${JSON.stringify(t.toString("utf8").slice(0, 40))}: first difference at id ${k}: ` +
            `pmpd ${JSON.stringify(a.slice(k, k + 5))}, expected ${JSON.stringify(b.slice(k, k + 5))}`);
    }
});
console.log(`${inpPath.replace(/.*\//, "").replace(/\.inp$/, "")}: ${texts.length - differ}/${texts.length} texts equal (${ids} ids)`);
process.exit(differ || texts.length === 0 ? 1 : 0);
