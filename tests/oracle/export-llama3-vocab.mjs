// Writes the Llama 3 vocabulary and merges that the npm package
// llama3-tokenizer-js ships (an independent copy of Meta's tokenizer.json)
// as the text file pmpd-mkgguf --vocab-gpt2 reads:
//   node export-llama3-vocab.mjs OUT
// Ids 0..127999 are normal tokens in GPT-2's byte-level alphabet; the 256
// <|...|> tokens after them are control tokens.  Merges are listed in rank
// order (the package keeps them in a Map in insertion order).  The file
// goes under build/ and is never committed.
import { writeFileSync } from "node:fs";
import llama3Tokenizer from "llama3-tokenizer-js";

const out = process.argv[2];
if (!out) {
    console.error("usage: node export-llama3-vocab.mjs OUT");
    process.exit(2);
}
const t = llama3Tokenizer;
const lines = ["pmpd-gpt2-vocab 1", "pre llama-bpe"];
lines.push(`bos ${t.getSpecialTokenId("<|begin_of_text|>")}`);
lines.push(`eos ${t.getSpecialTokenId("<|end_of_text|>")}`);
lines.push(`eot ${t.getSpecialTokenId("<|eot_id|>")}`);
lines.push("add_bos 1");
lines.push(`tokens ${t.vocabById.length}`);
t.vocabById.forEach((text, id) => {
    if (text.includes("\n") || text.length === 0) throw new Error(`token ${id} cannot be written on a line`);
    const special = text.startsWith("<|") && text.endsWith("|>") && id >= 128000;
    lines.push(`${special ? 3 : 1} ${text}`);
});
lines.push(`merges ${t.merges.size}`);
for (const pair of t.merges.keys()) lines.push(pair);
writeFileSync(out, lines.join("\n") + "\n");
console.log(`export-llama3-vocab: ${t.vocabById.length} tokens, ${t.merges.size} merges -> ${out}`);
