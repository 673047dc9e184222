#!/bin/bash
# Named metrics end to end: a reward-model job with a linear warmup and decay, run by `zerofit serve` + 2
# workers. Every step's learning rate, as `zerofit metrics --format csv` reports it for every rank, equals the
# schedule's closed form (steps are 0-based: step s is update n = s + 1; rate peak * n / warmup during warmup,
# then peak - (peak - min) * (n - warmup) / (total - warmup)), the first step included: it trains at
# peak / warmup, not 0. The job's metrics sinks (metrics: {tensorboard, jsonl}) hold every step; the json
# format is one object per line; the progress lines show the learning rate and the margin.
# usage: metrics_e2e.sh path/to/zerofit path/to/zerofit_make_arith_prefs
set -u
Z="$1"
GEN="$2"
. "$(dirname "$0")/lib.sh"
"$GEN" --out "$D/data" --train 200 --test 20 --ids --pad > /dev/null || fail "data"
start_serve "$D/s" "$D/serve.log"
cat > "$D/job.yaml" <<YAML
name: watched
task: reward
model: $D/data
data: $D/data
world_size: 2
training: {steps: 10, global_batch: 16, micro_batch: 4, gradient_accumulation: 2, lr: 1.0e-3,
           lr_schedule: linear, warmup_steps: 4, min_lr: 1.0e-4}
metrics: {tensorboard: $D/tb, jsonl: $D/metrics.jsonl}
YAML
job=$("$Z" submit "$D/job.yaml" --state-dir "$D/s" | awk '{print $1}')
[ "$job" = "job-000001" ] || fail "submit gave '$job'"
ROOT=""; [ "$(id -u)" = 0 ] && ROOT=--allow-run-as-root
mpiexec --oversubscribe $ROOT -n 2 "$Z" worker --job "$job" --state-dir "$D/s" > "$D/workers.log" 2>&1 \
  || { cat "$D/workers.log"; fail "workers failed"; }

"$Z" metrics "$job" --state-dir "$D/s" --format csv > "$D/metrics.csv" || fail "metrics --format csv"
head -1 "$D/metrics.csv" | grep -q "^step,rank,unix_us,loss,.*,lr,.*grad_norm,.*clipped,.*reward/margin" \
  || fail "csv header: $(head -1 "$D/metrics.csv")"
# Every (step, rank) row's lr against the closed form, relative error below 1e-6 (the rate is a float).
awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) col[$i] = i; next }
  { n = $1 + 1; peak = 1e-3; floor = 1e-4; warmup = 4; total = 10;
    want = n <= warmup ? peak * n / warmup : peak - (peak - floor) * (n - warmup) / (total - warmup);
    got = $col["lr"]; rows++;
    if (got <= 0 || (got - want) / want > 1e-6 || (want - got) / want > 1e-6) {
      printf "step %d rank %d: lr %s, closed form %.9g\n", $1, $2, got, want; bad = 1 }
    seen[$1 "," $2] = 1 }
  END { if (rows != 20) { printf "%d rows, want 20\n", rows; bad = 1 }
        for (s = 0; s < 10; ++s) for (r = 0; r < 2; ++r) if (!((s "," r) in seen)) { print "missing", s, r; bad = 1 }
        exit bad }' "$D/metrics.csv" || fail "learning rates differ from the schedule: $(cat "$D/metrics.csv")"
first=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) col[$i] = i; next } $1 == 0 && $2 == 0 { print $col["lr"] }' "$D/metrics.csv")
[ "$first" = "0.000250000012" ] || fail "the first step's lr is '$first', want 2.5e-4"

"$Z" metrics "$job" --state-dir "$D/s" --format json > "$D/metrics.json" || fail "metrics --format json"
[ "$(grep -c '^{"step": [0-9]*, "rank": [01], "unix_us": [0-9]*, "loss": .*"lr": .*}$' "$D/metrics.json")" = 20 ] \
  || fail "json lines: $(head -3 "$D/metrics.json")"
"$Z" metrics "$job" --state-dir "$D/s" > "$D/metrics.txt" || fail "metrics (table)"
grep -q "grad-norm" "$D/metrics.txt" || fail "table header: $(head -2 "$D/metrics.txt")"

# The sinks: rank 0 wrote one JSON line per step and a TensorBoard event file.
[ "$(grep -c '"lr": ' "$D/metrics.jsonl")" = 10 ] || fail "metrics.jsonl: $(cat "$D/metrics.jsonl")"
ls "$D"/tb/events.out.tfevents.*.* > /dev/null 2>&1 || fail "no TensorBoard event file in $D/tb"
"$Z" logs "$job" --state-dir "$D/s" | grep -q "step 1/10  loss [0-9.]*  acc [0-9.]*  margin [-0-9.]*  lr 2.500e-04" \
  || fail "progress line without lr and margin: $("$Z" logs "$job" --state-dir "$D/s" | grep 'step 1/10')"
echo "PASS (every step's learning rate matches the schedule, the first at 2.5e-4; csv, json, table, sinks)"
