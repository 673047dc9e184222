#!/usr/bin/env bash
# Issue 32: the planner's GRPO passes against a GPU's measured peaks, pass by pass. For each configuration
# (prompt length, new tokens, samples per prompt, prompts per generation pass, ranks) it
#   1. writes a data folder: config.json (the model's shape; random weights) and pre-tokenized prompts of
#      exactly that length with an answer_ids field (the exact rule needs no tokenizer),
#   2. asks `zerofit plan --json` for that job with the run's strategy pinned (ZeRO-2, no offload, no
#      checkpointing, a resident reference, the micro-batch) and reads memory.grpo_passes: each pass's
#      tensor bytes (the pass without the CUDA context and the allocator's fragmentation),
#   3. trains 2 GRPO steps with zerofit_train_prefs (bf16, the plan's rollout batch, a KL penalty so the
#      reference is resident) and reads the last step's grpo/generation_peak_bytes and
#      grpo/training_peak_bytes: the caching allocator's allocated peak of each pass plus zerofit's device
#      seam (ZeRO-2's buffers), rank 0's,
# and writes the table with each pass's error and their mean to $OUT_DIR/grpo-memory.md. With $OUT set (the
# device tool), grpo-memory.md and a tarball of the logs are copied there.
#   scripts/gpu_grpo_memory.sh [--build-dir build-gpu] [--out DIR] [--device cuda|test] [--tiny]
#                              [--configs "P N S R W M, ..."] [--kl-beta B] [--untie]
#                              [--allocation-report]
#     --device test --tiny   rehearses it on the CPU (the test device counts only the seam's buffers, so the
#                            errors mean nothing there; it proves the plumbing)
#     --configs              these configurations instead of the ten (prompt, new tokens, samples, prompts per
#                            pass, ranks, micro-batch; comma-separated)
#     --kl-beta B            the KL coefficient (default 0.04: a resident reference; 0: none)
#     --untie                the model with its own lm_head (tie_word_embeddings false)
#     --allocation-report    each run writes the live CUDA blocks with their allocating stacks at every pass
#                            boundary (zerofit_train_prefs --cuda-allocation-report, cuda_allocations.h) to
#                            its folder's allocations.txt (scripts/symbolize_allocation_report.py names the
#                            program's frames); the table is followed by the first configuration's blocks new
#                            at the second step's generation start and end, and its training pass's blocks
#                            at the peak and before the first backward, by site
#   --kl-beta 0 and --untie bisect what the second step's generation pass carries beyond the first's on a
#   GPU (BENCHMARKS.md, "Issues 32 and 30 on an H200 at 7d5f4cd").
# After `scripts/gpu_check.sh --build-only --targets "zerofit_train_prefs zerofit"`.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
BUILD=build-gpu
OUT_DIR=/tmp/zerofit-grpo-memory
DEVICE=cuda
TINY=0
ONLY_CONFIGS=
KL_BETA=0.04
UNTIE=0
ALLOCATIONS=0
while (($#)); do
  case "$1" in
    --build-dir) BUILD=$2; shift 2 ;;
    --out) OUT_DIR=$2; shift 2 ;;
    --device) DEVICE=$2; shift 2 ;;
    --tiny) TINY=1; shift ;;
    --configs) ONLY_CONFIGS=$2; shift 2 ;;
    --kl-beta) KL_BETA=$2; shift 2 ;;
    --untie) UNTIE=1; shift ;;
    --allocation-report) ALLOCATIONS=1; shift ;;
    *) echo "gpu_grpo_memory.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
T=$BUILD/worker/torch/zerofit_train_prefs
Z=$BUILD/cli/zerofit
for b in "$T" "$Z"; do [[ -x $b ]] || { echo "gpu_grpo_memory.sh: $b is not built" >&2; exit 2; }; done
ZF_ENV=()  # the build's gpu-env.sh (the unpacked packages' libraries, mpiexec), where gpu_check.sh wrote one
[[ -f "$BUILD/gpu-env.sh" ]] && ZF_ENV=(bash -c '. "$0" && exec "$@"' "$BUILD/gpu-env.sh")
MPI=(mpiexec --oversubscribe --bind-to none)
[[ $(id -u) -ne 0 ]] || MPI+=(--allow-run-as-root)
rm -rf "$OUT_DIR" && mkdir -p "$OUT_DIR"

# The model: Qwen2.5-0.5B's shape (its 151,936-entry vocabulary makes the sampling and logit terms count),
# 12 of its 24 layers so that the larger configurations fit beside a second rank; --tiny: 2 layers, hidden 64.
CONFIG=$OUT_DIR/config.json
python3 - "$CONFIG" "$TINY" "$UNTIE" <<'EOF'
import json, sys
c = json.load(open("bench/generation_qwen05b.json"))
c["num_hidden_layers"] = 12
if sys.argv[3] == "1":
    c["tie_word_embeddings"] = False
