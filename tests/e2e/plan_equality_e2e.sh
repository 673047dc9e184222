#!/bin/bash
# One job plan from both front ends (issue 18): a job spec submitted to `zerofit serve` and the same job as
# `zerofit_train_prefs` flags resolve to the same JobPlan, byte for byte (`zerofit status --plan` vs
# `zerofit_train_prefs --print-plan`); both then reach the trainer through the one mapping
# (worker/torch/train/plan_options.h).
# usage: plan_equality_e2e.sh path/to/zerofit path/to/zerofit_train_prefs
set -u
Z="$1"
T="$2"
D=$(mktemp -d)
SERVER=""
trap '[ -n "$SERVER" ] && kill -9 $SERVER 2>/dev/null; rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$Z" serve --state-dir "$D/s" --listen 127.0.0.1:0 > "$D/serve.log" 2>&1 &
SERVER=$!
for _ in $(seq 100); do [ -s "$D/s/address" ] && break; sleep 0.1; done
[ -s "$D/s/address" ] || fail "no coordinator"
cat > "$D/job.yaml" <<YAML
name: zerofit_train_prefs
task: reward
model: /data/arith
data: /data/arith
world_size: 2
training: {steps: 10, global_batch: 16, micro_batch: 4, gradient_accumulation: 2, lr: 1.0e-3,
           lr_schedule: cosine, warmup_steps: 2, min_lr: 1.0e-5, weight_decay: 0.1, offload: true,
           max_length: 64}
eval: {every: 5, max_samples: 30}
metrics: {jsonl: /runs/m.jsonl, tensorboard: /runs/tb}
export: /runs/rm
YAML
job=$("$Z" submit "$D/job.yaml" --state-dir "$D/s" | awk '{print $1}')
"$Z" status "$job" --plan --state-dir "$D/s" > "$D/from_spec.json" || fail "status --plan"
ROOT=""; [ "$(id -u)" = 0 ] && ROOT=--allow-run-as-root
mpiexec --oversubscribe $ROOT -n 2 "$T" --task reward --data /data/arith --steps 10 --global-batch 16 --micro 2 \
  --lr 1e-3 --lr-schedule cosine --warmup-steps 2 --min-lr 1e-5 --weight-decay 0.1 --offload --max-length 64 \
  --eval-every 5 --eval-max-samples 30 --metrics-jsonl /runs/m.jsonl --tensorboard /runs/tb --export /runs/rm \
  --print-plan > "$D/from_flags.json" 2> "$D/flags.err" || fail "train_prefs --print-plan: $(cat "$D/flags.err")"
grep -q '"version": 1' "$D/from_spec.json" || fail "no plan: $(cat "$D/from_spec.json")"
diff "$D/from_spec.json" "$D/from_flags.json" > "$D/diff" || fail "the two front ends resolve different plans: $(cat "$D/diff")"
echo "PASS (the spec and the flags resolve to the same job plan)"
