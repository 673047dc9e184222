#!/usr/bin/env bash
# SFT's training step before and after its batches hold the completions alone (one row per example instead
# of the pair's chosen and rejected rows).
# usage: bench/sft_rows.sh OLD_BUILD NEW_BUILD [RUNS=5] [STEPS=40]
# OLD_BUILD: a build of ec3fea0 (the last commit whose SFT forwarded every rejected response too), e.g.
#   git worktree add /tmp/old ec3fea0 && cmake -S /tmp/old -B /tmp/old/build -G Ninja \
#     -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build /tmp/old/build --target zerofit_train_prefs
# NEW_BUILD: this tree's build. Both train the same SFT job (2 MPI ranks, ZeRO-2, the synthetic arithmetic
# pairs of zerofit_make_arith_prefs with 3-digit operands, a 4-layer Llama of hidden 256, global batch 64,
# one micro-batch) RUNS times, alternately; each run prints the median of its steps' time/step_ms after the
# first 5 and rank 0's peak host RSS, and the script prints the medians and the old/new ratio. It also prints
# the largest relative difference of the two builds' losses over the steps (same examples, same order: the
# rejected rows never reached the loss; the batches' padded widths differ where a rejected answer is longer,
# so OpenBLAS may sum in another order and the float32 losses differ in their last bits).
set -euo pipefail
old=${1:?usage: $0 OLD_BUILD NEW_BUILD [RUNS] [STEPS]}
new=${2:?usage: $0 OLD_BUILD NEW_BUILD [RUNS] [STEPS]}
runs=${3:-5}
steps=${4:-40}
tmp=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
"$new/worker/data/zerofit_make_arith_prefs" --out "$tmp/data" --train 2000 --test 200 --max-operand 999 \
  --ids --pad >/dev/null
python3 - "$tmp/data/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(hidden_size=256, intermediate_size=704, num_hidden_layers=4, num_attention_heads=8,
         num_key_value_heads=4, head_dim=32)
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
mpi=(mpiexec --oversubscribe --allow-run-as-root -n 2)
run() {  # BUILD TAG RUN: one job; appends "step_ms rss_mib" to $tmp/TAG.txt, its losses to $tmp/TAG.loss
  local jsonl=$tmp/$2-$3.jsonl
  OMP_NUM_THREADS=1 "${mpi[@]}" "$1/worker/torch/zerofit_train_prefs" --task sft --data "$tmp/data" \
    --steps "$steps" --global-batch 64 --micro 1 --lr 1e-3 --seed 3 --log-every 100000 \
    --metrics-jsonl "$jsonl" >/dev/null
  python3 - "$jsonl" "$tmp/$2.txt" "$tmp/$2.loss" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ms = statistics.median(r["time/step_ms"] for r in rows[5:])
rss = max(r["host_peak_rss_bytes"] for r in rows) / 2**20
open(sys.argv[2], "a").write(f"{ms} {rss}\n")
open(sys.argv[3], "w").write("\n".join(repr(r["loss"]) for r in rows) + "\n")
PY
}
for i in $(seq "$runs"); do
  run "$old" old "$i"
  run "$new" new "$i"
  paste "$tmp/old.loss" "$tmp/new.loss" >>"$tmp/losses"
done
python3 - "$tmp/old.txt" "$tmp/new.txt" "$tmp/losses" <<'PY'
import statistics, sys
pairs = [tuple(map(float, l.split())) for l in open(sys.argv[3])]
worst = max(abs(a - b) / abs(a) for a, b in pairs)
print(f"losses: {len(pairs)} steps, largest relative difference old vs new {worst:.1e}")
old = [tuple(map(float, l.split())) for l in open(sys.argv[1])]
new = [tuple(map(float, l.split())) for l in open(sys.argv[2])]
for name, rows in (("old (chosen + rejected rows)", old), ("new (completions alone)", new)):
    print(f"{name:30s} step ms median {statistics.median(r[0] for r in rows):8.2f} "
          f"(runs {', '.join(f'{r[0]:.2f}' for r in rows)}); peak host RSS {max(r[1] for r in rows):.0f} MiB")
ratios = [o[0] / n[0] for o, n in zip(old, new)]
print(f"old/new step time, run by run: {', '.join(f'{r:.2f}' for r in ratios)}; median {statistics.median(ratios):.2f}")
PY
