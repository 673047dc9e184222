#!/bin/bash
# ORPO in one stage beside SFT + DPO, and DPO with RPO's NLL term (BENCHMARKS.md, "ORPO in one stage beside
# SFT + DPO"): the example jobs run alternately, ROUNDS rounds (default 3), each `orpo sft dpo rpo` in that
# order, with their wall times, held-out figures and held-out NLL per chosen token (eval/dpo/nll_loss).
# The rpo job is examples/jobs/arith_dpo.yaml with `dpo: {beta: 0.1, rpo_alpha: 1.0}` and its own outputs.
# usage (from the repository root, after scripts/setup.sh): scripts/arith_objectives_bench.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
Z=${BUILD_DIR:-build}/cli/zerofit
ARITH=${BUILD_DIR:-build}/examples/arith
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
sed -e 's|^dpo: {beta: 0.1, loss_type: sigmoid, label_smoothing: 0.0}.*|dpo: {beta: 0.1, rpo_alpha: 1.0}|' \
    -e 's|dpo-metrics|rpo-metrics|; s|dpo-policy|rpo-policy|; s|^name: arith-dpo|name: arith-rpo|' \
    examples/jobs/arith_dpo.yaml > "$TMP/arith_rpo.yaml"
grep -q "rpo_alpha: 1.0" "$TMP/arith_rpo.yaml" || { echo "the DPO example's dpo line changed: update the sed" >&2; exit 1; }
for round in $(seq "$ROUNDS"); do
  for job in orpo sft dpo rpo; do
    spec=examples/jobs/arith_$job.yaml
    [ $job = rpo ] && spec=$TMP/arith_rpo.yaml
    /usr/bin/time -o "$TMP/$job.time" -f %e "$Z" run "$spec" --state-dir "$TMP/state_$job" > "$TMP/$job.log" 2>&1 \
      || { echo "$job failed:" >&2; tail "$TMP/$job.log" >&2; exit 1; }
    rm -rf "$TMP/state_$job"
    figure=$(grep -o "done: held-out [a-z ]*[0-9.]*" "$TMP/$job.log" | tail -1)
    nll=""
    [ $job = sft ] || nll=$(grep -o '"eval/dpo/nll_loss":[^,}]*' "$ARITH/$job-metrics.jsonl" | tail -1)
    echo "round $round $job $(cat "$TMP/$job.time") s  ${figure#done: }  $nll"
  done
done
