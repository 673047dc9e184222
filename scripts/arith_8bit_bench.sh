#!/bin/bash
# 8-bit AdamW moments beside fp32 ones on the example jobs (BENCHMARKS.md, "8-bit AdamW moments on the
# example jobs"): examples/jobs/arith_{reward,dpo,sft}.yaml with the optimizer state on the device (offload
# off: the GPU memory 8-bit moments save), once with `optim: adamw_torch` and once with `optim: adamw_8bit`,
# ROUNDS rounds (default 3) alternating, each job's outputs in a temporary folder; prints each run's wall
# time and held-out figure. OFFLOAD=1 keeps the jobs' `offload: true` (the state in host memory: the host
# memory 8-bit moments save, BENCHMARKS.md "8-bit AdamW moments with offload"; the bytes themselves are
# planner_validation's: the tiny models' state is lost in the process's resident memory).
# usage (from the repository root, after scripts/setup.sh): [OFFLOAD=1] scripts/arith_8bit_bench.sh [ROUNDS] [JOBS]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
JOBS=${2:-"reward dpo sft"}
Z=${BUILD_DIR:-build}/cli/zerofit
OFFLOAD_VALUE=$([ "${OFFLOAD:-0}" = 1 ] && echo true || echo false)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for job in $JOBS; do
  for optim in adamw_torch adamw_8bit; do
    # Offload off, the optimizer named, no checkpoints, outputs under $TMP.
    sed -e "s|^  offload: true.*|  offload: ${OFFLOAD_VALUE}\n  optim: $optim|" -e '/^checkpoint:/d' \
        -e "s|^metrics: .*|metrics: {jsonl: $TMP/$job-$optim.jsonl}|" -e "s|^export: .*|export: $TMP/$job-$optim-out|" \
        "examples/jobs/arith_$job.yaml" > "$TMP/$job-$optim.yaml"
    grep -q "optim: $optim" "$TMP/$job-$optim.yaml" || { echo "arith_$job.yaml has no 'offload: true' line to replace" >&2; exit 1; }
  done
done
for round in $(seq "$ROUNDS"); do
  for job in $JOBS; do
    for optim in adamw_torch adamw_8bit; do
      log=$TMP/$job-$optim.log
      /usr/bin/time -o "$TMP/time" -f %e "$Z" run "$TMP/$job-$optim.yaml" --state-dir "$TMP/state" > "$log" 2>&1 \
        || { echo "$job $optim failed:" >&2; tail "$log" >&2; exit 1; }
      rm -rf "$TMP/state" "$TMP/$job-$optim-out"
      figure=$(grep -o "done: held-out [a-z ]*[0-9.]*" "$log" | tail -1)
      echo "round $round $job $optim $(cat "$TMP/time") s  ${figure#done: }"
    done
  done
done
