#!/bin/bash
# `zerofit run` of a GRPO job (issue 32) on 2 MPI ranks: the coordinator hands out prompt batches, the
# workers roll out, score and train, and the job prints its rollout batch and KV-cache bytes at the start.
# The same job with one worker killed (-9) mid-run restarts from its last checkpoint and ends bit-identical
# to the uninterrupted run (the checkpoint files of the final step compare equal): the rollouts of a step
# are a function of the weights, the step and the prompt, so a resumed job samples what the first would have.
# The job trains LoRA adapters with a KL penalty, so its reference is the policy's base with the adapters
# disabled (lora-base), which the job says at its start.
# usage: grpo_restart_e2e.sh path/to/zerofit path/to/zerofit_make_arith_prefs
set -u
Z="$1"
GEN="$2"
. "$(dirname "$0")/lib.sh"
"$GEN" --out "$D/data" --train 200 --test 16 --max-operand 40 --ids --pad > /dev/null || fail "data generation"
spec() {  # spec NAME CHECKPOINT_DIR
  cat > "$D/$1.yaml" <<YAML
name: $1
task: grpo
model: $D/data
data: $D/data          # train_prompts_ids.jsonl / test_prompts_ids.jsonl
world_size: 2
max_restarts: 2
training: {steps: 24, global_batch: 4, gradient_accumulation: 2, lr: 1.0e-3, max_length: 16}
rollout: {samples_per_prompt: 4, max_new_tokens: 5, temperature: 1.0, batch: 6}
grpo: {iterations: 2, beta: 0.04}
lora: {rank: 4, alpha: 8}
rewards:
  - {type: answer, rule: exact}
checkpoint: {dir: $2, every: 4, keep: 1}
YAML
}
spec straight "$D/ck_straight"
spec killed "$D/ck_killed"

"$Z" run "$D/straight.yaml" --state-dir "$D/s1" > "$D/straight.log" 2>&1 || { cat "$D/straight.log"; fail "uninterrupted run"; }
grep -q "succeeded after 1 attempt" "$D/straight.log" || fail "uninterrupted run: $(tail -3 "$D/straight.log")"
grep -q "rollout batch: 6 sequences per generation pass (8 per rank per step); KV cache [0-9]* bytes" \
  "$D/straight.log" || { cat "$D/straight.log"; fail "no rollout plan at the start"; }
grep -q "attempt 1: [0-9]* training prompts, steps 0\.\." "$D/straight.log" \
  || { cat "$D/straight.log"; fail "the opening line does not count prompts"; }
grep -q "reference: lora-base (the policy's frozen base" "$D/straight.log" \
  || { cat "$D/straight.log"; fail "no lora-base reference line at the start"; }

"$Z" run "$D/killed.yaml" --state-dir "$D/s2" > "$D/killed.log" 2>&1 &
RUN=$!
kill_worker_at "$D/killed.log" 7
expect_recovered $RUN "$D/killed.log"
for r in 0 1; do
  cmp "$D/ck_straight/step-00000048/rank-0000$r.safetensors" "$D/ck_killed/step-00000048/rank-0000$r.safetensors" \
    || { ls "$D/ck_straight" "$D/ck_killed"; fail "rank $r state differs from the uninterrupted run"; }
done
echo "PASS (GRPO job killed after step 8, resumed from its checkpoint, ended bit-identical)"
