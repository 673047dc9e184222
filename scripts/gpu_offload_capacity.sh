#!/usr/bin/env bash
# Issue 30: optimizer offload trains a shape whose optimizer state does not fit on the device at all. On the
# lent GPU, after `scripts/gpu_check.sh --build-only --targets "zerofit_train_prefs zerofit"`:
#   1. sizes a Llama reward model (hidden 3072, 24 heads / 8 KV heads, intermediate 8192, vocabulary 4096) with
#      enough layers that its ZeRO-2 state on one GPU (bf16 weights and gradients, fp32 master, m, v and
#      gradient shard: 20 B a parameter) exceeds the GPU's memory by 5% before any activation, while the
#      offloaded state (pinned, the same 20 B a parameter on the host, 4 B on the device) stays under 75% of
#      the host's RAM: an H100 (80 GB) takes ~4.5B parameters; an H200 (141 GB) would need ~8B and ~160 GB of
#      pinned host memory, more than its 128 GiB, so there the script says so and stops;
#   2. `zerofit plan` for one GPU with offload off and on (the machine's GPU profile and host RAM);
#   3. zerofit_train_prefs --task reward without offload (expected: out of memory) and with --offload
#      --threads N, 4 pairs of 512 tokens a step, 2 + 3 steps, each under its deadline;
#   4. $OUT_DIR/capacity.md: the shape, the plans, both runs' outcome, the offload run's median step, device
#      peak and host peak RSS; with $OUT set (the device tool), capacity.md and one tarball of $OUT_DIR are
#      copied there when the script ends (scripts/device_out.sh).
#   scripts/gpu_offload_capacity.sh [--build-dir build-gpu] [--out DIR] [--device cuda|cpu] [--tiny]
#     --device cpu --tiny   rehearses the harness on the CPU (2 layers of hidden 64; no capacity rule)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
BUILD=build-gpu
OUT_DIR=/tmp/zerofit-offload-capacity
DEVICE=cuda
TINY=0
while (($#)); do
  case "$1" in
    --build-dir) BUILD=$2; shift 2 ;;
    --out) OUT_DIR=$2; shift 2 ;;
    --device) DEVICE=$2; shift 2 ;;
    --tiny) TINY=1; shift ;;
    *) echo "gpu_offload_capacity.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT_DIR"
SUMMARY=$OUT_DIR/capacity.md
. scripts/device_out.sh
PREFS=$BUILD/worker/torch/zerofit_train_prefs
ZEROFIT=$BUILD/cli/zerofit
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"; copy_to_device_out "$SUMMARY" "$OUT_DIR" capacity-logs.tar.gz' EXIT
ZF_ENV=()
# shellcheck disable=SC2016 # $0 and $@ are the inner bash's
[[ -f "$BUILD/gpu-env.sh" ]] && ZF_ENV=(bash -c '. "$0" && exec "$@"' "$BUILD/gpu-env.sh")
MPI=(mpiexec --bind-to none -n 1)
[[ $(id -u) -ne 0 ]] || MPI+=(--allow-run-as-root)
THREADS=$(($(nproc) < 16 ? $(nproc) : 16))
HOST_BYTES=$(awk '/^MemTotal:/ { printf "%.0f", $2 * 1024 }' /proc/meminfo)

# --- 1. the shape -----------------------------------------------------------------------------------------
HIDDEN=3072 HEADS=24 KV=8 INTER=8192 VOCAB=4096 SEQ=512 PAIRS=4
if ((TINY)); then HIDDEN=64 HEADS=4 KV=2 INTER=176 SEQ=64; fi
HEAD_DIM=$((HIDDEN / HEADS))
PER_LAYER=$((2 * HIDDEN * HIDDEN + 2 * HIDDEN * KV * HEAD_DIM + 3 * HIDDEN * INTER + 2 * HIDDEN))
if ((TINY)); then
  LAYERS=2 DEVICE_BYTES=0 WHY="rehearsal (--tiny): no capacity rule"
else
  DEVICE_BYTES=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -n 1)
  DEVICE_BYTES=$((DEVICE_BYTES * 1024 * 1024))
  LAYERS=$(((21 * DEVICE_BYTES / 20 + 20 * PER_LAYER - 1) / (20 * PER_LAYER)))
  WHY="20 B x parameters > 1.05 x the GPU's $((DEVICE_BYTES >> 30)) GiB, before any activation"
