#!/usr/bin/env bash
# Trains the same short jobs with two builds of zerofit_train_prefs (e.g. the tree before a refactor and the
# working tree) on 2 MPI ranks and compares the exported model.safetensors byte for byte: SFT in bf16, a
# reward model with offload and --reduce-once, DPO from the SFT export with LoRA, the delayed parameter update
# and a non-default loss, GRPO with LoRA scored by that reward model. Both builds must accept the flags used
# (those of 2026-11-27).
#   scripts/compare_trainer_exports.sh OLD_BUILD_DIR NEW_BUILD_DIR [WORK_DIR]
set -euo pipefail
old=${1:?usage: scripts/compare_trainer_exports.sh OLD_BUILD_DIR NEW_BUILD_DIR [WORK_DIR]}
new=${2:?usage: scripts/compare_trainer_exports.sh OLD_BUILD_DIR NEW_BUILD_DIR [WORK_DIR]}
work=${3:-$(mktemp -d)}
root=""
[[ $(id -u) == 0 ]] && root=--allow-run-as-root
"$new/worker/data/zerofit_make_arith_prefs" --out "$work/data" --train 200 --test 40 --ids --pad >/dev/null
train() {  # train BUILD NAME FLAGS...: 2 ranks, one thread each, exporting to $work/<side>/NAME
  local build=$1 name=$2
  shift 2
  OMP_NUM_THREADS=1 mpiexec --oversubscribe $root -n 2 "$build/worker/torch/zerofit_train_prefs" --data "$work/data" \
    --global-batch 16 --micro 2 --max-length 64 --export "$work/$side/$name" "$@" >"$work/$side-$name.log" 2>&1 ||
    { tail -5 "$work/$side-$name.log"; exit 1; }
}
for side in old new; do
  build=$([[ $side == old ]] && echo "$old" || echo "$new")
  train "$build" sft --task sft --steps 12 --lr 3e-3 --dtype bf16
  train "$build" reward --task reward --steps 12 --lr 1e-3 --offload --threads 1 --reduce-once --init "$work/$side/sft"
  train "$build" dpo --task dpo --steps 12 --lr 2e-3 --init "$work/$side/sft" --lora-rank 4 --lora-alpha 8 \
    --offload --threads 1 --dpu-start 4 --beta 0.2 --label-smoothing 0.1 --weight-decay 0.1
  train "$build" ipo --task dpo --steps 8 --lr 1e-3 --init "$work/$side/sft" --loss ipo --beta 0.5 --ref precomputed
  # Scored by the reward model above (the 12-step policy answers nothing right): rewards that differ within
  # a group, so the policy does learn.
  train "$build" grpo --task grpo --steps 4 --lr 5e-4 --init "$work/$side/sft" --lora-rank 4 --lora-alpha 8 \
    --samples-per-prompt 4 --max-new-tokens 4 --seed 3 --kl-beta 0.05 --reward-model "$work/$side/reward"
done
status=0
for name in sft reward dpo ipo grpo; do
  if cmp -s "$work/old/$name/model.safetensors" "$work/new/$name/model.safetensors"; then
    echo "$name: identical"
  else
    echo "$name: DIFFERENT"
    status=1
  fi
done
exit $status
