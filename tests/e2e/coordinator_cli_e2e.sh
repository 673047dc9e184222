#!/bin/bash
# End to end on loopback: `zerofit serve` + the CLI. Submit is idempotent (also under 100 concurrent
# submits; the same request id with another spec is refused naming the job), a call without the token is
# refused, a malformed spec is refused naming the field, logs are streamed, cancel works, and a `kill -9`
# of the coordinator loses neither the jobs nor their logs.
# usage: coordinator_cli_e2e.sh path/to/zerofit
set -u
Z="$1"
S=$(mktemp -d)
trap 'kill -9 $SERVER 2>/dev/null; rm -rf "$S"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

start_server() {
  rm -f "$S/address"
  "$Z" serve --state-dir "$S" --listen 127.0.0.1:0 > "$S/serve.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 100); do [ -s "$S/address" ] && return 0; sleep 0.1; done
  cat "$S/serve.log"; fail "the coordinator did not start"
}

start_server
[ "$(stat -c %a "$S/token")" = 600 ] || fail "token file is not mode 600"
cat > "$S/job.yaml" <<'YAML'
name: e2e-rm
task: reward
model: /models/tiny
data: /data/tiny
world_size: 2
training:
  steps: 10
  global_batch: 32
YAML

out=$("$Z" submit "$S/job.yaml" --state-dir "$S" --request-id r-1) || fail "submit: $out"
[ "$out" = "job-000001 submitted (request r-1)" ] || fail "unexpected: $out"
out=$("$Z" submit "$S/job.yaml" --state-dir "$S" --request-id r-1) || fail "resubmit: $out"
[ "$out" = "job-000001 already submitted (request r-1)" ] || fail "unexpected: $out"
# The same request id with another spec (steps 10 -> 11) is an error naming the job, not the new spec
# dropped without a word (AIP-155).
sed 's/steps: 10/steps: 11/' "$S/job.yaml" > "$S/job11.yaml"
out=$("$Z" submit "$S/job11.yaml" --state-dir "$S" --request-id r-1 2>&1) && fail "a changed spec under r-1 was accepted: $out"
echo "$out" | grep -qF "request id 'r-1' already submitted job-000001 with a different spec" || fail "unexpected: $out"
[ "$(echo "$out" | wc -l)" = 1 ] || fail "more than one line: $out"

# The resolved plan: versioned JSON with the sizes the coordinator decided (the planner sized this job's
# micro-batches, which the spec left out).
plan=$("$Z" status job-000001 --plan --state-dir "$S") || fail "status --plan: $plan"
echo "$plan" | grep -q '^  "version": 12,$' || fail "plan without version: $plan"
echo "$plan" | grep -q '"gradient_accumulation": [1-9]' || fail "plan without gradient_accumulation: $plan"
echo "$plan" | grep -q '"total_steps": 10,' || fail "plan without a resolved schedule: $plan"
# One resolver: `zerofit plan --spec` prints the plan the coordinator stored for the same spec.
"$Z" plan --spec "$S/job.yaml" > "$S/plan_from_spec.json" || fail "plan --spec: $(cat "$S/plan_from_spec.json")"
echo "$plan" | diff - "$S/plan_from_spec.json" > "$S/plan.diff" || fail "plan --spec differs from the stored plan: $(cat "$S/plan.diff")"

# 100 concurrent submits with one request id create one job.
for i in $(seq 100); do "$Z" submit "$S/job.yaml" --state-dir "$S" --request-id same > "$S/c$i.out" 2>&1 & done
wait $(jobs -p | grep -v "^$SERVER$") 2>/dev/null
ids=$(cat "$S"/c*.out | awk '{print $1}' | sort -u)
[ "$ids" = "job-000002" ] || fail "concurrent submits gave: $(cat "$S"/c*.out | sort | uniq -c)"
[ "$("$Z" list --state-dir "$S" | wc -l)" = 2 ] || fail "expected 2 jobs: $("$Z" list --state-dir "$S")"