if sys.argv[2] == "1":
    c.update(hidden_size=64, intermediate_size=176, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=512, bos_token_id=1, eos_token_id=2)
    if c.get("pad_token_id") is not None:
        c["pad_token_id"] = 0
    c.pop("head_dim", None)
json.dump(c, open(sys.argv[1], "w"), indent=2)
EOF
GPU_GB=$( ( [[ $DEVICE == cuda ]] && nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits |
  head -1 | awk '{ printf "%d", $1 * 1048576 / 1e9 }') || echo 80)

# prompt_len new_tokens samples prompts_per_pass ranks micro_batch
CONFIGS=(
  "64 64 4 4 1 8" "256 64 4 4 1 8" "512 64 4 4 1 8" "128 32 4 4 1 8" "128 256 4 4 1 8"
  "128 64 8 4 1 8" "128 64 16 2 1 8" "128 64 4 1 1 4" "128 64 4 8 1 16" "128 64 4 4 2 8"
)
((TINY)) && CONFIGS=("8 4 2 2 1 2" "16 8 2 2 1 2" "8 8 4 1 1 4" "8 4 2 2 2 2")
[[ -z $ONLY_CONFIGS ]] || IFS=, read -ra CONFIGS <<< "$ONLY_CONFIGS"
REFERENCE=resident
python3 -c 'import sys; sys.exit(float(sys.argv[1]) <= 0)' "$KL_BETA" || REFERENCE=none

{
  echo "# The planner's GRPO passes against measured peaks ($(date -u +%FT%TZ), $(git rev-parse --short HEAD), device $DEVICE, ${GPU_GB} GB)"
  echo
  echo "Model: bench/generation_qwen05b.json with 12 layers$( ((TINY)) && echo ' (--tiny: 2 layers, hidden 64, vocabulary 512)'), bf16, random weights$( ((UNTIE)) && echo ', its own lm_head (untied)'); KL coefficient $KL_BETA (reference $REFERENCE); 2 GRPO steps, the last one's passes (rank 0)."
  echo "Planned: \`zerofit plan --json\`'s memory.grpo_passes tensor bytes; measured: grpo/generation_peak_bytes and grpo/training_peak_bytes."
  echo
  echo "The last step's generation pass is the second step's; the first step's (before any training pass) is in its own column."
  echo
  echo "| prompt | new | samples | prompts/pass | ranks | micro | generation planned | measured | error | first step's | error | training planned | measured | error |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
} > "$OUT_DIR/grpo-memory.md"

errors=()
for cfg in "${CONFIGS[@]}"; do
  read -r P N S R W M <<< "$cfg"
  [[ -n $M ]] || { echo "gpu_grpo_memory.sh: --configs: '$cfg' is not six numbers" >&2; exit 2; }
  name="p${P}-n${N}-s${S}-r${R}-w${W}-m${M}"
  D=$OUT_DIR/$name
  mkdir -p "$D"
  cp "$CONFIG" "$D/config.json"
  G=$((R * W))  # prompts per step: one pass per rank
  # The plan's micro-batch counts sequences; the trainer's --micro is the number of micro-batches a rank runs
  # a step (its R x S sequences split evenly). Passing M itself (before 2026-11-28) trained micro-batches of
  # R x S / M sequences: 2 where the plan had 8 in most default configurations (the trainer's --print-plan
  # says "micro-batch 2 x accumulation 8"), which is the 4x between the planned 57 KB and the measured 14.2 KB
  # per token and layer of 7d5f4cd's H200 table.
  if (((R * S) % M)); then
    echo "| $P | $N | $S | $R | $W | $M | micro-batch $M does not divide the rank's $((R * S)) sequences |||||||" >> "$OUT_DIR/grpo-memory.md"
    continue
  fi
  K=$((R * S / M))
  python3 - "$D" "$P" "$G" "$TINY" <<'EOF'
import json, random, sys
d, p, g, tiny = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
vocab = json.load(open(d + "/config.json"))["vocab_size"]
rng = random.Random(p * 1000 + g)
for split, n in (("train", 4 * g), ("test", 2)):
    with open("%s/%s_prompts_ids.jsonl" % (d, split), "w") as f:
        for _ in range(n):
            f.write(json.dumps({"prompt_ids": [rng.randrange(3, vocab) for _ in range(p)], "answer_ids": [7]}) + "\n")
