#!/usr/bin/env bash
# Regenerates tests/text/golden/*.jsonl from tests/text/corpus.jsonl with the Rust `tokenizers` library
# (npm `tokenizers` 0.23.x; installed into the git-ignored node_modules/ here on first use).
#   tests/text/oracle/make_golden.sh [HF_TOKENIZERS_DIR]   default: ../shared/hf-tokenizers next to the repo
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
hf="${1:-$repo/../shared/hf-tokenizers}"
cd "$here"
[[ -d node_modules/tokenizers ]] || npm install --no-save --no-package-lock tokenizers@0.23
python3 "$here/build_corpus.py"
for name in qwen2.5 mistral-v0.3 tinyllama gpt2 smollm2; do
  node make_golden.mjs "$hf/$name" "$repo/tests/text/corpus.jsonl" > "$repo/tests/text/golden/$name.jsonl"
  echo "golden: $name ($(wc -l < "$repo/tests/text/golden/$name.jsonl") lines)"
done
