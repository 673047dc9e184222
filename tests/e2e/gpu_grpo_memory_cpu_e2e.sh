#!/usr/bin/env bash
# scripts/gpu_grpo_memory.sh rehearsed on the CPU (issue 32): its four tiny configurations on the test device
# (LibTorch on the CPU, zerofit's device seam counted as device memory). Proves the plumbing end to end: the
# data folders, `zerofit plan --json`'s GRPO passes, zerofit_train_prefs's per-pass peaks read from its metrics
# JSONL, and the table; the errors mean nothing here (only the seam's buffers count on the test device).
#   gpu_grpo_memory_cpu_e2e.sh <repository root> <build dir>
set -uo pipefail
ROOT=${1:?usage: gpu_grpo_memory_cpu_e2e.sh <repository root> <build dir>}
BUILD=${2:?usage: gpu_grpo_memory_cpu_e2e.sh <repository root> <build dir>}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
"$ROOT/scripts/gpu_grpo_memory.sh" --build-dir "$BUILD" --out "$D/out" --device test --tiny >"$D/log" 2>&1 ||
  fail "gpu_grpo_memory.sh exited $?: $(tail -n 20 "$D/log")"
TABLE=$D/out/grpo-memory.md
[[ -f "$TABLE" ]] || fail "no table: $(tail -n 20 "$D/log")"
cat "$TABLE"
# Every configuration a row of figures: planned and measured MiB and an error for each pass.
# (generation: planned, the last step's, its error, the first step's, its error; then training's three)
rows=$(grep -cE '^\| [0-9]+ \| [0-9]+ \| [0-9]+ \| [0-9]+ \| [0-9]+ \| [0-9]+ \| [0-9.]+ MiB \| [0-9.]+ MiB \| [-+][0-9.]+% \| [0-9.]+ MiB \| [-+][0-9.]+% \| [0-9.]+ MiB \| [0-9.]+ MiB \| [-+][0-9.]+% \|$' "$TABLE")
[[ $rows == 4 ]] || fail "$rows of 4 configurations have figures"
grep -q '^8 passes compared; mean |error|' "$TABLE" || fail "no summary line"
echo "PASS"