fi
PARAMS=$((LAYERS * PER_LAYER + VOCAB * HIDDEN + HIDDEN + HIDDEN))
{
  echo "# Offload capacity ($(date -u +%FT%TZ), $(git rev-parse --short HEAD), device $DEVICE)"
  echo "- shape: Llama reward model, hidden $HIDDEN, $LAYERS layers, $HEADS heads / $KV KV heads, intermediate" \
    "$INTER, vocabulary $VOCAB: $PARAMS parameters ($WHY); $PAIRS pairs of $SEQ tokens a step, $([[ "$DEVICE" == cuda ]] && echo bf16 || echo fp32)"
  echo "- host RAM $((HOST_BYTES >> 30)) GiB; ZeRO-2 state on one GPU $((20 * PARAMS >> 30)) GiB (20 B a parameter)"
} >"$SUMMARY"
if ((!TINY && 20 * PARAMS > 3 * HOST_BYTES / 4)); then
  echo "- not run: the offloaded state ($((20 * PARAMS >> 30)) GiB pinned) would exceed 75% of this host's RAM;" \
    "a GPU this large needs a larger host to show it (an H100 with 128 GiB of host RAM does)" >>"$SUMMARY"
  cat "$SUMMARY"
  exit 0
fi
DATA=$WORK/data
SIZE=()
((TINY)) && SIZE=(--tiny)
python3 bench/prefs_bench_table.py data --dir "$DATA" --vocab "$VOCAB" --seq "$SEQ" --train-pairs 64 "${SIZE[@]}"
python3 - "$DATA/config.json" "$HIDDEN" "$LAYERS" "$HEADS" "$KV" "$INTER" <<'PY'
import json, sys
path, hidden, layers, heads, kv, inter = sys.argv[1], *map(int, sys.argv[2:])
c = json.load(open(path))
c.update(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv,
         intermediate_size=inter, head_dim=hidden // heads)
json.dump(c, open(path, "w"), indent=2)
PY

# --- 2. the plans -------------------------------------------------------------------------------------------
PROFILE=$([[ "$DEVICE_BYTES" -gt $((100 << 30)) ]] && echo 1xh200-141 || echo 1xh100-80)
for o in off on; do
  "${ZF_ENV[@]}" "$ZEROFIT" plan --model "$DATA" --task reward --hardware "$PROFILE" \
    --host-gb $((HOST_BYTES / 1000000000)) --global-batch "$PAIRS" --seq-len "$SEQ" --offload "$o" \
    --micro-batch "$PAIRS" --stage 2 >"$OUT_DIR/plan-offload-$o.txt" 2>&1
  echo "- \`zerofit plan --hardware $PROFILE --offload $o\`: exit $?: $(grep -m1 -E '^chosen|nothing fits' \
    "$OUT_DIR/plan-offload-$o.txt" | cut -c1-240); $(grep -m1 -E '^  total' "$OUT_DIR/plan-offload-$o.txt" |
    tr -s ' ')" >>"$SUMMARY"
done

# --- 3. the runs --------------------------------------------------------------------------------------------
DTYPE=$([[ "$DEVICE" == cuda ]] && echo bf16 || echo fp32)
for mode in device offload; do
  args=(--task reward --data "$DATA" --device "$DEVICE" --dtype "$DTYPE" --steps 5 --global-batch "$PAIRS"
        --micro 1 --max-length "$SEQ" --seed 1 --log-every 1 --metrics-jsonl "$OUT_DIR/$mode.jsonl")
  [[ $mode == offload ]] && args+=(--offload --threads "$THREADS")
  rm -f "$OUT_DIR/$mode.jsonl"
  timeout -k 10 240 "${ZF_ENV[@]}" "${MPI[@]}" "$PREFS" "${args[@]}" </dev/null >"$OUT_DIR/$mode.log" 2>&1
  rc=$?
  oom=$(grep -c -i -E "out of memory|CUDA error: out of memory|OutOfMemory" "$OUT_DIR/$mode.log")
  echo "- run on the $mode: exit $rc$( ((oom > 0)) && echo ", out of memory"): $(grep -i -m1 -E \
    'out of memory|error' "$OUT_DIR/$mode.log" | cut -c1-200)" >>"$SUMMARY"
done
# --- 4. the offload run's figures (steps 2..4: after 2 warm-up steps) ---------------------------------------
python3 - "$OUT_DIR/offload.jsonl" >>"$SUMMARY" <<'PY'
import json, statistics, sys
try:
    rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
except OSError:
    sys.exit(0)
rows = [r for r in rows if r.get("step", 0) >= 2 and "time/step_ms" in r]
if rows:
    med = lambda k: statistics.median(r.get(k, 0) for r in rows)
    print("- offload, median of %d steps: step %.1f ms (host AdamW %.1f, host accumulate %.1f, wait %.1f); "
          "device peak %.2f GiB allocated; host peak RSS %.1f GiB" % (
              len(rows), med("time/step_ms"), med("time/cpu_adamw_ms"), med("time/host_accumulate_ms"),
              med("time/wait_ms"), max(r.get("device_peak_allocated_bytes", 0) for r in rows) / 2**30,
              max(r.get("host_peak_rss_bytes", 0) for r in rows) / 2**30))
PY
cat "$SUMMARY"
