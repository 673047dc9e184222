#!/bin/bash
# One job, two front ends (issue 18): a job spec run by `zerofit run` and the same job as
# `zerofit_train_prefs` flags (a DPO job with LoRA adapters, whose reference is the policy's base with the
# adapters off: `lora` and `reference` travel in the plan, issue 32; its DPO loss, seed and delayed
# parameter update are spec fields too, issue 31)
#   1. resolve to the same JobPlan, byte for byte (`zerofit status --plan` vs `zerofit_train_prefs
#      --print-plan`), which reaches the trainer through the one mapping (worker/torch/train/plan_options.h);
#   2. train on the same micro-batches (the coordinator's step scheduler, which zerofit_train_prefs runs
#      locally) and end with byte-identical parameters (the exported model.safetensors), with the same
#      learning rate at every step in both metrics files;
#   3. refuse an export into the model's directory before training.
# usage: plan_equality_e2e.sh path/to/zerofit path/to/zerofit_train_prefs path/to/zerofit_make_arith_prefs
set -u
Z="$1"
T="$2"
GEN="$3"
. "$(dirname "$0")/lib.sh"
"$GEN" --out "$D/data" --train 120 --test 30 --ids --pad > /dev/null || fail "data generation"
start_serve "$D/s" "$D/serve.log"
cat > "$D/job.yaml" <<YAML
name: zerofit_train_prefs
task: dpo
model: $D/data
data: $D/data
world_size: 2
training: {steps: 12, global_batch: 16, micro_batch: 4, gradient_accumulation: 2, lr: 1.0e-3,
           lr_schedule: cosine, warmup_steps: 2, min_lr: 1.0e-5, weight_decay: 0.1, offload: true,
           max_length: 64, seed: 7, delayed_update_from: 3}
dpo: {beta: 0.2, label_smoothing: 0.1}
eval: {every: 5, max_samples: 30}
metrics: {jsonl: $D/runs/m.jsonl, tensorboard: $D/runs/tb}
export: $D/runs/rm
lora: {rank: 4, alpha: 8}
YAML
job=$("$Z" submit "$D/job.yaml" --state-dir "$D/s" | awk '{print $1}')
"$Z" status "$job" --plan --state-dir "$D/s" > "$D/from_spec.json" || fail "status --plan"
kill -9 $SERVER; wait $SERVER 2>/dev/null; SERVER=""
ROOT=""; [ "$(id -u)" = 0 ] && ROOT=--allow-run-as-root
flags() {  # flags RUNS_DIR: the job above as zerofit_train_prefs flags
  echo --task dpo --lora-rank 4 --lora-alpha 8 --data "$D/data" --steps 12 --global-batch 16 --micro 2 --lr 1e-3 --lr-schedule cosine \
    --warmup-steps 2 --min-lr 1e-5 --weight-decay 0.1 --offload --max-length 64 --eval-every 5 \
    --eval-max-samples 30 --seed 7 --dpu-start 3 --beta 0.2 --label-smoothing 0.1 --metrics-jsonl "$1/m.jsonl" --tensorboard "$1/tb" --export "$1/rm"
}
mpiexec --oversubscribe $ROOT -n 2 "$T" $(flags "$D/runs") --print-plan > "$D/from_flags.json" 2> "$D/flags.err" \
  || fail "train_prefs --print-plan: $(cat "$D/flags.err")"
grep -q '"version": 12' "$D/from_spec.json" || fail "no plan: $(cat "$D/from_spec.json")"
grep -q '"beta": 0.2' "$D/from_spec.json" || fail "no DPO beta in the plan: $(cat "$D/from_spec.json")"
grep -q '"seed": 7' "$D/from_spec.json" || fail "no seed in the plan: $(cat "$D/from_spec.json")"
grep -q '"reference": "lora-base"' "$D/from_spec.json" || fail "no lora-base reference: $(cat "$D/from_spec.json")"
grep -q '"rank": 4' "$D/from_spec.json" || fail "no LoRA rank in the plan: $(cat "$D/from_spec.json")"
diff "$D/from_spec.json" "$D/from_flags.json" > "$D/diff" || fail "the two front ends resolve different plans: $(cat "$D/diff")"
echo "the spec and the flags resolve to the same job plan"
# A GRPO job with TRL's newer GRPOConfig options (GSPO's sequence ratio, delta, masked truncations, batch
# reward scale, top_k/min_p sampling, top_entropy_quantile) and a format reward: the spec (as `zerofit submit` stores it) and the
# flags resolve to the same plan.
cat > "$D/grpo.yaml" <<YAML
name: zerofit_train_prefs
task: grpo
model: $D/data
data: $D/data
world_size: 2
training: {steps: 4, global_batch: 8, micro_batch: 2, gradient_accumulation: 2, lr: 1.0e-3, max_length: 24}
rollout: {samples_per_prompt: 4, max_new_tokens: 6, top_k: 5, min_p: 0.1}
grpo: {iterations: 2, importance_sampling_level: sequence, delta: 1.5, mask_truncated_completions: true,
       scale_rewards: batch, loss_type: dapo, top_entropy_quantile: 0.2, use_bias_correction_kl: true}
