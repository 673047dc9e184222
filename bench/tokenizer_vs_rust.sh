#!/usr/bin/env bash
# zerofit::text vs the Rust `tokenizers` library (npm tokenizers 0.23), single thread, same documents, same
# run. Prints both tables, whether both produced identical ids for every document, and the speed ratio per
# tokenizer (zerofit / Rust; > 1 means zerofit is faster).
#   bench/tokenizer_vs_rust.sh [BUILD_DIR=build] [REPS=5]     env: HF_DIR, MB (text size, default 3), THREADS
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$repo/build}"
reps="${2:-5}"
hf="${HF_DIR:-$repo/../shared/hf-tokenizers}"
text="$build/tokenizer_bench_text.txt"
oracle="$repo/tests/text/oracle"
[[ -d "$oracle/node_modules/tokenizers" ]] || (cd "$oracle" && npm install --no-save --no-package-lock tokenizers@0.23)
python3 "$repo/bench/make_tokenizer_bench_text.py" "$text" "${MB:-3}"
echo "== zerofit"
mkdir -p "$build/tokenizer_ids/zerofit" "$build/tokenizer_ids/rust"
"$build/bench/zerofit_tokenizer_bench" --hf-dir "$hf" --text "$text" --reps "$reps" --threads "${THREADS:-1}" \
  --dump-ids "$build/tokenizer_ids/zerofit" \
  | tee "$build/tokenizer_bench_zerofit.txt"
echo "== Rust tokenizers $(node -p "require('$oracle/node_modules/tokenizers/package.json').version")"
DUMP_IDS="$build/tokenizer_ids/rust" node "$repo/bench/tokenizer_bench.mjs" "$hf" "$text" "" "$reps" \
  | tee "$build/tokenizer_bench_rust.txt"
echo "== ids (every document, both libraries)"
for f in "$build"/tokenizer_ids/zerofit/*.ids; do
  name=$(basename "$f" .ids)
  if cmp -s "$f" "$build/tokenizer_ids/rust/$name.ids"; then echo "$name: identical ($(wc -l < "$f") documents)";
  else echo "$name: DIFFERENT ($(cmp "$f" "$build/tokenizer_ids/rust/$name.ids" | head -1))"; fi
done
echo "== ratio (zerofit / Rust, 1 thread)"
join <(awk '{print $1, $8}' "$build/tokenizer_bench_zerofit.txt" | sort) \
     <(awk '{print $1, $8}' "$build/tokenizer_bench_rust.txt" | sort) \
  | awk '{printf "%-14s %7.2f MB/s vs %7.2f MB/s  ratio %.2f\n", $1, $2, $3, $2 / $3}'
