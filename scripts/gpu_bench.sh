#!/usr/bin/env bash
# zerofit against Hugging Face transformers on the same Llama shapes, one GPU (issue 30). A benchmark only:
# the transformers side (bench/transformers_prefs_bench.py) runs with the machine's own torch/transformers,
# which zerofit never needs. scripts/gpu_check.sh --bench builds zerofit_train_prefs and runs this; it can be
# run again by hand on the same build (the zerofit runs source the build's gpu-env.sh where there is one):
#   scripts/gpu_bench.sh [--build-dir DIR] [--logs DIR] [--work DIR] [--device cuda|cpu] [--tiny] [--steps N]
#                        [--warmup N] [--only IDS] [--deadline S] [--peak-tflops F] [--offload-threads N]
#                        [--dry-run]
#     --logs DIR        the table and per-run logs (default BUILD/gpu-logs); --work DIR the random data
#                       (default BUILD/bench-work: not in the logs, which the device tool brings back)
#     --steps N         measured steps per run (default 10), after --warmup N warm-up steps (default 3)
#     --only IDS        comma-separated run ids (a trailing * matches a prefix: --only 'zf-*,hf-reward-bf16');
#                       bench/prefs_bench_table.py plan lists them
#     --deadline S      each run's deadline in seconds (default 150); a run past it is a "timeout" row
#     --peak-tflops F   the device's dense bf16 peak for the MFU column (default 989: H100/H200 SXM)
#     --offload-threads N  CPU AdamW threads of the offload row (default: the machine's cores, at most 16)
#     --dry-run         print each run's command line and run nothing
#     --device cpu --tiny  a rehearsal without a GPU (hidden 64, 2 layers, sequence 64): proves the harness,
#                       the parsing of zerofit's metrics and the table, nothing about speed
# Shape (issue 30): Llama reward model of 0.75B parameters (hidden 2048, 16 layers, 32 heads / 16 KV heads,
# intermediate 5504, vocabulary 4096), sequence 1024, 8 pairs = 16 sequences per step in one micro-batch,
# bf16, random token ids. Rows: transformers LlamaForSequenceClassification with bf16 weights and with fp32
# weights + bf16 autocast (SDPA, fused AdamW); zerofit_train_prefs --task reward (ZeRO-2, world size 1), and
# with --offload (and the delayed parameter update); DPO (policy + frozen reference) both sides, at vocabulary 4096 and 128256; SFT (16
# examples a step) both sides; the reward model
# at sequence 4096 with activation checkpointing both sides. Each run is its own process under the deadline;
# a failed, out-of-memory or timed-out run is a row saying so. Columns: pairs/s, median step ms, MFU, device
# peak GiB, and each zerofit row's ratios to its transformers peer.
# Writes LOGS/bench.md (the table), LOGS/bench/<run>.log and <run>.json; exits 0 once the table is written
# (2 on bad arguments). Sized for about 6 minutes on an H200 with the defaults (13 steps a run, 10 runs): an
# estimate, not yet measured.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=build-gpu
LOGS=
WORK=
DEVICE=cuda
TINY=0
DRY_RUN=0
STEPS=10
WARMUP=3
ONLY=
DEADLINE=150
PEAK_TFLOPS=989
THREADS=$(($(nproc) < 16 ? $(nproc) : 16))
while (($#)); do
  case "$1" in
    --build-dir) BUILD=$2; shift 2 ;;
    --logs) LOGS=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --device) DEVICE=$2; shift 2 ;;
    --tiny) TINY=1; shift ;;
    --dry-run) DRY_RUN=1; shift ;;
    --steps) STEPS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --deadline) DEADLINE=$2; shift 2 ;;
    --peak-tflops) PEAK_TFLOPS=$2; shift 2 ;;
    --offload-threads) THREADS=$2; shift 2 ;;
    -h | --help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "gpu_bench: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$DEVICE" == cuda || "$DEVICE" == cpu ]] || { echo "gpu_bench: --device cuda or cpu" >&2; exit 2; }
