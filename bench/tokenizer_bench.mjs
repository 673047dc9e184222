#!/usr/bin/env node
// The Rust `tokenizers` library (npm `tokenizers` 0.23, native module) on the same documents as
// zerofit_tokenizer_bench: single-threaded, one `await encode(doc)` after another (not encodeBatch),
// add_special_tokens=false. Prints the same columns.
//   node tokenizer_bench.mjs HF_DIR TEXT_FILE [names=a,b] [reps=5] [doc_bytes=4096]
// With DUMP_IDS=DIR in the environment it also writes DIR/<name>.ids (one line of ids per document), the
// format of zerofit_tokenizer_bench --dump-ids, so `cmp` proves both agree on the whole text.
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "../tests/text/oracle/package.json"));
const { Tokenizer } = require("tokenizers");

const [hfDir, textPath, namesArg, repsArg, docArg] = process.argv.slice(2);
const names = (namesArg || "qwen2.5,mistral-v0.3,tinyllama,gpt2,smollm2").split(",");
const reps = Number(repsArg || 5);
const docBytes = Number(docArg || 4096);
const buffer = fs.readFileSync(textPath);

// Same cut points as the C++ bench: about docBytes bytes, then up to and including the next newline.
const docs = [];
for (let begin = 0; begin < buffer.length; ) {
  let end = Math.min(buffer.length, begin + docBytes);
  const newline = buffer.indexOf(10, end);
  end = newline < 0 ? buffer.length : newline + 1;
  docs.push(buffer.subarray(begin, end).toString("utf8"));
  begin = end;
}
const mb = buffer.length / 1e6;
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];

for (const name of names) {
  const tokenizer = Tokenizer.fromFile(path.join(hfDir, name, "tokenizer.json"));
  if (process.env.DUMP_IDS) {
    const lines = [];
    for (const doc of docs) lines.push((await tokenizer.encode(doc, null, { addSpecialTokens: false })).getIds().join(" "));
    fs.writeFileSync(path.join(process.env.DUMP_IDS, `${name}.ids`), lines.join("\n") + "\n");
  }
  const rates = [];
  let tokens = 0;
  for (let r = 0; r < reps; ++r) {
    tokens = 0;
    const start = process.hrtime.bigint();
    for (const doc of docs) tokens += (await tokenizer.encode(doc, null, { addSpecialTokens: false })).getIds().length;
    rates.push(mb / (Number(process.hrtime.bigint() - start) / 1e9));
  }
  console.log(`${name.padEnd(14)} ${mb.toFixed(2).padStart(7)} MB ${String(tokens).padStart(9)} tokens  1 thread: ${median(rates).toFixed(2).padStart(7)} MB/s`);
}