rewards:
  - {type: answer}
  - {type: format, pattern: '[0-9]+', weight: 0.5}
YAML
"$Z" plan --spec "$D/grpo.yaml" > "$D/grpo_spec.json" || fail "plan --spec grpo.yaml"
mpiexec --oversubscribe $ROOT -n 2 "$T" --task grpo --data "$D/data" --steps 4 --global-batch 8 --micro 2 \
  --max-length 24 --samples-per-prompt 4 --max-new-tokens 6 --top-k 5 --min-p 0.1 --iterations 2 \
  --importance-sampling-level sequence --delta 1.5 --mask-truncated-completions true --scale-rewards batch \
  --loss-type dapo --top-entropy-quantile 0.2 --use-bias-correction-kl true --reward-format '[0-9]+' --reward-format-weight 0.5 --print-plan > "$D/grpo_flags.json" \
  2> "$D/grpo_flags.err" || fail "train_prefs --task grpo --print-plan: $(cat "$D/grpo_flags.err")"
for field in '"top_k": 5' '"scale_rewards": "batch"' '"importance_sampling_level": "sequence"' '"delta": 1.5' \
             '"mask_truncated_completions": true' '"type": "format"' '"top_entropy_quantile": 0.2'; do
  grep -q "$field" "$D/grpo_spec.json" || fail "no $field in the GRPO plan: $(cat "$D/grpo_spec.json")"
done
diff "$D/grpo_spec.json" "$D/grpo_flags.json" > "$D/grpo_diff" || fail "GRPO: the two front ends differ: $(cat "$D/grpo_diff")"
echo "a GRPO spec and its flags resolve to the same job plan"
# Reference-free DPO: CPO (reference_free with rpo_alpha) and ORPO, spec and flags; neither keeps a
# reference.
for loss in cpo orpo; do
  if [ $loss = cpo ]; then section='{reference_free: true, rpo_alpha: 1.0}'; extra="--reference-free true --rpo-alpha 1"
  else section='{loss_type: orpo, beta: 0.2}'; extra="--loss orpo --beta 0.2"; fi
  cat > "$D/$loss.yaml" <<YAML
name: zerofit_train_prefs
task: dpo
model: $D/data
data: $D/data
world_size: 2
training: {steps: 4, global_batch: 8, micro_batch: 2, gradient_accumulation: 2, lr: 1.0e-3, max_length: 24}
dpo: $section
YAML
  "$Z" plan --spec "$D/$loss.yaml" > "$D/${loss}_spec.json" || fail "plan --spec $loss.yaml"
  mpiexec --oversubscribe $ROOT -n 2 "$T" --task dpo --data "$D/data" --steps 4 --global-batch 8 --micro 2 \
    --max-length 24 $extra --print-plan > "$D/${loss}_flags.json" 2> "$D/${loss}_flags.err" \
    || fail "train_prefs $loss --print-plan: $(cat "$D/${loss}_flags.err")"
  grep -q '"reference": "none"' "$D/${loss}_spec.json" || fail "$loss keeps a reference: $(cat "$D/${loss}_spec.json")"
  diff "$D/${loss}_spec.json" "$D/${loss}_flags.json" > "$D/${loss}_diff" \
    || fail "$loss: the two front ends differ: $(cat "$D/${loss}_diff")"
done
grep -q '"rpo_alpha": 1.0' "$D/cpo_spec.json" && grep -q '"reference_free": true' "$D/cpo_spec.json" \
  || fail "no rpo_alpha/reference_free in the CPO plan: $(cat "$D/cpo_spec.json")"
