#!/bin/bash
# GRPO's learning test (tests/e2e/grpo_learning_e2e.sh) with its SFT start's length as a parameter: SFT for
# SFT_STEPS steps, then GRPO for GRPO_STEPS steps with the test's flags, on 2 MPI ranks; prints the held-out
# greedy accuracy before and after GRPO. CORETYPE forces an OpenBLAS kernel family (OPENBLAS_CORETYPE), as
# the figures of BENCHMARKS.md ("SFT's loss is a mean over tokens") were taken across families. GRPO_STEPS 1
# reads the start alone.
# usage: bench/grpo_sft_start.sh SFT_STEPS GRPO_STEPS SEED [CORETYPE] [BUILD_DIR]
#   -> sft=N grpo=S seed=K core=C before=x after=y
set -u
cd "$(dirname "$0")/.."
B=${5:-build}
T=$B/worker/torch/zerofit_train_prefs
GEN=$B/worker/data/zerofit_make_arith_prefs
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
[ -n "${4:-}" ] && export OPENBLAS_CORETYPE="$4"
MPI=(mpiexec --oversubscribe -n 2)
[[ $(id -u) -ne 0 ]] || MPI+=(--allow-run-as-root)
"$GEN" --out "$D/data" --train 700 --test 150 --max-operand 40 --ids > /dev/null || exit 1
"${MPI[@]}" "$T" --task sft --data "$D/data" --steps "$1" --global-batch 64 --micro 1 --lr 3e-3 \
  --log-every 1000 --export "$D/sft" > "$D/sft.log" 2>&1 || { tail "$D/sft.log"; exit 1; }
"${MPI[@]}" "$T" --task grpo --data "$D/data" --init "$D/sft" --seed "$3" --steps "$2" --global-batch 32 \
  --micro 1 --lr 5e-4 --samples-per-prompt 16 --max-new-tokens 6 --max-length 16 --loss-type dapo \
  --log-every 1000 > "$D/grpo.log" 2>&1 || { tail "$D/grpo.log"; exit 1; }
accuracy() { grep "held-out $1 training" "$D/grpo.log" | grep -o "eval/accuracy [0-9.]*" | cut -d' ' -f2; }
echo "sft=$1 grpo=$2 seed=$3 core=${4:-default} before=$(accuracy before) after=$(accuracy after)"
