// Writes the corpus as NUL-terminated texts for pmpd-tokenize: node write-corpus.mjs OUT
import { writeFileSync } from "node:fs";
import { corpus } from "./tokenizer-corpus.mjs";
writeFileSync(process.argv[2], Buffer.concat(corpus.map((t) => Buffer.from(t + "\0", "utf8"))));