# Bad DPO flags are refused by name before anything runs.
bad_flag() {  # bad_flag WANT FLAGS...: --print-plan must fail, saying WANT
  want="$1"; shift
  mpiexec --oversubscribe $ROOT -n 1 "$T" --data "$D/data" --steps 4 --global-batch 8 "$@" --print-plan \
    > "$D/bad.out" 2> "$D/bad.err" && fail "accepted: $*"
  grep -qF -- "$want" "$D/bad.err" || fail "$*: $(cat "$D/bad.err")"
}
bad_flag "flag --reference-free: 'maybe' is not true or false" --task dpo --reference-free maybe
bad_flag "flag --rpo-alpha: does not apply to loss_type orpo" --task dpo --loss orpo --rpo-alpha 1
bad_flag "flag --rpo-alpha applies to --task dpo only" --task sft --rpo-alpha 1
echo "CPO and ORPO specs and their flags resolve to the same job plans, without a reference"
# 8-bit AdamW moments (Hugging Face's optim name, bitsandbytes' min_8bit_size): spec and flags, one plan;
# with offload (the moments in host memory) too; under another name they are refused.
cat > "$D/q8.yaml" <<YAML
name: zerofit_train_prefs
task: sft
model: $D/data
data: $D/data
world_size: 2
training: {steps: 4, global_batch: 8, micro_batch: 2, gradient_accumulation: 2, lr: 1.0e-3, max_length: 24,
           optim: adamw_bnb_8bit, min_8bit_size: 1024}
YAML
"$Z" plan --spec "$D/q8.yaml" > "$D/q8_spec.json" || fail "plan --spec q8.yaml"
mpiexec --oversubscribe $ROOT -n 2 "$T" --task sft --data "$D/data" --steps 4 --global-batch 8 --micro 2 \
  --max-length 24 --optim adamw_8bit --min-8bit-size 1024 --print-plan > "$D/q8_flags.json" 2> "$D/q8_flags.err" \
  || fail "train_prefs --optim adamw_8bit --print-plan: $(cat "$D/q8_flags.err")"
grep -q '"optim": "adamw_8bit"' "$D/q8_spec.json" && grep -q '"min_8bit_size": 1024' "$D/q8_spec.json" \
  || fail "no optim/min_8bit_size in the plan: $(cat "$D/q8_spec.json")"
diff "$D/q8_spec.json" "$D/q8_flags.json" > "$D/q8_diff" || fail "adamw_8bit: the two front ends differ: $(cat "$D/q8_diff")"
bad_flag "flag --optim: 'sgd' is not an optimizer zerofit runs" --task sft --optim sgd
sed -e 's|min_8bit_size: 1024}|min_8bit_size: 1024, offload: true}|' "$D/q8.yaml" > "$D/q8off.yaml"
"$Z" plan --spec "$D/q8off.yaml" > "$D/q8off_spec.json" || fail "plan --spec q8off.yaml"
mpiexec --oversubscribe $ROOT -n 2 "$T" --task sft --data "$D/data" --steps 4 --global-batch 8 --micro 2 \
  --max-length 24 --optim adamw_8bit --min-8bit-size 1024 --offload --print-plan > "$D/q8off_flags.json" \
  2> "$D/q8off_flags.err" || fail "train_prefs --optim adamw_8bit --offload --print-plan: $(cat "$D/q8off_flags.err")"
grep -q '"optim": "adamw_8bit"' "$D/q8off_spec.json" && grep -q '"offload": true' "$D/q8off_spec.json" \
  || fail "no optim/offload in the plan: $(cat "$D/q8off_spec.json")"
diff "$D/q8off_spec.json" "$D/q8off_flags.json" > "$D/q8off_diff" \
  || fail "adamw_8bit with offload: the two front ends differ: $(cat "$D/q8off_diff")"
echo "an adamw_8bit spec and its flags resolve to the same job plan, with offload too"
# RLOO (TRL's RLOOTrainer as GRPO's loss_type rloo, with RLOOConfig's normalize_advantages and
# reward_clip_range): spec and flags.
sed -e 's|^grpo: .*|grpo: {loss_type: rloo, beta: 0.05, normalize_advantages: true, reward_clip_range: [-1, 2.5]}|' \
  -e '/^       scale_rewards/d' \
  "$D/grpo.yaml" > "$D/rloo.yaml"
