// Does llama.cpp choose pmpd's continuation?  check-gguf-types.sh's walk in
// one process (starting node and loading node-llama-cpp once per model
// instead of once per disagreement):
//   node agree.mjs MODEL.gguf PROMPT_IDS OURS_IDS BOUND
// PROMPT_IDS and OURS_IDS are comma-separated token ids (pmpd's prompt, BOS
// included, and pmpd's greedy continuation).  llama.cpp continues greedily
// from the prompt; at its first token that differs from pmpd's, its margin
// there (log-probability of its choice minus the runner-up's) must be below
// BOUND, and it continues again from the prompt plus pmpd's tokens up to
// and including that one, until all of pmpd's tokens are checked.  Prints
//   first N                      tokens before the first disagreement
//   excused POS OURS THEIRS M    a disagreement with margin M < BOUND
//   failed POS OURS THEIRS M     one with M >= BOUND (the walk stops)
// POS counts pmpd's tokens from 0.  One thread, a context of 64 tokens and
// one batch for every prompt, as greedy.mjs uses.
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const [modelPath, promptArg, oursArg, boundArg] = process.argv.slice(2);
const bound = Number(boundArg);
if (!modelPath || !promptArg || !oursArg || !(bound > 0)) {
    console.error("usage: node agree.mjs MODEL.gguf PROMPT_IDS OURS_IDS BOUND");
    process.exit(2);
}
const prompt = promptArg.split(",").map(Number);
const ours = oursArg.split(",").map(Number);
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
const context = await model.createContext({
    contextSize: Math.max(64, prompt.length + ours.length + 8),
    batchSize: Math.max(prompt.length + ours.length, 32),
    threads: { ideal: 1, min: 1 },
});
const sequence = context.getSequence();

// llama.cpp's first choice that differs from ours[at..], greedy from the
// prompt and ours[0..at): { position, token, margin }, or null.
async function firstDifference(at) {
    await sequence.clearHistory();
    const input = prompt.concat(ours.slice(0, at));
    let position = at;
    for await (const out of sequence.evaluateWithMetadata(input, { probabilities: true }, { temperature: 0 })) {
        if (out.token !== ours[position]) {
            let best = -Infinity, second = -Infinity;
            for (const p of out.probabilities.values()) {
                if (p > best) { second = best; best = p; }
                else if (p > second) second = p;
            }
            return { position, token: out.token, margin: second > 0 ? Math.log(best) - Math.log(second) : Infinity };
        }
        if (++position >= ours.length) return null;
    }
    return null;
}

let at = 0, first = null;
while (at < ours.length) {
    const d = await firstDifference(at);
    if (!d) break;
    if (first === null) first = d.position;
    const verdict = d.margin < bound ? "excused" : "failed";
    console.log(`${verdict} ${d.position} ${ours[d.position]} ${d.token} ${d.margin.toFixed(6)}`);
    if (verdict === "failed") break;
    at = d.position + 1;
}
console.log(`first ${first === null ? ours.length : first}`);
await context.dispose();
await model.dispose();
