#!/bin/bash
# `zerofit run` end to end: a reward-model job on 2 MPI ranks with checkpoints succeeds; the same job with one
# worker killed (-9) mid-run restarts from its last checkpoint and ends with bit-identical optimizer state and
# parameters (the checkpoint files of the final step compare equal), without repeating or skipping samples
# (each step's samples come from the coordinator's scheduler; the restarted attempt begins right after the
# checkpoint). A new job refuses a checkpoint.dir that holds another job's checkpoint, unless run with
# --overwrite-checkpoints, which replaces only zerofit's folders. A job whose input files are missing is
# refused before anything starts, at the spec's line; one whose workers cannot start (a malformed data file)
# fails at once, after one launch, whatever max_restarts says. `zerofit status`, `logs` and `metrics` read a
# finished run's state directory. The kill -9 recovery again with 8-bit AdamW moments, offloaded.
# usage: run_restart_e2e.sh path/to/zerofit path/to/zerofit_make_arith_prefs
set -u
Z="$1"
GEN="$2"
. "$(dirname "$0")/lib.sh"
"$GEN" --out "$D/data" --train 400 --test 40 --ids --pad > /dev/null || fail "data generation"
spec() {  # spec NAME CHECKPOINT_DIR [TRAINING_LINE]
  cat > "$D/$1.yaml" <<YAML
name: $1
task: reward
model: $D/data
data: $D/data
world_size: 2
max_restarts: 2
training:
  steps: 160
  global_batch: 16
  micro_batch: 4
  gradient_accumulation: 2
  lr: 1.0e-3
  ${3:-seed: 1234}
checkpoint: {dir: $2, every: 20, keep: 1}
YAML
}
spec straight "$D/ck_straight"
spec killed "$D/ck_killed"

"$Z" run "$D/straight.yaml" --state-dir "$D/s1" > "$D/straight.log" 2>&1 || { cat "$D/straight.log"; fail "uninterrupted run"; }
grep -q "succeeded after 1 attempt" "$D/straight.log" || fail "uninterrupted run: $(tail -3 "$D/straight.log")"

"$Z" run "$D/killed.yaml" --state-dir "$D/s2" > "$D/killed.log" 2>&1 &
RUN=$!
kill_worker_at "$D/killed.log" 59
expect_recovered $RUN "$D/killed.log"
resumed=$(grep -o "attempt 2: 400 training pairs, steps [0-9]*" "$D/killed.log" | grep -o "[0-9]*$")
[ -n "$resumed" ] && [ $((resumed % 20)) = 0 ] && [ "$resumed" -ge 60 ] || fail "attempt 2 resumed at '$resumed'"
for r in 0 1; do
  cmp "$D/ck_straight/step-00000160/rank-0000$r.safetensors" "$D/ck_killed/step-00000160/rank-0000$r.safetensors" \
    || fail "rank $r state differs from the uninterrupted run"
done
# The same with 8-bit AdamW moments (training.optim: adamw_8bit), the killed run with optimizer offload (its
# moments in host memory): the checkpoint's block scales restore the killed worker's codes, and offload steps
# with the on-device updater's bits, so the final state is the uninterrupted on-device run's byte for byte,
# scales included.
spec straight8 "$D/ck_straight8" "optim: adamw_8bit"
spec killed8 "$D/ck_killed8" "optim: adamw_8bit
  offload: true"
"$Z" run "$D/straight8.yaml" --state-dir "$D/s8a" > "$D/straight8.log" 2>&1 || { cat "$D/straight8.log"; fail "8-bit run"; }
"$Z" run "$D/killed8.yaml" --state-dir "$D/s8b" > "$D/killed8.log" 2>&1 &
RUN=$!
kill_worker_at "$D/killed8.log" 59
expect_recovered $RUN "$D/killed8.log"
resumed8=$(grep -o "attempt 2: 400 training pairs, steps [0-9]*" "$D/killed8.log" | grep -o "[0-9]*$")
[ -n "$resumed8" ] && [ "$resumed8" -ge 60 ] || fail "8-bit moments: attempt 2 resumed at '$resumed8'"
for r in 0 1; do
  cmp "$D/ck_straight8/step-00000160/rank-0000$r.safetensors" "$D/ck_killed8/step-00000160/rank-0000$r.safetensors" \
    || fail "8-bit moments: rank $r state differs from the uninterrupted run"
