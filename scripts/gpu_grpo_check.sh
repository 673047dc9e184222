#!/usr/bin/env bash
# Issue 32's GPU checks, after `scripts/gpu_check.sh --build-only --targets "zerofit_train_prefs
# zerofit_make_arith_prefs zerofit_generation_bench generation_test"` in the same device call:
#   1. the greedy goldens of generation_test from transformers (scripts/make_generation_goldens.sh), then
#      generation_test itself against them; its Gpu* cases (the CUDA-graph decode step against the full
#      forward on cuda:0) run even with --no-goldens;
#   2. the GRPO learning run of grpo_learning_e2e on cuda:0 (SFT and GRPO with --device cuda, 2 ranks), its
#      rollouts decoded the --grpo-decode way;
#   3. greedy generation tokens/s, zerofit_generation_bench (each --decodes mode) against transformers'
#      generate with the static (and the dynamic) cache, on the Qwen2.5-0.5B shape
#      (bench/generation_qwen05b.json) in bf16, batch 8 and 32, 128 prompt + 128 new tokens, random
#      weights; records in $OUT_DIR/generation-*.json.
# Each step runs under its own deadline; a failing step does not stop the next. Writes $OUT_DIR/grpo.md;
# with $OUT set (the device tool, which brings back at most 8 files), grpo.md and one tarball of
# $OUT_DIR (grpo-logs.tar.gz) are copied there at the end.
# zerofit's programs run in the build's gpu-env.sh environment (the unpacked packages' libraries, mpiexec);
# transformers' scripts keep python3's own.
#   scripts/gpu_grpo_check.sh [--build-dir build-gpu] [--out DIR] [--device cuda|cpu] [--tiny] [--no-goldens]
#                             [--caches "static dynamic"] [--decodes "eager cuda_graph"] [--grpo-decode MODE]
#     --device cpu --tiny   rehearses the zerofit side on the CPU (small shapes; transformers when importable)
#     --no-goldens          skips step 1 (the goldens were made and checked in an earlier call)
#     --caches              transformers' caches to time generation against (default: static and dynamic)
#     --decodes             zerofit's decode modes to time (default: eager and cuda_graph; on the CPU eager and
#                           static)
#     --grpo-decode         the GRPO run's decode mode (default: cuda_graph; on the CPU static)
#     --parts               which steps run (default "goldens gpu-test grpo generation"): a caller may run
#                           the untimed ones (gpu-test grpo) beside other untimed GPU work and the timed one
#                           (generation) alone; the summary is appended to where $OUT_DIR already has one
#     --batches             generation's batch sizes (default "8 32"; --tiny: 4)
#     --hf-batches          the batch sizes transformers is timed at (default: --batches)
#     --unfused             decode modes timed a second time with --fused-kernels off (default none): against
#                           the same mode's fused run, what the fused norm, gating and rotary kernels bring
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
BUILD=build-gpu
OUT_DIR=/tmp/zerofit-grpo-gpu
DEVICE=cuda
TINY=0
GOLDENS=1
CACHES=(static dynamic)
DECODES=()
GRPO_DECODE_MODE=
PARTS=(goldens gpu-test grpo generation)
BATCHES=()
HF_BATCHES=()
UNFUSED=()
while (($#)); do
  case "$1" in
    --build-dir) BUILD=$2; shift 2 ;;
    --out) OUT_DIR=$2; shift 2 ;;
    --device) DEVICE=$2; shift 2 ;;
    --tiny) TINY=1; shift ;;
    --no-goldens) GOLDENS=0; shift ;;
    --caches) read -ra CACHES <<< "$2"; shift 2 ;;
    --decodes) read -ra DECODES <<< "$2"; shift 2 ;;
    --grpo-decode) GRPO_DECODE_MODE=$2; shift 2 ;;
    --parts) read -ra PARTS <<< "$2"; shift 2 ;;
    --batches) read -ra BATCHES <<< "$2"; shift 2 ;;
    --hf-batches) read -ra HF_BATCHES <<< "$2"; shift 2 ;;
    --unfused) read -ra UNFUSED <<< "$2"; shift 2 ;;
    *) echo "gpu_grpo_check.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
