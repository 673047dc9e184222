#!/usr/bin/env bash
# One device call for issues 32 and 30 (the device tool lends ~15 minutes a session and 10 a call): builds,
# runs the untimed GPU checks side by side, then the timed ones alone, and hands back one summary and one
# tarball, gathered after every step so that a call cut short still returns what ran.
#   1. scripts/gpu_check.sh --build-only (the programs and generation_test)
#   2. untimed, at once: generation_test's Gpu* cases and the GRPO learning run on cuda:0 (first, two
#      seconds: torch's dynamic-map golden for 8-bit AdamW, scripts/make_dynamic_map_golden.py, into the
#      tarball as dynamic_map.json: commit it as tests/optim/golden/dynamic_map.json)
#      (scripts/gpu_grpo_check.sh --parts "gpu-test grpo") beside the planner's passes against measured
#      peaks (scripts/gpu_grpo_memory.sh: allocator peaks are per process, so sharing the GPU leaves them be)
#   3. timed, alone: greedy generation tokens/s, zerofit against transformers (gpu_grpo_check.sh --parts
#      generation, GENERATION_ARGS)
#   4. timed, alone: the issue 30 benchmark rows (gpu_check.sh --bench, BENCH_ROWS) in what is left of the
#      budget; gpu_bench.sh rewrites its table after every row, so a deadline keeps the rows that ran
#   scripts/gpu_session.sh [--steps "build untimed generation bench"] [--skip "..."]
#     --steps   the steps to run, in this order whatever the list's (default the four above); also:
#               bisect   gpu_grpo_memory.sh on BISECT_CONFIG (default "64 64 4 4 1 8") three ways: as is,
#                        --kl-beta 0, --untie (what a GRPO step's second generation pass carries beyond its
#                        first: BENCHMARKS.md, "Issues 32 and 30 on an H200 at 7d5f4cd"); untimed, alone;
#                        the as-is run also writes the allocation report (--allocation-report: the blocks
#                        the second generation pass holds more, with their allocating stacks)
#               gpu-test generation_test's, cuda_allocations_test's, recomputed_call_test's and
#                        fused_kernels_test's Gpu* cases and device_gpu_test alone (the CUDA graph's logits,
#                        auto's graph; the recorded allocation stacks; the lean pieces, the fused RMSNorm,
#                        SwiGLU and rotary kernels and the typed SumOfSquares on cuda:0)
#     --skip    leaves steps out of --steps
#   env: SESSION_BUDGET (s, default 560: inside a 590 s timeout_s), BUILD_TARGETS, GENERATION_ARGS, BENCH_ROWS,
#        BISECT_CONFIG, BISECT_ARGS (more gpu_grpo_memory.sh options: "--build-dir build --device test --tiny"
#        with BISECT_CONFIG="8 4 2 2 1 2" rehearses the step on the CPU)
# Writes $OUT/session.md and $OUT/session-logs.tar.gz (without $OUT: /tmp/zerofit-session).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
SKIP=()
STEPS=(build untimed generation bench)
while (($#)); do
  case "$1" in
    --skip) read -ra SKIP <<< "$2"; shift 2 ;;
    --steps) read -ra STEPS <<< "$2"; shift 2 ;;
    *) echo "gpu_session.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
