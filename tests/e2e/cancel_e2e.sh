#!/bin/bash
# shellcheck disable=SC2086 # $PROCS and $left: PID lists, split on purpose
# Issue 29: `zerofit cancel JOB` ends every process of the job within 10 s, 2 MPI ranks of the test-only
# zerofit_worker_faults (worker/loop/fault_plan.h), for
#  (a) a job started by `zerofit run` (the job's processes: zerofit run, mpiexec, both ranks);
#  (b) a job of `zerofit serve`, submitted with `zerofit submit`, ranks started by `mpiexec ... zerofit worker`
#      (mpiexec and both ranks);
# each with the cancel landing between the ranks' requests for one step: rank 1 lingers 2.5 s after step 4
# (fault=linger) while rank 0 already holds step 5 and waits for rank 1 in its collectives. Before the fix
# rank 1 was refused step 5 and left, and rank 0 waited in its reduce-scatter until the 5-minute collective
# deadline; now both run step 5 and stop before step 6 (or, past the coordinator's cancel grace, abort);
#  (c) (b) with rank 1 stuck in the first all-gather of step 5 (fault=hang_allgather), so that no rank can
#      reach a step boundary: the coordinator tells them to abort, which ends the collectives.
# The job's processes are identified by PID (the launching process and its descendants, read from /proc
# before the cancel), not by name: other tests run beside this one. Prints, per case, how long after the
# cancel returned the last of them was gone, and how the ranks stopped.
# usage: cancel_e2e.sh path/to/zerofit path/to/zerofit_make_arith_prefs path/to/zerofit_worker_faults [PARTS]
#   PARTS: the letters of the cases to run (default abc)
set -u
set -m # background jobs in process groups of their own: nothing here signals them by group
Z="$1"
GEN="$2"
FAULTY="$3"
PARTS="${4:-abc}"
. "$(dirname "$0")/lib.sh"
ALL="" # every process of every job started here, for the cleanup
trap 'for p in $ALL; do kill -9 "$p" 2> /dev/null; done; e2e_cleanup' EXIT
. "$(dirname "$0")/long_job.sh"
write_long_job "$GEN"  # logs every step: the test waits for the line of step 5
LINGER="rank=1,step=4,fault=linger,seconds=2.5"
HANG="rank=1,step=5,fault=hang_allgather"
ROOT=""
[ "$(id -u)" = 0 ] && ROOT=--allow-run-as-root

. "$(dirname "$0")/processes.sh"  # tree, alive
now_ms() { date +%s%3N; }
wait_for() { # wait_for FILE PATTERN SECONDS
  for _ in $(seq $(($3 * 20))); do
    grep -q "$2" "$1" 2> /dev/null && return 0
    sleep 0.05
  done
  return 1
}
wait_logs() { # wait_logs JOB PATTERN SECONDS: the job's log (zerofit logs) until it holds PATTERN
  for _ in $(seq $(($3 * 10))); do
    "$Z" logs "$1" --state-dir "$D/s" 2> /dev/null | grep -q "$2" && return 0
    sleep 0.1
  done
  return 1
}
# Cancels job $1 (CANCEL: the zerofit cancel command line) and checks that every PID in $PROCS is gone within
# 10 s of the cancel's return; prints the case's line. Sets GONE_MS.
cancel_and_check() { # cancel_and_check CASE JOB
  local t0 left
  ALL="$ALL $PROCS"
  [ "$(echo "$PROCS" | wc -w)" -ge "$MIN_PROCS" ] ||
    fail "$1: expected at least $MIN_PROCS processes, got: $(ps -o pid,args -p "$(echo $PROCS | tr ' ' ,)")"
  "${CANCEL[@]}" "$2" --reason "cancel_e2e $1" > "$D/cancel_$1.log" 2>&1 || fail "$1: zerofit cancel: $(cat "$D/cancel_$1.log")"
  t0=$(now_ms)
  GONE_MS=""
  for _ in $(seq 200); do
    left=""
    for p in $PROCS; do alive "$p" && left="$left $p"; done
    [ -z "$left" ] && {
      GONE_MS=$(($(now_ms) - t0))
      break
    }
    [ $(($(now_ms) - t0)) -gt 10000 ] && break
    sleep 0.05
  done
  [ -n "$GONE_MS" ] || fail "$1: still running 10 s after zerofit cancel: $(ps -o pid,stat,etime,args -p "$(echo $left | tr ' ' ,)")"
}
# How the ranks of the job whose log is $1 stopped: "stop step N" when every rank stopped at step N, the
# aborts otherwise. Fails when two ranks stopped at different steps (the defect itself).
stopped_how() {
  local steps aborts
  steps=$(grep -o "stopping before step [0-9]*: the job was cancelled" "$1" | grep -o "step [0-9]*" | sort | uniq -c)
  aborts=$(grep -c "aborting: the coordinator ended attempt" "$1")
  [ "$(echo "$steps" | grep -c step)" -le 1 ] || fail "ranks stopped at different steps: $steps"
  if [ -n "$steps" ] && [ "$(echo "$steps" | awk '{print $1}')" = 2 ]; then
    echo "both ranks stopped before $(echo "$steps" | awk '{print $2, $3}')"
  else
    echo "$aborts rank(s) aborted after the cancel grace${steps:+, ${steps//$'\n'/;} stopped at a step}"
  fi
}

