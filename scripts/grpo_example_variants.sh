#!/bin/bash
# The GRPO example (examples/jobs/arith_grpo.yaml) under variants of its `grpo` section, each with several
# seeds (BENCHMARKS.md, "GRPO on the high-entropy tokens" and "CISPO and SAPO on the GRPO example"). Each
# VARIANT is what to add to the section as YAML keys ("-": nothing, the example as it is); for each seed
# every variant runs in turn, and a line gives the held-out greedy accuracy after every evaluation and the
# wall time.
# usage (from the repository root, after scripts/setup.sh):
#   SEEDS="1234 7 99" scripts/grpo_example_variants.sh - "top_entropy_quantile: 0.2"
#   SEEDS="1234 7 99" scripts/grpo_example_variants.sh - "loss_type: cispo, epsilon_high: 5.0" "loss_type: sapo"
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS=${SEEDS:-1234 7 99}
Z=${BUILD_DIR:-build}/cli/zerofit
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
[ $# -gt 0 ] || { echo "usage: $0 VARIANT... (a VARIANT is YAML keys for the grpo section, or -)" >&2; exit 2; }
for seed in $SEEDS; do
  v=0
  for variant in "$@"; do
    v=$((v + 1))
    run=$TMP/v${v}_$seed
    mkdir -p "$run"
    # The variant's keys replace the example's own (a later duplicate key is an error): the grpo section is
    # rewritten as one flow mapping.
    keys=$(printf '%s' "$variant" | sed 's/^-$//')
    python3 - "$run/job.yaml" "$seed" "$keys" "$run" <<'PY'
import re, sys
out, seed, keys, run = sys.argv[1:]
text = open("examples/jobs/arith_grpo.yaml").read()
grpo = {"loss_type": "dapo", "beta": "0.0"}
for k, val in (kv.split(":", 1) for kv in keys.split(",") if kv.strip()):
    grpo[k.strip()] = val.strip()
section = "grpo: {" + ", ".join(f"{k}: {v}" for k, v in grpo.items()) + "}\n"
text, n = re.subn(r"^grpo:\n(?:  .*\n)+", section, text, flags=re.M)
assert n == 1, "the example's grpo section changed: update this script"
text = text.replace("  lr: 5.0e-4", f"  lr: 5.0e-4\n  seed: {seed}")
text = re.sub(r"^checkpoint: .*$", f"checkpoint: {{dir: {run}/ckpt, every: 100, keep: 1}}", text, flags=re.M)
text = re.sub(r"^metrics: .*$", f"metrics: {{jsonl: {run}/m.jsonl}}", text, flags=re.M)
text = re.sub(r"^export: .*$", f"export: {run}/policy", text, flags=re.M)
open(out, "w").write(text)
PY
    /usr/bin/time -o "$run/time" -f %e "$Z" run "$run/job.yaml" --state-dir "$run/state" > "$run/log" 2>&1 \
      || { echo "seed $seed variant '$variant' failed:" >&2; tail "$run/log" >&2; exit 1; }
    acc=$(grep -o '"eval/accuracy": *[0-9.]*' "$run/m.jsonl" | cut -d: -f2 | tr -d ' ' | tr '\n' ' ')
    echo "seed $seed [$variant]: held-out accuracy by evaluation: $acc($(cat "$run/time") s)"
    rm -rf "$run/state" "$run/ckpt" "$run/policy"
  done
done