EOF
  plan=$("${ZF_ENV[@]}" "$Z" plan --model "$D/config.json" --task grpo --hardware "${W}x${GPU_GB}GB" \
    --global-batch "$G" --prompt-len "$P" --new-tokens "$N" --samples-per-prompt "$S" --micro-batch "$M" \
    --stage 2 --offload off --checkpointing off --reference "$REFERENCE" --safety 1 --json 2> "$D/plan.err")
  if [[ -z $plan ]]; then
    echo "| $P | $N | $S | $R | $W | $M | plan failed: $(head -c 150 "$D/plan.err" | tr '\n|' '  ') |||||||" >> "$OUT_DIR/grpo-memory.md"
    continue
  fi
  echo "$plan" > "$D/plan.json"
  read -r rollout gen_plan train_plan < <(python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
p = j["memory"]["grpo_passes"]
print(j["plan"]["rollout_prompts"], p["generation_tensor_bytes"], p["training_tensor_bytes"])' "$D/plan.json")
  DTYPE=()
  [[ $DEVICE == cuda ]] && DTYPE=(--dtype bf16)
  REPORT=()
  # A CUDA diagnostic: the trainer refuses it on the test device, whose rehearsal runs without it.
  ((ALLOCATIONS)) && [[ $DEVICE == cuda ]] && REPORT=(--cuda-allocation-report "$D/allocations.txt")
  timeout 300 "${ZF_ENV[@]}" "${MPI[@]}" -n "$W" "$T" --task grpo --data "$D" --device "$DEVICE" \
    "${DTYPE[@]}" --steps 2 --global-batch "$G" --micro "$K" \
    --samples-per-prompt "$S" --max-new-tokens "$N" --max-length $((P + N)) --rollout-batch $((rollout * S)) \
    --kl-beta "$KL_BETA" --log-every 1 --metrics-jsonl "$D/metrics.jsonl" "${REPORT[@]}" > "$D/train.log" 2>&1
  rc=$?
  read -r gen_meas train_meas gen_first < <(python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()] if sys.argv[2] == "0" else []
last = [r for r in rows if "grpo/generation_peak_bytes" in json.dumps(r)]
def get(r, k):
    if k in r: return r[k]
    for v in r.values():
        if isinstance(v, dict) and k in v: return v[k]
    return None
r = last[-1] if last else {}
f = last[0] if last else {}
print(int(get(r, "grpo/generation_peak_bytes") or 0), int(get(r, "grpo/training_peak_bytes") or 0),
      int(get(f, "grpo/generation_peak_bytes") or 0))' \
    "$D/metrics.jsonl" "$rc" 2> /dev/null || echo "0 0 0")
  if ((rc != 0 || gen_meas == 0)); then
    echo "| $P | $N | $S | $R | $W | $M | run failed (exit $rc): $(tail -1 "$D/train.log" | head -c 150 | tr '|' ' ') |||||||" >> "$OUT_DIR/grpo-memory.md"
    continue
  fi
  row=$(python3 -c '
import sys
gp, gm, tp, tm, gf = map(float, sys.argv[1:6])
e1, e2, e0 = (gp - gm) / gm * 100, (tp - tm) / tm * 100, (gp - gf) / gf * 100
print("%.1f MiB | %.1f MiB | %+.2f%% | %.1f MiB | %+.2f%% | %.1f MiB | %.1f MiB | %+.2f%%" % (gp / 2**20, gm / 2**20, e1, gf / 2**20, e0, tp / 2**20, tm / 2**20, e2))
print("%.4f %.4f" % (e1, e2), file=sys.stderr)' "$gen_plan" "$gen_meas" "$train_plan" "$train_meas" "$gen_first" 2> "$D/errors")
  echo "| $P | $N | $S | $rollout | $W | $M | $row |" >> "$OUT_DIR/grpo-memory.md"
  read -r e1 e2 < "$D/errors"
  errors+=("$e1" "$e2")
done
python3 -c '
import sys
e = [abs(float(x)) for x in sys.argv[1:]]
print("\n%d passes compared; mean |error| %.2f%%, max %.2f%%" % (len(e), sum(e) / len(e), max(e)) if e else "\nno pass compared")' \
  "${errors[@]}" >> "$OUT_DIR/grpo-memory.md"
mapfile -t reports < <(find "$OUT_DIR" -name 'allocations.txt*' | sort)
((${#reports[@]})) && python3 scripts/symbolize_allocation_report.py "$T" "${reports[@]}"
first_report=$(find "$OUT_DIR" -name allocations.txt | sort | head -1)
if ((ALLOCATIONS)) && [[ -n $first_report ]]; then
  {
    echo
    echo "## What the second step's generation pass holds that the first's did not ($(basename "$(dirname "$first_report")"))"
    echo
    echo '```'
    awk '/^== step 2 generation (start|end)/ { on = 1 } /^== / && !/^== step 2 generation (start|end)/ { on = 0 } on' \
      "$first_report" | head -120
    echo '```'
    echo
    echo "The second step's training pass at its peak, by site (and its first micro-batch before backward):"
    echo
    echo '```'
    sed -n '/^== step 2 training peak/,/^  + /p' "$first_report" | head -40
    sed -n '/^== step 2 first micro-batch before backward/,/^  + /p' "$first_report" | head -32
    echo '```'
  } >> "$OUT_DIR/grpo-memory.md"
fi
cat "$OUT_DIR/grpo-memory.md"
. scripts/device_out.sh
copy_to_device_out "$OUT_DIR/grpo-memory.md" "$OUT_DIR" grpo-memory-logs.tar.gz
