#!/usr/bin/env bash
# scripts/gpu_bench.sh rehearsed on the CPU (issue 30): the tiny shape, zerofit_train_prefs's reward run with
# and without offload and its DPO run, and one transformers run (skipped without torch/transformers for
# Python, run on the CPU where they exist). Proves the driver end to end: the runs, the reading of zerofit's
# metrics JSONL, the records and the markdown table; nothing about speed.
#   gpu_bench_cpu_e2e.sh <repository root> <build dir>
set -uo pipefail
ROOT=${1:?usage: gpu_bench_cpu_e2e.sh <repository root> <build dir>}
BUILD=${2:?usage: gpu_bench_cpu_e2e.sh <repository root> <build dir>}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
"$ROOT/scripts/gpu_bench.sh" --build-dir "$BUILD" --logs "$D/logs" --work "$D/work" --device cpu --tiny \
  --steps 2 --warmup 1 --deadline 60 --only 'zf-reward-bf16,zf-reward-bf16-offload,zf-reward-bf16-offload-dpu,zf-dpo-bf16,zf-sft-bf16,hf-reward-bf16,hf-sft-bf16' \
  >"$D/out.log" 2>&1 || fail "gpu_bench.sh exited $?: $(tail -n 20 "$D/out.log")"
TABLE=$D/logs/bench.md
[[ -f "$TABLE" ]] || fail "no table: $(tail -n 20 "$D/out.log")"
cat "$TABLE"
row() { grep -F "| \`$1\` |" "$TABLE" || fail "no row $1"; }
for id in zf-reward-bf16 zf-reward-bf16-offload zf-reward-bf16-offload-dpu zf-dpo-bf16 zf-sft-bf16; do
  # pairs/s and median step ms are numbers: the run finished and its metrics were read
  row "$id" | awk -F'|' '{ exit !($6 ~ /^ [0-9]+\.[0-9]+ $/ && $7 ~ /^ [0-9]+\.[0-9] $/) }' ||
    fail "$id: no figures ($(row "$id"))"
  grep -q '"status": "ok"' "$D/logs/bench/$id.json" || fail "$id: record $(cat "$D/logs/bench/$id.json")"
done
# The transformers row: figures where Python has torch and transformers, else the reason it was skipped.
for id in hf-reward-bf16 hf-sft-bf16; do
  row "$id" | grep -qE '\| [0-9]+\.[0-9]+ \||skipped: no torch/transformers' || fail "$id: $(row "$id")"
done
row zf-reward-bf16 | grep -qF "vs \`hf-reward-bf16\`" || fail "zf-reward-bf16 names no peer"
row zf-sft-bf16 | grep -qF "vs \`hf-sft-bf16\`" || fail "zf-sft-bf16 names no peer"
[[ $(sed '/step breakdown/,$d' "$TABLE" | grep -c '^| `') == 7 ]] || fail "want 7 rows (--only)"
# Below it, each zerofit row's stages: figures in every column the metrics have (the offload row's CPU AdamW).
[[ $(sed -n '/step breakdown/,/device clock/p' "$TABLE" | grep -c '^| `zf-') == 5 ]] || fail "want 5 step breakdown rows"
# Then each zerofit row's device clock: on the CPU the host device's, so its forward is the host's forward
# (inside its scope: microseconds apart, 0.2 ms for the two medians' rounding to 0.1).
[[ $(sed -n '/device clock/,$p' "$TABLE" | grep -c '^| `zf-') == 5 ]] || fail "want 5 device clock rows"
# shellcheck disable=SC2016 # the backquotes are the table's, not a command
sed -n '/device clock/,$p' "$TABLE" | grep '^| `zf-reward-bf16` ' |
  awk -F'|' '{ d = $4 - $8; exit !($4 ~ /^ [0-9]+\.[0-9] $/ && d <= 0.2 && d >= -0.2) }' ||
  fail "the device clock's forward is not the host's"
# shellcheck disable=SC2016 # the backquotes are the table's, not a command
sed -n '/step breakdown/,$p' "$TABLE" | grep '^| `zf-reward-bf16-offload` ' |
  awk -F'|' '{ exit !($9 ~ /^ [0-9]+\.[0-9] $/) }' || fail "no CPU AdamW time in the offload row's breakdown"
# --dry-run: every run's command line (the full shape), nothing run, the table above left alone.
"$ROOT/scripts/gpu_bench.sh" --build-dir "$BUILD" --logs "$D/logs" --work "$D/work-dry" --dry-run >"$D/dry.log" 2>&1 ||
  fail "--dry-run exited $?: $(cat "$D/dry.log")"
[[ $(grep -c 'transformers_prefs_bench.py .*--seq 1024' "$D/dry.log") == 5 &&
  $(grep -c 'zf-sft-bf16: .*--task sft .*--global-batch 16 --micro 1 --max-length 1024' "$D/dry.log") == 1 &&
  $(grep -c 'zerofit_train_prefs .*--global-batch 8 --micro 1 --max-length 1024' "$D/dry.log") == 9 &&
  $(grep -c 'zf-reward-bf16-8bit: .*--optim adamw_8bit' "$D/dry.log") == 1 &&
  $(grep 'zf-reward-bf16-8bit-offload: ' "$D/dry.log" | grep -- '--offload' | grep -c -- '--optim adamw_8bit') == 1 &&
  $(grep -c 'zf-reward-bf16-unfused: .*--fused-kernels off' "$D/dry.log") == 1 &&
  $(grep -c 'zf-reward-bf16-offload-dpu: .*--offload --threads [0-9]* --dpu-start 1' "$D/dry.log") == 1 &&
  $(grep -c -- '--seq 4096 .*--checkpointing\|--max-length 4096 .*--checkpointing' "$D/dry.log") == 2 ]] ||
  fail "--dry-run's commands: $(cat "$D/dry.log")"
[[ -f "$TABLE" && ! -e "$D/work-dry/data_v4096_t1024" ]] || fail "--dry-run ran something"
# The delayed update needs offload: a clear error naming the flag, before any rank loads data.
if "$BUILD/worker/torch/zerofit_train_prefs" --task reward --data "$D/work/data_v4096_t64" --dpu-start 1 \
  >"$D/dpu.log" 2>&1; then
  fail "--dpu-start without --offload was accepted"
fi
grep -q -- "--dpu-start needs --offload" "$D/dpu.log" || fail "--dpu-start without --offload: $(cat "$D/dpu.log")"
echo PASS
