# shellcheck shell=bash
# Sourced by the e2e scripts that run a coordinator: after `. lib.sh` (with Z set to the zerofit binary)
#   D       a fresh scratch directory, removed on exit together with every zerofit_worker started under it
#           and the last coordinator start_serve started;
#   fail    prints FAIL and the reason, exits 1 (ctest passes on the word PASS only);
#   kill_worker_at LOG STEP   waits (60 s) until the `zerofit run` writing LOG checkpoints at 0-based STEP,
#           then kills one of its workers with -9;
#   expect_recovered PID LOG  waits for that `zerofit run` (PID) and checks it restarted and succeeded;
#   start_serve STATE_DIR LOG [serve flags]   starts `zerofit serve --listen 127.0.0.1:0` on STATE_DIR in the
#           background and waits up to 10 s for its address file; sets SERVER (its pid) and ADDR.
D=$(mktemp -d)
SERVER=""
e2e_cleanup() {
  [ -n "$SERVER" ] && kill -9 "$SERVER" 2> /dev/null
  pkill -9 -f "zerofit_worker.*$D" 2> /dev/null
  rm -rf "$D"
}
trap e2e_cleanup EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
start_serve() {
  local state=$1 log=$2
  shift 2
  "$Z" serve --state-dir "$state" --listen 127.0.0.1:0 "$@" > "$log" 2>&1 &
  SERVER=$!
  for _ in $(seq 100); do [ -s "$state/address" ] && break; sleep 0.1; done
  [ -s "$state/address" ] || fail "no coordinator: $(cat "$log")"
  # shellcheck disable=SC2034 # read by the scripts that source this file
  ADDR=$(cat "$state/address")
}
kill_worker_at() {
  local log=$1 step=$2 addr victim
  for _ in $(seq 1200); do grep -q "(checkpoint step $step)" "$log" && break; sleep 0.05; done
  grep -q "(checkpoint step $step)" "$log" || { cat "$log"; fail "never reached step $((step + 1))"; }
  # One of this run's ranks: its command line starts with the worker and names this run's coordinator (other
  # runs on the machine have a job-000001 too).
  addr=$(grep -o "(coordinator 127.0.0.1:[0-9]*" "$log" | head -1 | cut -d' ' -f2)
  victim=$(pgrep -f "^[^ ]*zerofit_worker --coordinator $addr .*--job job-000001" | tail -1)
  [ -n "$victim" ] || fail "no worker process to kill"
  kill -9 "$victim"
}
expect_recovered() {
  local pid=$1 log=$2
  wait "$pid" || { cat "$log"; fail "the run did not recover"; }
  grep -q "restarting: the launcher exited with code" "$log" || { cat "$log"; fail "no restart recorded"; }
  grep -q "succeeded after 2 attempt" "$log" || { tail -5 "$log"; fail "not succeeded after 2 attempts"; }
}