# (a) zerofit run.
run_a() {
  t_case=$(now_ms)
  ZEROFIT_FAULTS="$LINGER" "$Z" run "$D/job.yaml" --state-dir "$D/run" --worker "$FAULTY" > "$D/run.log" 2>&1 &
  RUN=$!
  ALL="$ALL $RUN"
  wait_for "$D/run.log" "step 5/100000" 60 || fail "(a) never reached step 5: $(tail -20 "$D/run.log")"
  PROCS=$(tree "$RUN")
  MPIEXEC=$(ps -o pid= --ppid "$RUN" | head -1 | tr -d ' ')
  TOKEN=$(tr '\0' '\n' < "/proc/$MPIEXEC/environ" | sed -n 's/^ZEROFIT_TOKEN=//p')
  ADDR=$(grep -o "coordinator [0-9.:]*" "$D/run.log" | head -1 | awk '{print $2}')
  job=$(grep -o "zerofit run: job-[0-9]*" "$D/run.log" | head -1 | awk '{print $3}')
  { [ -n "$TOKEN" ] && [ -n "$ADDR" ] && [ -n "$job" ]; } || fail "(a) token, address or job unknown: $(head -3 "$D/run.log")"
  CANCEL=(env ZEROFIT_TOKEN="$TOKEN" "$Z" cancel --coordinator "$ADDR")
  MIN_PROCS=4
  cancel_and_check a "$job"
  wait "$RUN" 2> /dev/null && fail "(a) zerofit run exited 0 after a cancel"
  grep -q "zerofit run: $job cancelled after 1 attempt: cancel_e2e a" "$D/run.log" || fail "(a) not cancelled: $(tail -5 "$D/run.log")"
  echo "(a) zerofit run: every process of the job gone $GONE_MS ms after zerofit cancel; $(stopped_how "$D/run.log") ($(($(now_ms) - t_case)) ms in all)"
}
[[ "$PARTS" == *a* ]] && run_a

# (b), (c) zerofit serve + submit + mpiexec zerofit worker.
start_serve "$D/s" "$D/serve.log"
CANCEL=("$Z" cancel --state-dir "$D/s")
MIN_PROCS=3
for c in b c; do
  [[ "$PARTS" == *$c* ]] || continue
  t_case=$(now_ms)
  faults="$LINGER"
  [ "$c" = c ] && faults="$HANG"
  job=$("$Z" submit "$D/job.yaml" --state-dir "$D/s" | awk '{print $1}')
  ZEROFIT_FAULTS="$faults" mpiexec --oversubscribe $ROOT -n 2 -x ZEROFIT_FAULTS \
    "$Z" worker --job "$job" --state-dir "$D/s" --worker-binary "$FAULTY" > "$D/workers_$c.log" 2>&1 &
  MPI=$!
  ALL="$ALL $MPI"
  wait_logs "$job" "step 5/100000" 60 ||
    fail "($c) never reached step 5: $(tail -20 "$D/workers_$c.log")"
  [ "$c" = c ] && sleep 0.5 # into step 5, where both ranks wait in their collectives
  PROCS=$(tree "$MPI")
  cancel_and_check "$c" "$job"
  wait "$MPI" 2> /dev/null
  "$Z" logs "$job" --state-dir "$D/s" > "$D/logs_$c" 2>&1
  "$Z" status "$job" --state-dir "$D/s" | grep -q "cancelled" || fail "($c) status: $("$Z" status "$job" --state-dir "$D/s")"
  what="the cancel between the ranks' requests for step 5"
  [ "$c" = c ] && what="rank 1 stuck in step 5's all-gather"
  echo "($c) zerofit serve + mpiexec zerofit worker, $what: every process gone $GONE_MS ms after zerofit cancel; $(stopped_how "$D/logs_$c") ($(($(now_ms) - t_case)) ms in all)"
done
[[ "$PARTS" == *c* ]] && grep -q "stopping before step" "$D/logs_c" && fail "(c) a rank stuck in a collective cannot have stopped at a step"
echo "PASS"
