#!/usr/bin/env bash
# MB/s of `zerofit tokenize` with 1 thread vs N threads on the tokenizer benchmark text as JSONL documents.
# usage: bench/tokenize_threads.sh BUILD_DIR [RUNS=5] [THREADS=all cores] [TOKENIZER=qwen2.5] [MEGABYTES=3]
# Writes the text with make_tokenizer_bench_text.py, cuts it into {"text": ...} lines of about 4 KB at line
# ends, then runs 1 thread and N threads alternately RUNS times each (wall clock of the whole command:
# reading, JSON, tokenizing, writing), checks the outputs are byte-identical and prints each run and the
# medians. MB/s counts the input JSONL bytes.
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR [RUNS] [THREADS] [TOKENIZER] [MEGABYTES]}
runs=${2:-5}
threads=${3:-$(nproc)}
tokenizer=${4:-qwen2.5}
megabytes=${5:-3}
here=$(cd "$(dirname "$0")" && pwd)
zerofit=$build/cli/zerofit
[ -x "$zerofit" ] || zerofit=$build/zerofit
dir=${ZEROFIT_HF_TOKENIZERS_DIR:-$here/../../shared/hf-tokenizers}/$tokenizer
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$here/make_tokenizer_bench_text.py" "$tmp/text.txt" "$megabytes" >&2
python3 - "$tmp/text.txt" "$tmp/in.jsonl" <<'PY'
import json, sys
docs, cur, size = [], [], 0
for line in open(sys.argv[1], encoding="utf-8"):
    cur.append(line); size += len(line.encode())
    if size >= 4096:
        docs.append("".join(cur)); cur, size = [], 0
if cur: docs.append("".join(cur))
with open(sys.argv[2], "w", encoding="utf-8") as f:
    for d in docs: f.write(json.dumps({"text": d, "add_special_tokens": False}, ensure_ascii=False) + "\n")
print(f"{len(docs)} documents", file=sys.stderr)
PY
bytes=$(stat -c %s "$tmp/in.jsonl")
run() {  # threads out -> seconds
  local t0 t1
  t0=$(date +%s.%N)
  "$zerofit" tokenize --tokenizer "$dir" --in "$tmp/in.jsonl" --out "$2" --threads "$1"
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}
one=() many=()
for ((i = 0; i < runs; i++)); do
  s1=$(run 1 "$tmp/out1.jsonl"); sn=$(run "$threads" "$tmp/outn.jsonl")
  cmp -s "$tmp/out1.jsonl" "$tmp/outn.jsonl" || { echo "outputs differ" >&2; exit 1; }
  one+=("$(echo "$bytes / $s1 / 1000000" | bc -l)"); many+=("$(echo "$bytes / $sn / 1000000" | bc -l)")
  printf 'run %d: 1 thread %.2f MB/s, %d threads %.2f MB/s\n' $((i + 1)) "${one[-1]}" "$threads" "${many[-1]}"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
m1=$(median "${one[@]}"); mn=$(median "${many[@]}")
printf '%s, %.2f MB input, %d runs: median 1 thread %.2f MB/s, %d threads %.2f MB/s, speedup %.2fx (outputs identical)\n' \
  "$tokenizer" "$(echo "$bytes / 1000000" | bc -l)" "$runs" "$m1" "$threads" "$mn" "$(echo "$mn / $m1" | bc -l)"