((${#DECODES[@]})) || if [ "$DEVICE" = cuda ]; then DECODES=(eager cuda_graph); else DECODES=(eager static); fi
[ -n "$GRPO_DECODE_MODE" ] || GRPO_DECODE_MODE=$([ "$DEVICE" = cuda ] && echo cuda_graph || echo static)
has_part() { [[ " ${PARTS[*]} " == *" $1 "* ]]; }
mkdir -p "$OUT_DIR"
SUMMARY=$OUT_DIR/grpo.md
echo "# Issue 32 GPU checks: ${PARTS[*]} ($(date -u +%FT%TZ), $(git rev-parse --short HEAD), device $DEVICE)" >> "$SUMMARY"
step() {  # step NAME DEADLINE_S COMMAND...: runs it with its log in $OUT_DIR/NAME.log, notes the outcome
  local name=$1 deadline=$2
  shift 2
  timeout "$deadline" "$@" > "$OUT_DIR/$name.log" 2>&1
  local rc=$?
  echo "- $name: exit $rc ($(tail -1 "$OUT_DIR/$name.log" | cut -c1-200))" >> "$SUMMARY"
}
T=$BUILD/worker/torch/zerofit_train_prefs
GEN=$BUILD/worker/data/zerofit_make_arith_prefs
BENCH=$BUILD/worker/torch/zerofit_generation_bench
ZF_ENV=(env)  # what zerofit's programs run under: the build's gpu-env.sh, where scripts/gpu_check.sh wrote one
if [ -f "$BUILD/gpu-env.sh" ]; then
  mapfile -t -O 1 ZF_ENV < <(. "$BUILD/gpu-env.sh" \
    && printf '%s\n' "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" "OPAL_PREFIX=$OPAL_PREFIX" "PATH=$PATH")
fi

if ! has_part goldens; then
  :
elif [ $GOLDENS = 0 ]; then
  echo "- goldens: skipped (--no-goldens)" >> "$SUMMARY"
elif python3 -c "import torch, transformers" 2> /dev/null; then
  step goldens 120 scripts/make_generation_goldens.sh
  [ -x "$BUILD/tests/generation_test" ] && step generation_test 120 "${ZF_ENV[@]}" "$BUILD/tests/generation_test"
else
  echo "- goldens: skipped (python3 has no torch + transformers)" >> "$SUMMARY"
fi
if has_part gpu-test && [ "$DEVICE" = cuda ] && [ -x "$BUILD/tests/generation_test" ]; then
  step generation_gpu_test 120 "${ZF_ENV[@]}" "$BUILD/tests/generation_test" --gtest_filter='*.Gpu*'
fi

# 2 ranks on the one GPU (MPI staged through pinned memory, comm/device_comm.h), as the CPU test runs them.
has_part grpo && GRPO_DEVICE=$DEVICE GRPO_DECODE=$GRPO_DECODE_MODE GRPO_STEPS=$([ $TINY = 1 ] && echo 20 || echo 300) \
  step "grpo_$DEVICE" 300 "${ZF_ENV[@]}" bash tests/e2e/grpo_learning_e2e.sh "$T" "$GEN" 1

CONFIG=bench/generation_qwen05b.json
SHAPE=(--prompt-len 128 --new-tokens 128 --reps 5 --warmup 2)
if [ $TINY = 1 ]; then
  CONFIG=tests/worker/torch/golden/configs/qwen2.json
  SHAPE=(--prompt-len 16 --new-tokens 16 --reps 3 --warmup 1)
  ((${#BATCHES[@]})) || BATCHES=(4)
fi
((${#BATCHES[@]})) || BATCHES=(8 32)
((${#HF_BATCHES[@]})) || HF_BATCHES=("${BATCHES[@]}")
has_part generation || BATCHES=()
DTYPE=$([ "$DEVICE" = cuda ] && echo bf16 || echo fp32)
for b in "${BATCHES[@]}"; do
  for decode in "${DECODES[@]}"; do
    step "generation-zerofit-$decode-b$b" 240 "${ZF_ENV[@]}" "$BENCH" --config "$CONFIG" --batch "$b" \
      "${SHAPE[@]}" --device "$DEVICE" --dtype "$DTYPE" --decode "$decode" \
      --out "$OUT_DIR/generation-zerofit-$decode-b$b.json"
  done
  for decode in "${UNFUSED[@]}"; do
    step "generation-zerofit-$decode-unfused-b$b" 240 "${ZF_ENV[@]}" "$BENCH" --config "$CONFIG" --batch "$b" \
      "${SHAPE[@]}" --device "$DEVICE" --dtype "$DTYPE" --decode "$decode" --fused-kernels off \
      --out "$OUT_DIR/generation-zerofit-$decode-unfused-b$b.json"
  done
  if [[ " ${HF_BATCHES[*]} " == *" $b "* ]] && python3 -c "import torch, transformers" 2> /dev/null; then
    for cache in "${CACHES[@]}"; do
      step "generation-hf-$cache-b$b" 240 python3 bench/transformers_generate_bench.py --config "$CONFIG" \
        --batch "$b" "${SHAPE[@]}" --device "$DEVICE" --dtype "$DTYPE" --cache "$cache" \
        --out "$OUT_DIR/generation-hf-$cache-b$b.json"
    done
  fi
done
cat "$OUT_DIR"/generation-*.json >> "$SUMMARY" 2> /dev/null
cat "$SUMMARY"
. scripts/device_out.sh
copy_to_device_out "$SUMMARY" "$OUT_DIR" grpo-logs.tar.gz
