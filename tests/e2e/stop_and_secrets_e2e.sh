#!/bin/bash
# Issue 19, security and stopping, for `zerofit run` on 2 MPI ranks:
#  - while a job runs, no zerofit process (run, mpiexec, workers; serve and `mpiexec zerofit worker` too)
#    carries the bearer token on its command line (/proc/PID/cmdline, what every local user can read), and no
#    part of it lands in the job store;
#  - the state directory is created 0700 and the job store's files are 0600;
#  - SIGINT, SIGTERM or SIGKILL sent to the `zerofit run` process alone ends every process of the job within
#    10 s (SIGKILL: mpiexec gets PR_SET_PDEATHSIG and takes its ranks with it);
#  - `zerofit run` and `zerofit serve` refuse a state directory other users can write, and `zerofit serve` a
#    token file other users can read or write, naming the path and the chmod that fixes it.
# usage: stop_and_secrets_e2e.sh path/to/zerofit path/to/zerofit_make_arith_prefs
set -u
set -m  # background jobs in their own process groups, SIGINT not ignored: a signal reaches `zerofit run` alone
Z="$1"
GEN="$2"
D=$(mktemp -d)
ALL=""  # every process of every job started here, for the cleanup
trap 'for p in $ALL; do kill -9 "$p" 2>/dev/null; done; rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
. "$(dirname "$0")/long_job.sh"
write_long_job "$GEN"  # logs every step: the test waits for step 3

. "$(dirname "$0")/processes.sh"  # tree, alive

