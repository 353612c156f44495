// Times llama.cpp (through the npm package node-llama-cpp) the way
// bench/compare.sh times pmpd-run, one case per process:
//   node llamacpp-bench.mjs MODEL.gguf decode|prefill THREADS PROMPT_FILE TOKENS
// decode: BOS + the prompt's first 7 tokens, then TOKENS greedy tokens;
//         rate = (TOKENS - 1) / time from the first generated token to the last
//         (the first comes from the prompt's logits, as in pmpd-run).
// prefill: BOS + the prompt's first TOKENS - 1 tokens in one batch, no
//          generation; rate = TOKENS / time.
// Prints one JSON line: {"rate": tokens/s, "tokens": n, "variant": ..., "release": ...}.
import { getLlama, LlamaLogLevel } from "node-llama-cpp";
import { readFileSync } from "node:fs";

const [modelPath, mode, threadsArg, promptFile, tokensArg] = process.argv.slice(2);
if (!modelPath || !["decode", "prefill"].includes(mode) || !promptFile) {
    console.error("usage: node llamacpp-bench.mjs MODEL.gguf decode|prefill THREADS PROMPT_FILE TOKENS");
    process.exit(2);
}
const threads = Number(threadsArg), tokens = Number(tokensArg);

// The CPU backend variant llama.cpp picked (e.g. libggml-cpu-haswell.so) is
// only said in its log.
let variant = "unknown";
const llama = await getLlama({
    gpu: false,
    build: "never",
    maxThreads: 0,
    logLevel: LlamaLogLevel.debug,
    logger(level, message) {
        const m = /libggml-cpu-([A-Za-z0-9_]+)\.so/.exec(message);
        if (m) variant = m[1];
    },
});
// LLAMA_MMAP=0: llama.cpp reads the weights into its own buffer instead of
// mapping the file (compare.sh's MMAP=0, as pmpd-run --no-mmap).
const useMmap = process.env.LLAMA_MMAP !== "0";
const model = await llama.loadModel({ modelPath, gpuLayers: 0, useMmap });
const text = readFileSync(promptFile, "utf8");
const promptIds = [model.tokens.bos, ...model.tokenize(text)];
const batch = mode === "prefill" ? tokens : 8;
if (promptIds.length < batch) {
    console.error(`llamacpp-bench: ${promptFile} gives only ${promptIds.length} tokens, ${batch} needed`);
    process.exit(1);
}
const context = await model.createContext({
    contextSize: Math.max(1024, batch + tokens + 16),
    batchSize: Math.max(batch, 32),
    threads: { ideal: threads, min: threads },
});
const sequence = context.getSequence();
let rate, count;
if (mode === "prefill") {
    const t0 = process.hrtime.bigint();
    await sequence.evaluateWithoutGeneratingNewTokens(promptIds.slice(0, tokens));
    const t1 = process.hrtime.bigint();
    count = tokens;
    rate = tokens / (Number(t1 - t0) * 1e-9);
} else {
    let first = 0n, last = 0n;
    count = 0;
    for await (const token of sequence.evaluate(promptIds.slice(0, batch), { temperature: 0 })) {
        void token;
        last = process.hrtime.bigint();
        if (count === 0) first = last;
        if (++count === tokens) break;
    }
    rate = (count - 1) / (Number(last - first) * 1e-9);
}
const release = llama.llamaCppRelease;
console.log(JSON.stringify({ rate, tokens: count, threads: context.currentThreads ?? threads, variant, mmap: useMmap,
                             release: `${release.repo}@${release.release}` }));
await context.dispose();
await model.dispose();
await llama.dispose();
