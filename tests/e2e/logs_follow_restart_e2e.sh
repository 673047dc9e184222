#!/bin/bash
# `zerofit logs -f` keeps following a job across a kill -9 and restart of `zerofit serve` (same state
# directory, same port) and prints every line exactly once (issue 19).
# usage: logs_follow_restart_e2e.sh path/to/zerofit
set -u
Z="$1"
S=$(mktemp -d)
SERVER=
FOLLOW=
trap 'kill -9 $SERVER $FOLLOW 2>/dev/null; rm -rf "$S"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

start_server() {  # $1: --listen
  rm -f "$S/address"
  "$Z" serve --state-dir "$S" --listen "$1" >> "$S/serve.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 100); do [ -s "$S/address" ] && return 0; sleep 0.1; done
  cat "$S/serve.log"; fail "the coordinator did not start"
}

start_server 127.0.0.1:0
ADDR=$(cat "$S/address")
printf 'name: follow\ntask: reward\nmodel: /models/tiny\ndata: /data/tiny\ntraining:\n  steps: 2\n  global_batch: 8\n' \
  > "$S/job.yaml"
"$Z" submit "$S/job.yaml" --state-dir "$S" --request-id r > /dev/null || fail "submit"
before=$("$Z" logs job-000001 --state-dir "$S" | wc -l)
[ "$before" -ge 1 ] || fail "no log lines after submit"

"$Z" logs -f job-000001 --state-dir "$S" --reconnect-timeout 30 > "$S/follow.out" 2> "$S/follow.err" &
FOLLOW=$!
for _ in $(seq 50); do [ "$(wc -l < "$S/follow.out")" -ge "$before" ] && break; sleep 0.1; done
[ "$(wc -l < "$S/follow.out")" -eq "$before" ] || fail "logs -f printed: $(cat "$S/follow.out")"

kill -9 $SERVER; wait $SERVER 2>/dev/null
sleep 1  # the follower sees the coordinator gone and retries
kill -0 $FOLLOW 2>/dev/null || fail "logs -f ended with the coordinator: $(cat "$S/follow.err")"
start_server "$ADDR"
[ "$(cat "$S/address")" = "$ADDR" ] || fail "restarted on another address"
"$Z" cancel job-000001 --state-dir "$S" --reason "after the restart" > /dev/null || fail "cancel"

for _ in $(seq 150); do kill -0 $FOLLOW 2>/dev/null || break; sleep 0.1; done
kill -0 $FOLLOW 2>/dev/null && fail "logs -f did not end with the job: $(cat "$S/follow.out")"
wait $FOLLOW; rc=$?
[ $rc -eq 0 ] || fail "logs -f exited $rc: $(cat "$S/follow.err")"
cut -d' ' -f2- "$S/follow.out" > "$S/followed"
"$Z" logs job-000001 --state-dir "$S" | cut -d' ' -f2- > "$S/all"
diff "$S/all" "$S/followed" > /dev/null || fail "followed lines differ from the job's: $(diff "$S/all" "$S/followed")"
[ "$(sort "$S/followed" | uniq -d)" = "" ] || fail "a line printed twice: $(cat "$S/follow.out")"
grep -qF "cancelled: after the restart" "$S/followed" || fail "the line after the restart is missing"
grep -qF "following again" "$S/follow.err" || fail "the reconnect was not said on stderr: $(cat "$S/follow.err")"
echo PASS
