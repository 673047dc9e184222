#!/bin/bash
# GRPO's top_entropy_quantile on the GRPO example (BENCHMARKS.md, "GRPO on the high-entropy tokens"):
# examples/jobs/arith_grpo.yaml with grpo.top_entropy_quantile RHO and training.seed SEED, for each seed
# and each RHO in turn; prints the held-out greedy accuracy after every evaluation and the wall time.
# usage (from the repository root, after scripts/setup.sh):
#   scripts/grpo_top_entropy_bench.sh ["1.0 0.2"] ["1234 7 99"]
set -euo pipefail
cd "$(dirname "$0")/.."
RHOS=${1:-1.0 0.2}
SEEDS=${2:-1234 7 99}
Z=${BUILD_DIR:-build}/cli/zerofit
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for seed in $SEEDS; do
  for rho in $RHOS; do
    spec=$TMP/grpo_${rho}_$seed.yaml
    sed -e "s|^  beta: 0.0 .*|  beta: 0.0\n  top_entropy_quantile: $rho|" \
        -e "s|^  lr: 5.0e-4|  lr: 5.0e-4\n  seed: $seed|" \
        -e "s|^checkpoint: .*|checkpoint: {dir: $TMP/ckpt_${rho}_$seed, every: 100, keep: 1}|" \
        -e "s|^metrics: .*|metrics: {jsonl: $TMP/m_${rho}_$seed.jsonl}|" \
        -e "s|^export: .*|export: $TMP/policy_${rho}_$seed|" examples/jobs/arith_grpo.yaml > "$spec"
    grep -q "top_entropy_quantile: $rho" "$spec" && grep -q "seed: $seed" "$spec" \
      || { echo "the GRPO example changed: update the sed" >&2; exit 1; }
    /usr/bin/time -o "$TMP/time" -f %e "$Z" run "$spec" --state-dir "$TMP/state_${rho}_$seed" > "$TMP/log" 2>&1 \
      || { echo "rho $rho seed $seed failed:" >&2; tail "$TMP/log" >&2; exit 1; }
    acc=$(grep -o '"eval/accuracy": *[0-9.]*' "$TMP/m_${rho}_$seed.jsonl" | cut -d: -f2 | tr -d ' ' | tr '\n' ' ')
    echo "seed $seed rho $rho: held-out accuracy by evaluation: $acc ($(cat "$TMP/time") s)"
  done
done
