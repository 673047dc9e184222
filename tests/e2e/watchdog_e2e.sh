#!/bin/bash
# The progress watchdog end to end (issue 20, "Hangs"), `zerofit run` on 2 MPI ranks of the test-only
# zerofit_worker_faults (worker/loop/fault_plan.h):
#  (a) rank 1 hangs inside its first all-gather of step 15 (ZEROFIT_FAULTS=...hang_allgather): the
#      coordinator declares the attempt hung (floor 3 s) naming rank 1, the all-gather and the step; the
#      ranks abort their communicators; attempt 2 resumes from the checkpoint of step 9 and the job succeeds
#      with final checkpoint files byte-identical to an uninterrupted run of the production zerofit_worker;
#  (b) rank 1 takes 0.4 s longer per step from step 12 on: slower than 2 x the median step time, under the
#      3 s floor, always progressing: not killed, the job succeeds in attempt 1;
#  (c) rank 1's report of step 5 carries a metric name the coordinator must refuse: refused with the name in
#      the job's log, the coordinator serves on, attempt 2 runs clean and the job succeeds;
#  (d) a lone rank stuck outside any collective (a 60 s step): hung, and since aborting its communicator
#      cannot wake it, its heartbeat thread ends the process with exit code 86 after the 5 s grace; attempt 2
#      succeeds.
# Prints the figures BENCHMARKS.md quotes ("Hang detection"): the silence at detection, the abort and
# relaunch latencies (from the job store's log times, with sqlite3), and the steps lost.
# usage: watchdog_e2e.sh path/to/zerofit path/to/zerofit_make_arith_prefs path/to/zerofit_worker_faults
set -u
Z="$1"
GEN="$2"
FAULTY="$3"
. "$(dirname "$0")/lib.sh"
"$GEN" --out "$D/data" --train 400 --test 40 --ids --pad > /dev/null || fail "data generation"
spec() {  # spec NAME STEPS STEP_TIME_FACTOR [WORLD_SIZE (2)]
  local world="${4:-2}"
  cat > "$D/$1.yaml" <<YAML
name: $1
task: reward
model: $D/data
data: $D/data
world_size: $world
max_restarts: 1
training:
  steps: $2
  global_batch: 16
  micro_batch: 4
  gradient_accumulation: $((4 / world))
  lr: 1.0e-3
checkpoint: {dir: $D/ck_$1, every: 10, keep: 1}
watchdog: {step_time_factor: $3, floor_s: 3}
YAML
}
run() {  # run NAME [ENV=VALUE...]: zerofit run, bounded (a hang nobody detects must not hang the test)
  local name="$1"
  shift
  env "$@" timeout 120 "$Z" run "$D/$name.yaml" --state-dir "$D/s_$name" "${WORKER[@]}" > "$D/$name.log" 2>&1
}
spec straight 40 10
spec hang 40 10
spec slow 20 2
spec corrupt 12 10
spec stuck 8 10 1

# (a) A hang inside all-gather, against an uninterrupted run.
t0=$(date +%s.%N)
WORKER=()  # the production zerofit_worker that zerofit was built with
run straight || { cat "$D/straight.log"; fail "uninterrupted run"; }
t1=$(date +%s.%N)
WORKER=(--worker "$FAULTY")
run hang ZEROFIT_FAULTS="rank=1,step=15,fault=hang_allgather" || { cat "$D/hang.log"; fail "the hung job did not recover"; }
t2=$(date +%s.%N)
# The worker is not told to add this to the job's log anywhere else: the faults binary ran, with the fault.
grep -q "zerofit_worker_faults: rank 1, step 15, attempt 1: hang_allgather" "$D/hang.log" || fail "no fault armed"
verdict=$(grep -m1 "restarting: .*hung while" "$D/hang.log")
[ -n "$verdict" ] || { cat "$D/hang.log"; fail "no hang verdict"; }
for want in "rank 1 (host " "since it completed step 14" "step 15: " "all_gather #1 of the step" "floor 3s"; do
  [[ "$verdict" == *"$want"* ]] || fail "the verdict lacks '$want': $verdict"
