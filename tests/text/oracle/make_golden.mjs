#!/usr/bin/env node
// Golden-file writer: encodes every corpus string with the Rust `tokenizers` library (npm `tokenizers`
// 0.23.x, a prebuilt native module) — the reference of record for zerofit::text::TokenizerJson.
//
// Usage: node make_golden.mjs TOKENIZER_DIR CORPUS.jsonl > golden.jsonl
// Each output line: {"text", "add_special_tokens", "ids", "decoded", "decoded_skip_special"}; both
// add_special_tokens values are written for every corpus string (false first).
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { Tokenizer } = require("tokenizers");

const [dir, corpusPath] = process.argv.slice(2);
if (!dir || !corpusPath) {
  process.stderr.write("usage: node make_golden.mjs TOKENIZER_DIR CORPUS.jsonl > golden.jsonl\n");
  process.exit(2);
}
const tokenizer = Tokenizer.fromFile(path.join(dir, "tokenizer.json"));
const lines = fs.readFileSync(corpusPath, "utf8").split("\n").filter((l) => l.length > 0);
for (const line of lines) {
  const { text } = JSON.parse(line);
  for (const addSpecial of [false, true]) {
    const enc = await tokenizer.encode(text, null, { addSpecialTokens: addSpecial });
    const ids = enc.getIds();
    const out = {
      text,
      add_special_tokens: addSpecial,
      ids,
      decoded: await tokenizer.decode(ids, false),
      decoded_skip_special: await tokenizer.decode(ids, true),
    };
    process.stdout.write(JSON.stringify(out) + "\n");
  }
}