for n in "$STEPS" "$WARMUP" "$DEADLINE" "$THREADS"; do
  [[ "$n" =~ ^[0-9]+$ ]] || { echo "gpu_bench: '$n' is not a whole number (--steps/--warmup/--deadline/--offload-threads)" >&2; exit 2; }
done
((STEPS >= 1)) || { echo "gpu_bench: --steps must be at least 1" >&2; exit 2; }
PY=${PYTHON:-python3}
TABLE=("$PY" "$ROOT/bench/prefs_bench_table.py")
SIZE=()
((TINY)) && SIZE=(--tiny)
PLAN=$("${TABLE[@]}" plan "${SIZE[@]}" --only "$ONLY") || exit 2
mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd)
LOGS=${LOGS:-$BUILD/gpu-logs}
mkdir -p "$LOGS"
LOGS=$(cd "$LOGS" && pwd)
RESULTS=$LOGS/bench
WORK=${WORK:-$BUILD/bench-work}
((DRY_RUN)) || rm -rf "$RESULTS" "$WORK" "$LOGS/bench.md"  # a dry run leaves the last table alone
mkdir -p "$RESULTS" "$WORK"
PREFS=$BUILD/worker/torch/zerofit_train_prefs
# Not bound to one core (Open MPI's default for 1-2 ranks): the offload pool's threads need the host's CPUs.
MPI=(mpiexec --bind-to none -n 1)
[[ $(id -u) -ne 0 ]] || MPI+=(--allow-run-as-root)
# The zerofit runs get the build's environment where gpu_check.sh wrote one (gpu-env.sh: the unpacked
# packages' libraries, the mpiexec wrapper); the transformers runs keep the caller's, so that python3's torch
# and transformers load none of those libraries.
ZF_ENV=()
# shellcheck disable=SC2016 # $0 and $@ are the inner bash's
[[ -f "$BUILD/gpu-env.sh" ]] && ZF_ENV=(bash -c '. "$0" && exec "$@"' "$BUILD/gpu-env.sh")
PAIRS=$("${TABLE[@]}" shape "${SIZE[@]}" | tr ' ' '\n' | sed -n 's/^pairs=//p')
TOTAL=$((WARMUP + STEPS))

if [[ "$DEVICE" == cuda ]] && command -v nvidia-smi >/dev/null; then
  DEVICE_TEXT="$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -n 1)"
else
  DEVICE_TEXT="$DEVICE (rehearsal: no GPU)"
fi
# Why a side cannot run at all (empty: it can).
HF_SKIP=
if ! "$PY" -c 'import torch, transformers' >"$RESULTS/import_check.log" 2>&1; then
  HF_SKIP="no torch/transformers ($(tail -n 1 "$RESULTS/import_check.log"))"
else
  VERSIONS=$("$PY" -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)')
  DEVICE_TEXT="$DEVICE_TEXT; $VERSIONS"
fi
ZF_SKIP=
[[ -x "$PREFS" ]] || ZF_SKIP="no $PREFS (build zerofit_train_prefs)"
echo "gpu_bench: $(wc -l <<<"$PLAN") runs, $WARMUP warm-up + $STEPS measured steps each, deadline $DEADLINE s each, on $DEVICE_TEXT"

