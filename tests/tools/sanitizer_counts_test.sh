#!/usr/bin/env bash
# scripts/sanitizer_counts.awk against compute-sanitizer logs of the GPU acceptance run on an H200
# (tests/tools/sanitizer_logs/h200_*.log, 2026-11-26: memcheck, racecheck and synccheck over device_gpu_test,
# memcheck over 3 training steps) and against edits of them that a real error would make.
#   sanitizer_counts_test.sh <repository root>
set -euo pipefail
ROOT=${1:?usage: sanitizer_counts_test.sh <repository root>}
AWK=$ROOT/scripts/sanitizer_counts.awk
LOGS=$ROOT/tests/tools/sanitizer_logs
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
expect() {  # expect <what> <log> <"errors nccl elsewhere">
  local got
  got=$(awk -f "$AWK" "$2")
  if [[ "$got" == "$3" ]]; then
    echo "ok: $1 ($got)"
  else
    echo "FAIL: $1: got '$got', want '$3'"
    failures=$((failures + 1))
  fi
}
expect "memcheck over device_gpu_test: clean" "$LOGS/h200_memcheck_device_gpu_test.log" "0 0 0"
expect "synccheck over device_gpu_test: clean" "$LOGS/h200_synccheck_device_gpu_test.log" "0 0 0"
# racecheck's summary line differs from the other tools' ("RACECHECK SUMMARY ... (N errors, W warnings)").
expect "racecheck over device_gpu_test: clean" "$LOGS/h200_racecheck_device_gpu_test.log" "0 0 0"
# The 8 API errors NCCL raises probing kernels at its initialisation (all of ERROR SUMMARY's 8).
expect "memcheck over training: NCCL's API errors only" "$LOGS/h200_memcheck_training.log" "0 8 0"

# One API error whose backtrace never reaches libnccl: counted elsewhere.
awk '/Program hit/ && !done {hit = 1}
     hit && /libnccl/ {sub(/libnccl\.so\.2/, "libzerofit.so")}
     /^========= *$/ && hit {hit = 0; done = 1}
     {print}' \
  "$LOGS/h200_memcheck_training.log" >"$TMP/api_elsewhere.log"
expect "an API error outside NCCL" "$TMP/api_elsewhere.log" "0 7 1"
# A memory error memcheck reports (its block and the summary's count).
invalid='========= Invalid __global__ read of size 4 bytes'
sed -e "s/^========= ERROR SUMMARY: 0 errors/$invalid\n========= ERROR SUMMARY: 1 error/" \
  "$LOGS/h200_memcheck_device_gpu_test.log" >"$TMP/invalid_read.log"
expect "an invalid global read" "$TMP/invalid_read.log" "1 0 0"
# Racecheck hazards counted by its summary alone.
sed -e 's/(0 errors, 0 warnings)/(2 errors, 1 warnings)/' "$LOGS/h200_racecheck_device_gpu_test.log" \
  >"$TMP/races.log"
expect "two race errors" "$TMP/races.log" "2 0 0"
# An error of a kind the parser has no pattern for: the summary's count still fails the run.
sed -e 's/ERROR SUMMARY: 8 errors/ERROR SUMMARY: 11 errors/' "$LOGS/h200_memcheck_training.log" \
  >"$TMP/unknown.log"
expect "errors of an unknown kind" "$TMP/unknown.log" "3 8 0"
((failures == 0)) || { echo "$failures failed"; exit 1; }