START=$(date +%s)
BUDGET=${SESSION_BUDGET:-560}
GENERATION_ARGS=${GENERATION_ARGS:-'--caches "static dynamic" --batches "8 32" --hf-batches "8 32" --unfused cuda_graph'}
BUILD_TARGETS=${BUILD_TARGETS:-zerofit_train_prefs zerofit zerofit_make_arith_prefs zerofit_generation_bench generation_test cuda_allocations_test recomputed_call_test fused_kernels_test device_gpu_test}
BENCH_ROWS=${BENCH_ROWS:-zf-reward-bf16,zf-reward-bf16-unfused,zf-reward-bf16-8bit,zf-reward-bf16-offload,zf-reward-bf16-8bit-offload,zf-reward-bf16-offload-dpu,hf-reward-bf16,hf-dpo-v128k-bf16,zf-dpo-v128k-bf16-offload}
WORK=/tmp/zerofit-session
DEST=${OUT:-$WORK/out}
mkdir -p "$WORK" "$DEST"
SUMMARY=$WORK/session.md
echo "# gpu_session.sh ($(date -u +%FT%TZ), $(git rev-parse --short HEAD))" > "$SUMMARY"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >> "$SUMMARY" 2>&1
left() { echo $((BUDGET - ($(date +%s) - START))); }
skipped() { [[ " ${SKIP[*]} " == *" $1 "* || " ${STEPS[*]} " != *" $1 "* ]]; }
# gather: the summaries so far and one tarball of every log, into $DEST (the child scripts' own copies to
# $OUT are turned off: the device tool returns at most 8 files).
gather() {
  tar -C "$WORK" -czf "$DEST/session-logs.tar.gz" --exclude=out . 2> /dev/null
  cp "$SUMMARY" "$DEST/session.md"
}
note() { echo "$*" >> "$SUMMARY"; gather; }
# run NAME DEADLINE COMMAND...: the command (without $OUT) under min(DEADLINE, what is left - 20 s)
run() {
  local name=$1 deadline=$2 t0 rc
  shift 2
  local cap=$(($(left) - 20))
  ((cap < deadline)) && deadline=$cap
  if ((deadline < 20)); then note "- $name: not run ($(left) s of the budget left)"; return 1; fi
  t0=$(date +%s)
  OUT='' timeout "$deadline" "$@" > "$WORK/$name.log" 2>&1
  rc=$?
  note "- $name: exit $rc in $(($(date +%s) - t0)) s (deadline $deadline s)"
  return $rc
}

if ! skipped build; then
  run build 240 scripts/gpu_check.sh --jobs 16 --build-only \
    --targets "$BUILD_TARGETS" \
    || { tail -40 "$WORK/build.log" >> "$SUMMARY"; gather; exit 1; }
fi
if ! skipped untimed; then
  run untimed 240 bash -c 'python3 scripts/make_dynamic_map_golden.py --out "$0/dynamic_map.json";
    scripts/gpu_grpo_check.sh --no-goldens --parts "gpu-test grpo" --out "$0/grpo" &
    scripts/gpu_grpo_memory.sh --out "$0/memory" > "$0/memory.log" 2>&1; wait' "$WORK"
  cat "$WORK/grpo/grpo.md" "$WORK/memory/grpo-memory.md" >> "$SUMMARY" 2> /dev/null
  gather
fi
if ! skipped gpu-test; then
  run gpu-test 120 bash -c '[[ -f build-gpu/gpu-env.sh ]] && . build-gpu/gpu-env.sh;
    rc=0; for t in generation_test cuda_allocations_test recomputed_call_test fused_kernels_test; do
      build-gpu/tests/$t --gtest_filter="*.Gpu*" || rc=1; done; build-gpu/tests/device_gpu_test || rc=1; exit $rc'
  grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$WORK/gpu-test.log" >> "$SUMMARY"
  gather
fi
if ! skipped bisect; then
  CFG=${BISECT_CONFIG:-64 64 4 4 1 8}
  for variant in as-is kl0 untie; do
    ARGS=()
    [[ $variant == as-is ]] && ARGS=(--allocation-report)
    [[ $variant == kl0 ]] && ARGS=(--kl-beta 0)
    [[ $variant == untie ]] && ARGS=(--untie)
    read -ra EXTRA <<< "${BISECT_ARGS:-}"
    run "bisect-$variant" 120 scripts/gpu_grpo_memory.sh --out "$WORK/bisect-$variant" --configs "$CFG" \
      "${ARGS[@]}" "${EXTRA[@]}"
    { echo "### bisect: $variant"; grep -E '^\| [0-9]|^Model' "$WORK/bisect-$variant/grpo-memory.md"
      sed -n '/^## What the second step/,$p' "$WORK/bisect-$variant/grpo-memory.md"; } >> "$SUMMARY" 2> /dev/null
    gather
  done
fi
if ! skipped generation; then
  eval "GEN=($GENERATION_ARGS)"
  run generation 300 scripts/gpu_grpo_check.sh --parts generation --out "$WORK/generation" "${GEN[@]}"
  cat "$WORK/generation/grpo.md" >> "$SUMMARY" 2> /dev/null
  gather
fi
if ! skipped bench; then
  BENCH_DEADLINE=$(($(left) - 30)) run bench 600 scripts/gpu_check.sh --jobs 16 --bench \
    --bench-args "--steps 5 --warmup 2 --deadline 60 --only $BENCH_ROWS"
  cat build-gpu/gpu-logs/bench.md >> "$SUMMARY" 2> /dev/null
  cp -r build-gpu/gpu-logs "$WORK/bench-logs" 2> /dev/null
  gather
fi
note "total $(($(date +%s) - START)) s"
cat "$SUMMARY"