# No token, a wrong token: refused.
out=$("$Z" list --coordinator "$(cat "$S/address")" --token wrong --state-dir /nonexistent 2>&1) && fail "wrong token accepted"
echo "$out" | grep -q "bearer token" || fail "unexpected refusal: $out"

# A malformed spec names the field and line; nothing is created.
printf 'task: reward\nmodel: m\ndata: d\ntraining:\n  lr: fast\n' > "$S/bad.yaml"
out=$("$Z" submit "$S/bad.yaml" --state-dir "$S" 2>&1) && fail "bad spec accepted"
echo "$out" | grep -q "bad.yaml:5: field 'training.lr': expected a number, got 'fast'" || fail "unexpected: $out"
[ "$("$Z" list --state-dir "$S" | wc -l)" = 2 ] || fail "a refused spec created a job"
# A 40,000-character value: its field error, quoting a bounded excerpt (not gRPC's "received initial
# metadata size exceeds limit").
{ printf 'task: '; head -c 40000 /dev/zero | tr '\0' x; printf '\nmodel: m\ndata: d\n'; } > "$S/huge.yaml"
out=$("$Z" submit "$S/huge.yaml" --state-dir "$S" 2>&1) && fail "a 40,000-character task was accepted"
echo "$out" | grep -qF "huge.yaml:1: field 'task': expected reward, dpo, sft or grpo, got 'xxx" || fail "unexpected: ${out:0:300}"
[ ${#out} -lt 400 ] || fail "an error of ${#out} bytes: ${out:0:300}"

# Logs and cancel.
"$Z" logs job-000001 --state-dir "$S" | grep -q "submitted: task reward, 2 ranks, 10 steps" || fail "logs"
"$Z" cancel job-000001 --state-dir "$S" --reason "e2e" | grep -q "cancelled" || fail "cancel"
timeout 10 "$Z" logs -f job-000001 --state-dir "$S" | grep -q "cancelled: e2e" || fail "logs -f did not end with the job"

# kill -9 the coordinator and start it again: jobs and logs are intact.
kill -9 $SERVER; wait $SERVER 2>/dev/null
start_server
"$Z" status job-000001 --state-dir "$S" | grep -q "cancelled" || fail "job 1 lost: $("$Z" status job-000001 --state-dir "$S" 2>&1)"
"$Z" status job-000002 --state-dir "$S" | grep -q "queued *attempt 0, restarts 0, no checkpoint" || fail "job 2 lost: $("$Z" status job-000002 --state-dir "$S")"
[ "$("$Z" logs job-000001 --state-dir "$S" | wc -l)" = 3 ] || fail "logs lost: $("$Z" logs job-000001 --state-dir "$S")"
out=$("$Z" submit "$S/job.yaml" --state-dir "$S" --request-id r-1) || fail "submit after restart"
[ "$out" = "job-000001 already submitted (request r-1)" ] || fail "request ids forgotten: $out"

# TLS: a server with a certificate; a client that trusts it connects, a plaintext client does not.
if command -v openssl > /dev/null; then
  kill -9 $SERVER; wait $SERVER 2>/dev/null
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$S/key.pem" -out "$S/cert.pem" -days 1 -subj /CN=localhost \
    -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" 2> /dev/null || fail "openssl"
  rm -f "$S/address"
  "$Z" serve --state-dir "$S" --listen 127.0.0.1:0 --tls-cert "$S/cert.pem" --tls-key "$S/key.pem" > "$S/serve.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 100); do [ -s "$S/address" ] && break; sleep 0.1; done
  "$Z" status job-000001 --state-dir "$S" --tls-ca "$S/cert.pem" | grep -q cancelled || fail "TLS client"
  timeout 20 "$Z" status job-000001 --state-dir "$S" > /dev/null 2>&1 && fail "plaintext client accepted by a TLS server"
fi
echo "PASS"