# Starts `zerofit run` in the background and waits until both ranks train; sets RUN, PROCS.
start_job() {  # start_job TAG
  "$Z" run "$D/job.yaml" --state-dir "$D/state-$1" > "$D/$1.log" 2>&1 &
  RUN=$!
  for _ in $(seq 600); do grep -q "step 3/100000" "$D/$1.log" && break; sleep 0.05; done
  grep -q "step 3/100000" "$D/$1.log" || { cat "$D/$1.log"; fail "$1: the job never reached step 3"; }
  PROCS=$(tree "$RUN")
  ALL="$ALL $PROCS"
  [ "$(echo "$PROCS" | wc -w)" -ge 4 ] || fail "$1: expected zerofit run, mpiexec and 2 workers, got: $(ps -o pid,args -p "${PROCS// /,}")"
}

# --- secrets, during a job ---------------------------------------------------------------------------------
start_job secrets
MPIEXEC=$(ps -o pid= --ppid "$RUN" | head -1 | tr -d ' ')
TOKEN=$(tr '\0' '\n' < "/proc/$MPIEXEC/environ" | sed -n 's/^ZEROFIT_TOKEN=//p')
[ ${#TOKEN} -ge 32 ] || fail "mpiexec's environment has no ZEROFIT_TOKEN (the ranks need it)"
checked=0
for p in $(pgrep -f zerofit) $PROCS; do
  [ -r "/proc/$p/cmdline" ] || continue
  cmd=$(tr '\0' ' ' < "/proc/$p/cmdline")
  case "$cmd" in *"$TOKEN"*) fail "the token is on the command line of $p: $cmd" ;; esac
  case "$cmd" in *"${TOKEN:0:8}"*) fail "part of the token is on the command line of $p: $cmd" ;; esac
  checked=$((checked + 1))
done
[ "$checked" -ge 4 ] || fail "read only $checked command lines"
for f in "$D/state-secrets"/*; do
  grep -qa "${TOKEN:0:8}" "$f" && fail "part of the token is stored in $f"
done
[ "$(stat -c %a "$D/state-secrets")" = 700 ] || fail "state dir mode $(stat -c %a "$D/state-secrets"), not 700"
for f in "$D/state-secrets"/*; do
  [ "$(stat -c %a "$f")" = 600 ] || fail "$f has mode $(stat -c %a "$f"), not 600"
done
kill -9 $PROCS 2>/dev/null
wait "$RUN" 2>/dev/null

# The same with `zerofit serve` and ranks started by `mpiexec zerofit worker` (which reads the token file).
"$Z" serve --state-dir "$D/served" --listen 127.0.0.1:0 > "$D/serve.log" 2>&1 &
SERVER=$!
ALL="$ALL $SERVER"
for _ in $(seq 100); do [ -s "$D/served/address" ] && break; sleep 0.1; done
[ -s "$D/served/address" ] || fail "no coordinator: $(cat "$D/serve.log")"
[ "$(stat -c %a "$D/served")" = 700 ] || fail "serve's state dir has mode $(stat -c %a "$D/served")"
job=$("$Z" submit "$D/job.yaml" --state-dir "$D/served" | awk '{print $1}')
ROOT=""; [ "$(id -u)" = 0 ] && ROOT=--allow-run-as-root
mpiexec --oversubscribe $ROOT -n 2 "$Z" worker --job "$job" --state-dir "$D/served" > "$D/workers.log" 2>&1 &
MPI=$!
for _ in $(seq 600); do "$Z" logs "$job" --state-dir "$D/served" 2>/dev/null | grep -q "step 3/100000" && break; sleep 0.1; done
PROCS=$(tree "$MPI")
ALL="$ALL $PROCS"
TOKEN=$(cat "$D/served/token")
checked=0
for p in $PROCS $SERVER; do
  [ -r "/proc/$p/cmdline" ] || continue
  cmd=$(tr '\0' ' ' < "/proc/$p/cmdline")
  case "$cmd" in *"${TOKEN:0:8}"*) fail "the token is on the command line of $p: $cmd" ;; esac
  checked=$((checked + 1))
done
[ "$checked" -ge 4 ] || fail "zerofit worker: read only $checked command lines ($(cat "$D/workers.log"))"
for f in "$D/served"/*; do
  [ "$(stat -c %a "$f")" = 600 ] || fail "$f has mode $(stat -c %a "$f"), not 600"
done
kill -9 $PROCS $SERVER 2>/dev/null
wait "$MPI" "$SERVER" 2>/dev/null

# --- stopping: a signal to `zerofit run` alone ends the whole job within 10 s ---------------------------------
for sig in INT TERM KILL; do
  start_job "sig$sig"
  kill -"$sig" "$RUN"
  gone=""
  for i in $(seq 100); do
    left=""
    for p in $PROCS; do alive "$p" && left="$left $p"; done
    [ -z "$left" ] && { gone=$i; break; }
    sleep 0.1
  done
  [ -n "$gone" ] || fail "SIG$sig to zerofit run: still running after 10 s: $(ps -o pid,stat,args -p "$(echo $left | tr ' ' ,)")"
  wait "$RUN" 2>/dev/null
  echo "SIG$sig: every process of the job gone after $((gone * 100)) ms"
done

# --- refusals --------------------------------------------------------------------------------------------------
mkdir "$D/open"
chmod 777 "$D/open"
out=$(timeout 20 "$Z" run "$D/job.yaml" --state-dir "$D/open" 2>&1) && fail "zerofit run took a world-writable state dir"
echo "$out" | grep -q "$D/open.*chmod 700" || fail "zerofit run's refusal: $out"
out=$(timeout 10 "$Z" serve --state-dir "$D/open" --listen 127.0.0.1:0 2>&1) && fail "serve took a world-writable state dir"
echo "$out" | grep -q "$D/open.*chmod 700" || fail "zerofit serve's refusal: $out"
[ -e "$D/open/jobs.db" ] && fail "a job store was created in the refused directory"
mkdir -m 700 "$D/tok"
for mode in 644 620; do
  echo 0123456789abcdef0123456789abcdef > "$D/tok/token"
  chmod "$mode" "$D/tok/token"
  out=$(timeout 10 "$Z" serve --state-dir "$D/tok" --listen 127.0.0.1:0 2>&1) && fail "serve took a token file of mode $mode"
  echo "$out" | grep -q "$D/tok/token.*chmod 600" || fail "zerofit serve's refusal of a token file of mode $mode: $out"
done
# zerofit_worker refuses a token on its command line (a 0600 file or the environment only).
W="$(dirname "$Z")/../worker/torch/zerofit_worker"
if [ -x "$W" ]; then
  out=$("$W" --coordinator 127.0.0.1:1 --token not-a-real-token --job j 2>&1) && fail "zerofit_worker took --token"
  echo "$out" | grep -q "token-file PATH (mode 0600) or set ZEROFIT_TOKEN" || fail "zerofit_worker --token: $out"
fi
# `zerofit slurm` with an external coordinator reads ~/.zerofit/token: refused when others can read it.
mkdir -p "$D/home/.zerofit" && chmod 700 "$D/home/.zerofit"
echo 0123456789abcdef0123456789abcdef > "$D/home/.zerofit/token" && chmod 644 "$D/home/.zerofit/token"
printf 'name: sl\ntask: reward\nmodel: /m\ndata: /d\ntraining: {steps: 2, global_batch: 4, micro_batch: 2, gradient_accumulation: 2}\nslurm: {nodes: 1, tasks_per_node: 1, coordinator: "127.0.0.1:1", state_dir: %s}\n' "$D/sl" > "$D/sl.yaml"
out=$(HOME="$D/home" "$Z" slurm "$D/sl.yaml" 2>&1) && fail "zerofit slurm took a token file of mode 644"
echo "$out" | grep -q "$D/home/.zerofit/token is readable by other users" || fail "zerofit slurm's refusal: $out"
# Its spec's model (/m) is not on this host: a warning at the line before the job would wait in the queue
# (the ranks' nodes may see other files), not a refusal.
echo "$out" | grep -q "zerofit slurm: warning: $D/sl.yaml:3: field 'model' (the model's config.json): /m/config.json: No such file or directory (as this host sees it" \
  || fail "no warning about the model: $out"
# A state directory with a line break would start a line of its own in the sbatch script (bash runs it):
# refused, with nothing written.
nl_state="$D/sl
touch $D/injected #"
out=$(HOME="$D/home" "$Z" slurm "$D/sl.yaml" --state-dir "$nl_state" 2>&1) && fail "a state directory with a line break was taken"
echo "$out" | grep -q "holds a line break, which an sbatch script cannot carry" || fail "no clear refusal: $out"
[ -e "$nl_state" ] || [ -e "$D/injected" ] && fail "something was written for a refused state directory"
echo "PASS (no token on any command line; state 0700, files 0600; SIGINT, SIGTERM and SIGKILL stop the whole job)"
