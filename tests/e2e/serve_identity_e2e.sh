#!/bin/bash
# One coordinator per port and per state directory, and no client-named file that can block it (issue 19):
#  - a second `zerofit serve` on a port in use fails with "address in use" (gRPC's SO_REUSEPORT is off), on
#    one line of stderr and nothing else (no raw gRPC log line);
#  - a second `zerofit serve` on the same state directory fails naming the first one's PID and address, and
#    leaves its address file alone;
#  - a spec whose `deepspeed:` file (or model) is a FIFO is answered at once, submitted again and again, and
#    the coordinator goes on serving normal jobs;
#  - submit sends the DeepSpeed config's contents (a path relative to submit's directory, not the
#    coordinator's).
# usage: serve_identity_e2e.sh path/to/zerofit
set -u
Z="$1"
S=$(mktemp -d)
SERVER=
trap 'kill -9 $SERVER 2>/dev/null; rm -rf "$S"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

mkdir -p "$S/a" "$S/b"
"$Z" serve --state-dir "$S/a" --listen 127.0.0.1:0 > "$S/serve.log" 2>&1 &
SERVER=$!
for _ in $(seq 100); do [ -s "$S/a/address" ] && break; sleep 0.1; done
[ -s "$S/a/address" ] || { cat "$S/serve.log"; fail "the coordinator did not start"; }
ADDR=$(cat "$S/a/address")

# The same port, another state directory: refused, not a second listener; stderr is the one clear line
# (gRPC's own raw error line for the failed bind used to come first).
out=$(timeout 10 "$Z" serve --state-dir "$S/b" --listen "$ADDR" 2> "$S/second.err"); rc=$?
err=$(cat "$S/second.err")
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "a second serve on $ADDR started (rc $rc): $out $err"
[ -z "$out" ] || fail "a refused serve printed on stdout: $out"
[ "$err" = "zerofit serve: address in use: $ADDR (another zerofit serve? \`zerofit status --coordinator $ADDR\`; or pass another --listen)" ] \
  || fail "stderr is not exactly the clear 'address in use' line: $err"

# The same state directory, another port: refused naming the holder; the address file still names it.
out=$(timeout 10 "$Z" serve --state-dir "$S/a" --listen 127.0.0.1:0 2>&1); rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "a second serve on state dir $S/a started (rc $rc): $out"
echo "$out" | grep -qF "in use by another zerofit serve or run (pid $SERVER, address $ADDR)" || fail "holder not named: $out"
[ "$(cat "$S/a/address")" = "$ADDR" ] || fail "the address file was rewritten: $(cat "$S/a/address")"
"$Z" list --state-dir "$S/a" > /dev/null || fail "the first coordinator stopped answering"

# Client-named files that are FIFOs: refused (deepspeed:) or passed over by the planner (model:), at once.
mkfifo "$S/ds.fifo" "$S/model.fifo"
printf 'task: reward\nmodel: /models/tiny\ndata: /data/tiny\ndeepspeed: %s\n' "$S/ds.fifo" > "$S/ds.yaml"
printf 'task: reward\nmodel: %s\ndata: /data/tiny\ntraining:\n  steps: 2\n  global_batch: 8\n' \
  "$S/model.fifo" > "$S/model.yaml"
for i in 1 2 3 4 5; do
  out=$(timeout 8 "$Z" submit "$S/ds.yaml" --state-dir "$S/a" 2>&1); rc=$?
  [ $rc -ne 124 ] || fail "submit $i of a FIFO deepspeed: config hung"
  [ $rc -ne 0 ] || fail "a FIFO deepspeed: config was accepted: $out"
  echo "$out" | grep -qF "ds.yaml:4: field 'deepspeed': cannot read the DeepSpeed config: $S/ds.fifo: not a regular file (a FIFO)" \
    || fail "unexpected error: $out"
  out=$(timeout 8 "$Z" submit "$S/model.yaml" --state-dir "$S/a" --request-id "model-fifo-$i" 2>&1) \
    || fail "submit $i of a FIFO model failed or hung (rc $?): $out"
done
"$Z" logs job-000001 --state-dir "$S/a" | grep -qF "model.fifo: not a regular file (a FIFO)" \
  || fail "the planner did not say why it passed the model over: $("$Z" logs job-000001 --state-dir "$S/a")"
printf 'task: reward\nmodel: /models/tiny\ndata: /data/tiny\ntraining:\n  steps: 2\n  global_batch: 8\n' > "$S/ok.yaml"
out=$(timeout 8 "$Z" submit "$S/ok.yaml" --state-dir "$S/a" --request-id ok 2>&1) || fail "a normal job after the FIFOs: $out"
[ "$out" = "job-000006 submitted (request ok)" ] || fail "unexpected: $out"

# submit sends the DeepSpeed config's contents: a path relative to where submit runs works although the
# coordinator runs elsewhere, and the coordinator opens nothing.
mkdir "$S/specs"
echo '{"train_batch_size": 48, "train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2}}' \
  > "$S/specs/ds.json"
printf 'task: reward\nmodel: /models/tiny\ndata: /data/tiny\nworld_size: 2\ndeepspeed: ds.json\n' > "$S/specs/ds.yaml"
out=$(cd "$S/specs" && timeout 8 "$Z" submit ds.yaml --state-dir "$S/a" --request-id ds 2>&1) || fail "deepspeed: submit: $out"
rm "$S/specs/ds.json"
plan=$("$Z" status job-000007 --plan --state-dir "$S/a") || fail "status --plan: $plan"
echo "$plan" | grep -q '"global_batch": 48,' || fail "the DeepSpeed config did not reach the plan: $plan"
echo PASS
