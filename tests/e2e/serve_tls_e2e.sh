#!/bin/bash
# A whole job against a coordinator that serves TLS: a throwaway CA and a server certificate from the openssl
# CLI, `zerofit serve --tls-cert/--tls-key`, submit with --tls-ca, 2 workers started with
# `mpiexec zerofit worker --tls-ca` (the ranks connect with TLS, the token in their environment), the job
# succeeds with its logs and metrics. A client without the CA, or with the wrong CA, fails with the error
# that names the coordinator's address and says what to check; the server name override (--tls-server-name)
# reaches a certificate issued for another name.
# usage: serve_tls_e2e.sh path/to/zerofit path/to/zerofit_make_arith_prefs
set -u
Z="$1"
GEN="$2"
. "$(dirname "$0")/lib.sh"
command -v openssl > /dev/null || fail "openssl not installed (./scripts/setup.sh installs it)"

# The CA, and a server certificate it signs for 127.0.0.1 / localhost / coordinator.test.
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$D/ca.key" -out "$D/ca.pem" -days 1 -subj "/CN=zerofit test CA" \
  2> /dev/null || fail "openssl: CA"
openssl req -newkey rsa:2048 -nodes -keyout "$D/server.key" -out "$D/server.csr" -subj "/CN=coordinator.test" \
  2> /dev/null || fail "openssl: CSR"
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:coordinator.test\n' > "$D/san.ext"
openssl x509 -req -in "$D/server.csr" -CA "$D/ca.pem" -CAkey "$D/ca.key" -CAcreateserial -out "$D/server.pem" \
  -days 1 -extfile "$D/san.ext" 2> /dev/null || fail "openssl: sign"
# Another CA that did not sign it.
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$D/other.key" -out "$D/other.pem" -days 1 -subj "/CN=other CA" \
  2> /dev/null || fail "openssl: other CA"

"$GEN" --out "$D/data" --train 200 --test 20 --ids --pad > /dev/null || fail "data"
start_serve "$D/s" "$D/serve.log" --tls-cert "$D/server.pem" --tls-key "$D/server.key"
cat > "$D/job.yaml" <<YAML
name: tls
task: dpo
model: $D/data
data: $D/data
world_size: 2
training: {steps: 6, global_batch: 16, micro_batch: 4, gradient_accumulation: 2, lr: 1.0e-3}
YAML

# Without the CA: the clear error, quickly (the CLI's retries are bounded), naming the address.
start=$(date +%s)
out=$(timeout 30 "$Z" submit "$D/job.yaml" --state-dir "$D/s" 2>&1) && fail "a plaintext client was accepted: $out"
echo "$out" | grep -q "cannot reach the coordinator at $ADDR" || fail "unclear error without the CA: $out"
echo "$out" | grep -q -- "--tls-ca" || fail "the error does not say to pass --tls-ca: $out"
[ $(($(date +%s) - start)) -lt 20 ] || fail "the plaintext client took too long to give up"
# The wrong CA: the same error, naming the CA it trusted.
out=$(timeout 30 "$Z" list --state-dir "$D/s" --tls-ca "$D/other.pem" 2>&1) && fail "a certificate from another CA was accepted: $out"
echo "$out" | grep -q "cannot reach the coordinator at $ADDR" || fail "unclear error with the wrong CA: $out"
echo "$out" | grep -q "trusts only the CA in $D/other.pem" || fail "the error does not name the CA: $out"
# A worker without the CA fails the same way (its retries give up within a minute; not waited for here).

job=$("$Z" submit "$D/job.yaml" --state-dir "$D/s" --tls-ca "$D/ca.pem" | awk '{print $1}')
[ "$job" = "job-000001" ] || fail "submit over TLS gave '$job'"
# The certificate is for coordinator.test too: reach it by IP, verify that name (the CA from the environment).
ZEROFIT_TLS_CA="$D/ca.pem" "$Z" status "$job" --state-dir "$D/s" --tls-server-name coordinator.test \
  | grep -q "queued" || fail "status with --tls-server-name"
out=$(timeout 30 "$Z" status "$job" --state-dir "$D/s" --tls-ca "$D/ca.pem" --tls-server-name elsewhere.test 2>&1) \
  && fail "a certificate without the expected name was accepted"
echo "$out" | grep -q "for the name 'elsewhere.test'" || fail "the error does not name the expected name: $out"

ROOT=""; [ "$(id -u)" = 0 ] && ROOT=--allow-run-as-root
mpiexec --oversubscribe $ROOT -n 2 "$Z" worker --job "$job" --state-dir "$D/s" --tls-ca "$D/ca.pem" \
  > "$D/workers.log" 2>&1 || { cat "$D/workers.log"; fail "workers failed"; }
"$Z" status "$job" --state-dir "$D/s" --tls-ca "$D/ca.pem" | grep -q "succeeded" \
  || fail "status: $("$Z" status "$job" --state-dir "$D/s" --tls-ca "$D/ca.pem" 2>&1)"
logs=$("$Z" logs "$job" --state-dir "$D/s" --tls-ca "$D/ca.pem")
echo "$logs" | grep -q ":0 .*| step 6/6  loss" || fail "no step lines from rank 0: $logs"
echo "$logs" | grep -q ":1 | registered" || fail "no lines from rank 1: $logs"
metrics=$("$Z" metrics "$job" --state-dir "$D/s" --tls-ca "$D/ca.pem")
[ "$(echo "$metrics" | awk 'NR > 1 && $1 == 5' | wc -l)" = 2 ] || fail "step 5 metrics of both ranks: $metrics"
echo "PASS"