"$Z" plan --spec "$D/rloo.yaml" > "$D/rloo_spec.json" || fail "plan --spec rloo.yaml: $(cat "$D/rloo.yaml")"
mpiexec --oversubscribe $ROOT -n 2 "$T" --task grpo --data "$D/data" --steps 4 --global-batch 8 --micro 2 \
  --max-length 24 --samples-per-prompt 4 --max-new-tokens 6 --top-k 5 --min-p 0.1 --loss-type rloo --kl-beta 0.05 \
  --normalize-advantages true --reward-clip-range -1,2.5 --reward-format '[0-9]+' --reward-format-weight 0.5 \
  --print-plan > "$D/rloo_flags.json" \
  2> "$D/rloo_flags.err" || fail "train_prefs --loss-type rloo --print-plan: $(cat "$D/rloo_flags.err")"
grep -q '"normalize_advantages": true' "$D/rloo_spec.json" || fail "no normalize_advantages: $(cat "$D/rloo_spec.json")"
tr -d ' \n' < "$D/rloo_spec.json" | grep -q '"reward_clip_range":\[-1.0,2.5\]' \
  || fail "no reward_clip_range: $(cat "$D/rloo_spec.json")"
diff "$D/rloo_spec.json" "$D/rloo_flags.json" > "$D/rloo_diff" || fail "rloo: the two front ends differ: $(cat "$D/rloo_diff")"
bad_flag "grpo.normalize_advantages: applies to loss_type rloo only" --task grpo --normalize-advantages true
bad_flag "grpo.reward_clip_range: applies to loss_type rloo only" --task grpo --reward-clip-range 0,1
bad_flag "flag --reward-clip-range: '0' is not MIN,MAX (two numbers)" --task grpo --loss-type rloo --reward-clip-range 0
echo "an RLOO spec and its flags resolve to the same job plan"

# Train it both ways.
"$Z" run "$D/job.yaml" --state-dir "$D/s2" > "$D/run.log" 2>&1 || { tail -20 "$D/run.log"; fail "zerofit run"; }
OMP_NUM_THREADS=1 mpiexec --oversubscribe $ROOT -n 2 "$T" $(flags "$D/standalone") > "$D/standalone.log" 2>&1 \
  || { tail -20 "$D/standalone.log"; fail "zerofit_train_prefs"; }
for f in model.safetensors config.json; do
  [ -s "$D/runs/rm/$f" ] || fail "zerofit run exported no $f"
  cmp "$D/runs/rm/$f" "$D/standalone/rm/$f" || fail "$f differs between zerofit run and zerofit_train_prefs"
done
# Every step's learning rate, as each front end reported it, is the same.
lrs() { grep -o '"lr":[^,}]*' "$1" | cut -d: -f2 | tr '\n' ' '; }
a=$(lrs "$D/runs/m.jsonl"); b=$(lrs "$D/standalone/m.jsonl")
[ -n "$a" ] && [ "$(echo $a | wc -w)" = 12 ] || fail "zerofit run's metrics hold no 12 learning rates: '$a'"
[ "$a" = "$b" ] || fail "learning rates differ: run '$a' vs train_prefs '$b'"
# Both front ends refuse an export into the model's directory (it would replace the weights and config.json
# every later attempt starts from) before training, naming the field; nothing is written there.
before=$(ls -l --time-style=+%s.%N "$D/data")
sed "s|^export: .*|export: $D/data|" "$D/job.yaml" > "$D/into_model.yaml"
"$Z" run "$D/into_model.yaml" --state-dir "$D/s3" > "$D/into_model.log" 2>&1 && fail "zerofit run exported into the model"
grep -q "into_model.yaml:[0-9]*: field 'export': $D/data would replace the model's config.json" "$D/into_model.log" \
  || fail "zerofit run: $(cat "$D/into_model.log")"
OMP_NUM_THREADS=1 mpiexec --oversubscribe $ROOT -n 2 "$T" $(flags "$D/refused" | sed "s|--export [^ ]*|--export $D/data|") \
  > "$D/refused.log" 2>&1 && fail "zerofit_train_prefs exported into the model"
grep -q "field 'export': $D/data would replace the model's config.json" "$D/refused.log" \
  || fail "zerofit_train_prefs: $(cat "$D/refused.log")"
[ "$before" = "$(ls -l --time-style=+%s.%N "$D/data")" ] && [ ! -e "$D/refused" ] || fail "a refused job wrote"
echo "PASS (the spec and the flags resolve to the same job plan, GRPO, CPO and ORPO ones too, and train byte-identical parameters; both refuse an export into the model)"