# The table of the records so far (rows not yet run say so): rewritten after every run, so that a deadline
# around the whole benchmark (gpu_check.sh --bench) still leaves the finished rows.
write_table() {
  "${TABLE[@]}" table "${SIZE[@]}" --only "$ONLY" --results "$RESULTS" --peak-tflops "$PEAK_TFLOPS" \
    --device "$DEVICE_TEXT" --steps "$STEPS" --warmup "$WARMUP" --offload-threads "$THREADS" >"$LOGS/bench.md.tmp"
  mv "$LOGS/bench.md.tmp" "$LOGS/bench.md"
}
# record <id> <rc> [more prefs_bench_table.py record flags]: the run's result record, a line saying it, the table.
record() {
  local id=$1 rc=$2
  shift 2
  ((DRY_RUN == 0)) || return 0
  "${TABLE[@]}" record --id "$id" --rc "$rc" --log "$RESULTS/$id.log" --out "$RESULTS/$id.json" \
    --warmup "$WARMUP" --pairs "$PAIRS" --deadline "$DEADLINE" "$@" | sed 's/^/gpu_bench: /'
  write_table
}
# run_logged <id> <command...>: the command under the deadline into RESULTS/<id>.log; returns its status.
# With --dry-run it prints the command instead.
run_logged() {
  local id=$1 rc=0
  shift
  if ((DRY_RUN)); then
    echo "gpu_bench: $id: $(printf '%q ' "$@")"
    return 0
  fi
  # stdin from /dev/null: mpiexec would read the rest of the plan the loop reads. In the background, so that
  # a signal to this script (gpu_check.sh's deadline) reaches the run through the trap below.
  timeout -k 10 "$DEADLINE" "$@" </dev/null >"$RESULTS/$id.log" 2>&1 &
  RUN_PID=$!
  wait "$RUN_PID" || rc=$?
  RUN_PID=
  ((rc != 124 && rc != 137)) || echo "gpu_bench: deadline of $DEADLINE s passed" >>"$RESULTS/$id.log"
  return "$rc"
}

# Ended from outside: the run in progress ends too (timeout passes the signal on to it), the table so far stays.
((DRY_RUN)) || write_table  # every row "not run" until its run ends
RUN_PID=
trap '[[ -z "$RUN_PID" ]] || kill -TERM "$RUN_PID" 2>/dev/null; exit 143' TERM INT
while read -r id impl task dtype vocab seq ckpt offload dpu fused optim; do
  rc=0
  if [[ "$impl" == hf ]]; then
    if [[ -n "$HF_SKIP" ]] && ((DRY_RUN == 0)); then record "$id" 0 --skip "$HF_SKIP"; continue; fi
    args=(--id "$id" --task "$task" --dtype "$dtype" --vocab "$vocab" --seq "$seq" --warmup "$WARMUP"
          --steps "$STEPS" --device "$DEVICE" --out "$RESULTS/$id.json" "${SIZE[@]}")
    ((ckpt)) && args+=(--checkpointing)
    run_logged "$id" "$PY" "$ROOT/bench/transformers_prefs_bench.py" "${args[@]}" || rc=$?
    record "$id" "$rc"
  else
    if [[ -n "$ZF_SKIP" ]] && ((DRY_RUN == 0)); then record "$id" 0 --skip "$ZF_SKIP"; continue; fi
    data=$WORK/data_v${vocab}_t${seq}
    if [[ ! -f "$data/config.json" ]] && ((DRY_RUN == 0)); then
      "${TABLE[@]}" data "${SIZE[@]}" --dir "$data" --vocab "$vocab" --seq "$seq" \
        --train-pairs $((2 * PAIRS * TOTAL > 64 ? 2 * PAIRS * TOTAL : 64))
    fi
    # One micro-batch of all the pairs (--micro 1: no planner, no accumulation), every step logged. SFT reads
    # the pairs' chosen responses as examples: two a pair, the same 2 x PAIRS sequences a step.
    batch=$PAIRS
    [[ "$task" != sft ]] || batch=$((2 * PAIRS))
    args=(--task "$task" --data "$data" --device "$DEVICE" --dtype "$dtype" --steps "$TOTAL"
          --global-batch "$batch" --micro 1 --max-length "$seq" --seed 1 --log-every 1
          --metrics-jsonl "$RESULTS/$id.jsonl")
    ((ckpt)) && args+=(--checkpointing)
    ((offload)) && args+=(--offload --threads "$THREADS")
    ((dpu < 0)) || args+=(--dpu-start "$dpu")
    ((fused)) || args+=(--fused-kernels off)
    [[ "$optim" == adamw_torch ]] || args+=(--optim "$optim")
    run_logged "$id" "${ZF_ENV[@]}" "${MPI[@]}" "$PREFS" "${args[@]}" || rc=$?
    record "$id" "$rc" --jsonl "$RESULTS/$id.jsonl"
  fi
done <<<"$PLAN"

((DRY_RUN == 0)) || exit 0
write_table
cat "$LOGS/bench.md"
echo "gpu_bench: table in $LOGS/bench.md, logs in $RESULTS"
