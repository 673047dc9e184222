# shellcheck shell=bash
# Sourced by the e2e scripts that run a `zerofit serve`: after `. lib.sh` (with Z set to the zerofit binary)
#   D       a fresh scratch directory, removed on exit together with every zerofit_worker started under it
#           and the last coordinator start_serve started;
#   fail    prints FAIL and the reason, exits 1 (ctest passes on the word PASS only);
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