done
grep -q ":1 *aborting: the coordinator ended attempt 1; this rank was at attempt 1, step 15: .*all_gather #1" \
  "$D/hang.log" || { cat "$D/hang.log"; fail "rank 1's last activity is not in the job's log"; }
grep -q "succeeded after 2 attempt" "$D/hang.log" || { tail -5 "$D/hang.log"; fail "not succeeded after 2 attempts"; }
resumed=$(grep -o "attempt 2 running on 2 ranks from step [0-9]*" "$D/hang.log" | grep -o "[0-9]*$")
[ "$resumed" = 10 ] || fail "attempt 2 resumed at step '$resumed', not after the checkpoint of step 9"
for r in 0 1; do
  cmp "$D/ck_straight/step-00000040/rank-0000$r.safetensors" "$D/ck_hang/step-00000040/rank-0000$r.safetensors" \
    || fail "rank $r's final state differs from the uninterrupted run"
done
silence=$(echo "$verdict" | grep -o "rank 1 (host [^)]*): no progress for [0-9.]*m*s" | grep -o "[0-9.]*m*s$")

# (b) A slow rank that keeps progressing.
run slow ZEROFIT_FAULTS="rank=1,step=12,fault=slow,seconds=0.4" || { cat "$D/slow.log"; fail "the slow job failed"; }
grep -q "zerofit_worker_faults: rank 1, step 12, attempt 1: slow by 0.4s per step" "$D/slow.log" || fail "no slow fault armed"
grep -q "succeeded after 1 attempt" "$D/slow.log" || { cat "$D/slow.log"; fail "the slow rank was killed"; }
grep -q "hung" "$D/slow.log" && fail "a hang was declared for the slow rank"

# (c) A corrupt report.
run corrupt ZEROFIT_FAULTS="rank=1,step=5,fault=corrupt_report" || { cat "$D/corrupt.log"; fail "the job with a corrupt report failed"; }
grep -q "coordinator *refused a report of [^ ]*:1: metric name 'corrupt metric!' is not 1..128 characters" \
  "$D/corrupt.log" || { cat "$D/corrupt.log"; fail "no refusal in the job's log"; }
grep -q "succeeded after 2 attempt" "$D/corrupt.log" || { tail -5 "$D/corrupt.log"; fail "not succeeded after 2 attempts"; }

# (d) A rank stuck where Abort() cannot reach it.
run stuck ZEROFIT_FAULTS="rank=0,step=3,fault=slow,seconds=60" || { cat "$D/stuck.log"; fail "the stuck job did not recover"; }
grep -q "restarting: rank 0 (host [^)]*) hung while its heartbeats arrived" "$D/stuck.log" \
  || { cat "$D/stuck.log"; fail "no hang verdict for the stuck rank"; }
grep -q "Exit code: *86" "$D/stuck.log" || { cat "$D/stuck.log"; fail "the stuck rank did not exit with code 86"; }
grep -q "succeeded after 2 attempt" "$D/stuck.log" || { tail -5 "$D/stuck.log"; fail "not succeeded after 2 attempts"; }

# Figures: the job store's log times (microseconds) of the verdict, rank 1's abort line, and attempt 2.
figures=""
if command -v sqlite3 > /dev/null; then
  at() { sqlite3 "$D/s_hang/jobs.db" "select min(time_us) from logs where $1"; }
  v=$(at "text like 'restarting:%hung%'")
  a=$(at "source like '%:1' and text like 'aborting:%'")
  n=$(at "text like 'attempt 2 running%'")
  figures=$(awk -v v="$v" -v a="$a" -v n="$n" \
    'BEGIN { printf "verdict->rank 1 abort %.2f s, verdict->attempt 2 running %.2f s", (a-v)/1e6, (n-v)/1e6 }')
fi
wall=$(awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { printf "uninterrupted %.1f s, with the hang %.1f s", b-a, c-b }')
echo "PASS (hang at step 15 detected after $silence without progress; resumed at step $resumed: $((15 - resumed)) steps redone; $figures; $wall; slow rank not killed; a corrupt report refused; a stuck rank exited with 86)"
