// llama.cpp's greedy continuation, the oracle for pmpd's forward pass:
//   node greedy.mjs MODEL.gguf N PROMPT_IDS
// PROMPT_IDS is a comma-separated list of token ids (BOS included if
// wanted: nothing is added).  Prints one line per generated token,
//   ID MARGIN
// where MARGIN is llama.cpp's log-probability of its choice minus that of
// the runner-up (= the difference of their logits), so a caller can excuse a
// disagreement where llama.cpp itself was nearly undecided.  One thread, a
// context of exactly what is needed, f32 model weights as given.
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const [modelPath, countArg, idsArg] = process.argv.slice(2);
const count = Number(countArg);
if (!modelPath || !(count > 0) || !idsArg) {
    console.error("usage: node greedy.mjs MODEL.gguf N ID,ID,...");
    process.exit(2);
}
const prompt = idsArg.split(",").map(Number);
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
const context = await model.createContext({
    contextSize: Math.max(64, prompt.length + count + 8),
    batchSize: Math.max(prompt.length, 32),
    threads: { ideal: 1, min: 1 },
});
const sequence = context.getSequence();
let produced = 0;
for await (const out of sequence.evaluateWithMetadata(prompt, { probabilities: true }, { temperature: 0 })) {
    let best = -Infinity, second = -Infinity;
    for (const p of out.probabilities.values()) {
        if (p > best) { second = best; best = p; }
        else if (p > second) second = p;
    }
    const margin = second > 0 ? Math.log(best) - Math.log(second) : Infinity;
    console.log(`${out.token} ${margin.toFixed(6)}`);
    if (++produced >= count) break;
}
await context.dispose();
await model.dispose();