done
grep -q "exp_avg_absmax" "$D/ck_killed8/step-00000160/rank-00000.safetensors" || fail "no block scales in the 8-bit checkpoint"
cmp -s "$D/ck_straight/step-00000160/rank-00000.safetensors" "$D/ck_straight8/step-00000160/rank-00000.safetensors" \
  && fail "8-bit moments trained the fp32 run's state"
# A new job pointed at a checkpoint.dir that holds another job's checkpoint refuses to start (its first save
# would replace it) and leaves that checkpoint as it was.
spec intruder "$D/ck_straight"
sed -i 's/max_restarts: 2/max_restarts: 0/' "$D/intruder.yaml"
md5sum "$D"/ck_straight/step-*/* > "$D/ck_straight.md5"
"$Z" run "$D/intruder.yaml" --state-dir "$D/s3" > "$D/intruder.log" 2>&1 && fail "a job took over another job's checkpoint.dir"
grep -q "intruder.yaml:[0-9]*: field 'checkpoint.dir': $D/ck_straight already holds another job's checkpoints (job job-000001, request run-" \
  "$D/intruder.log" || { cat "$D/intruder.log"; fail "no clear refusal"; }
md5sum -c --quiet "$D/ck_straight.md5" || fail "the other job's checkpoint changed"
grep -q "or replace them with 'checkpoint.overwrite: true' (zerofit run --overwrite-checkpoints)" "$D/intruder.log" \
  || { cat "$D/intruder.log"; fail "the refusal does not say how to replace the checkpoints"; }
# Asked to (the README's main job run again): --overwrite-checkpoints removes the earlier job's marked
# folders, never the user's own, and the new job trains and checkpoints there.
mkdir "$D/ck_straight/notes" && echo "the user's" > "$D/ck_straight/notes/keep.txt"
sed -i 's/steps: 160/steps: 20/' "$D/intruder.yaml"
"$Z" run "$D/intruder.yaml" --state-dir "$D/s5" --overwrite-checkpoints > "$D/overwrite.log" 2>&1 \
  || { cat "$D/overwrite.log"; fail "--overwrite-checkpoints"; }
grep -q "zerofit run: --overwrite-checkpoints: removed $D/ck_straight/step-00000160" "$D/overwrite.log" \
  || { cat "$D/overwrite.log"; fail "the removal is not reported"; }
[ -f "$D/ck_straight/step-00000020/rank-00000.safetensors" ] && [ ! -e "$D/ck_straight/step-00000160" ] \
  && [ "$(cat "$D/ck_straight/latest")" = "step-00000020" ] || fail "the new job's checkpoint is not the latest"
[ -f "$D/ck_straight/notes/keep.txt" ] || fail "--overwrite-checkpoints removed the user's folder"
# A job whose data dir is missing is refused by `zerofit run` before it starts anything, at the spec's line
# (the workers would read it here, in this directory): no state directory, no launch.
spec nodata "$D/ck_nodata"
sed -i -e "s|^data: .*|data: $D/no-such-dir|" "$D/nodata.yaml"
line=$(grep -n "^data:" "$D/nodata.yaml" | cut -d: -f1)
"$Z" run "$D/nodata.yaml" --state-dir "$D/s_nodata" > "$D/nodata.log" 2>&1 && fail "a job without its data dir succeeded"
grep -qx "zerofit run: $D/nodata.yaml:$line: field 'data' (the training data): $D/no-such-dir/train_ids.jsonl: No such file or directory" \
  "$D/nodata.log" || { cat "$D/nodata.log"; fail "the missing data dir is not refused at its line"; }
[ ! -e "$D/s_nodata" ] && [ ! -e "$D/ck_nodata" ] || fail "the refused job wrote a state or checkpoint directory"
grep -q "cannot start" "$D/nodata.log" && fail "the refused job launched its workers"
# A job whose workers cannot start (its training file is not JSON lines) never trained: relaunching the same
# inputs would fail the same way, so it fails at once with the workers' error, max_restarts (3) unused: one
# mpiexec launch, whose 2 ranks report the error at most once each (MPI_Abort of the first may stop the other
# before it does).
spec baddata "$D/ck_baddata"
mkdir -p "$D/bad-data" && echo "not json" > "$D/bad-data/train_ids.jsonl" && : > "$D/bad-data/test_ids.jsonl"
sed -i -e "s|^data: .*|data: $D/bad-data|" -e 's/max_restarts: 2/max_restarts: 3/' "$D/baddata.yaml"
t0=$(date +%s)
"$Z" run "$D/baddata.yaml" --state-dir "$D/s4" > "$D/baddata.log" 2>&1 && fail "a job with bad data succeeded"
took=$(( $(date +%s) - t0 ))
grep -q "zerofit run: job-000001 failed before its ranks formed an attempt: .*cannot start: .*bad-data/train_ids.jsonl.*the job never completed a step" \
  "$D/baddata.log" || { cat "$D/baddata.log"; fail "no failure with the workers' error"; }
launches=$(grep -c ":[01] *cannot start:" "$D/baddata.log")
[ "$launches" -ge 1 ] && [ "$launches" -le 2 ] \
  || { cat "$D/baddata.log"; fail "$launches 'cannot start' lines from 2 ranks: mpiexec was launched more than once"; }
[ "$took" -le 60 ] || fail "the failing job took ${took} s"
# A finished run's state directory answers `zerofit status`, `logs` and `metrics` from its job store (no
# coordinator to ask);
# --plan keeps stdout JSON alone. Not while a process holds the directory's lock: a live coordinator's error
# (TLS, a token) is the one to see.
out=$("$Z" status --state-dir "$D/s1" 2>&1) || fail "status of a finished run: $out"
echo "$out" | grep -q "^(coordinator not running; from $D/s1/jobs.db)" && echo "$out" | grep -q "job-000001 .*succeeded" \
  || fail "status of a finished run: $out"
"$Z" status job-000001 --plan --state-dir "$D/s1" 2> /dev/null | python3 -c 'import json,sys; json.load(sys.stdin)' \
  || fail "status --plan of a finished run is not JSON alone"
"$Z" logs job-000001 --state-dir "$D/s1" 2> "$D/logs.err" | grep -q "coordinator | succeeded" \
  || fail "logs of a finished run: $(cat "$D/logs.err")"
grep -q "coordinator not running" "$D/logs.err" || fail "logs did not say where they came from"
rows=$("$Z" metrics job-000001 --state-dir "$D/s1" --format csv 2> /dev/null | awk -F, '$2 == "0"' | wc -l)
[ "$rows" = 160 ] || fail "metrics of a finished run: $rows rows of rank 0, not 160"
flock --no-fork "$D/s1/lock" sleep 30 &
LOCKER=$!
for _ in $(seq 50); do flock -n "$D/s1/lock" true || break; sleep 0.1; done
out=$("$Z" status --state-dir "$D/s1" 2>&1) && { kill $LOCKER; fail "read the store under a held lock: $out"; }
kill $LOCKER; wait $LOCKER 2> /dev/null
echo "$out" | grep -q "no coordinator address" || fail "under a held lock: $out"
echo "PASS (killed after step 60, resumed at step $resumed, with offloaded 8-bit moments at step $resumed8 (= the on-device run); a new job left another job's checkpoint alone, and replaced it when asked; a job without its data dir was refused before the launch, at its line; one with bad data failed after one launch in ${took} s)"
