#!/usr/bin/env bash
# Runs the test command's unit, mpi and e2e tiers once per OpenBLAS core type this CPU can execute
# (OPENBLAS_CORETYPE forces the kernels of another CPU generation in Debian's DYNAMIC_ARCH OpenBLAS), so a
# tolerance that holds only for one machine's kernels shows up here (issue 29). The slurm tier is left out:
# its jobs start under slurmd, which does not pass the variable on. Usage:
#   scripts/blas_coretypes.sh [--build-dir DIR] [--types "Haswell Zen ..."] [ctest arguments...]
# A core type whose kernels need instructions this CPU lacks (SkylakeX's AVX-512, Bulldozer's FMA4) dies of
# SIGILL in a probe and is reported as skipped. Prints one summary line per core type; exits 1 if any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=build
types="Haswell Zen SkylakeX Sandybridge Nehalem Penryn Core2 Prescott Atom Barcelona Bulldozer Excavator"
while (($#)); do
  case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    --types) types=$2; shift 2 ;;
    *) break ;;
  esac
done
probe="$build_dir/tests/llama_model_test"
[[ -x "$probe" ]] || { echo "blas_coretypes.sh: $probe not built (build the test command's tree first)" >&2; exit 2; }
summary=()
failed=0
for core in $types; do
  # The probe runs float32 GEMMs through OpenBLAS; OPENBLAS_VERBOSE=2 names the kernels actually loaded
  # (an unknown name falls back to the CPU's own).
  rc=0
  picked=$(OMP_NUM_THREADS=1 OPENBLAS_VERBOSE=2 OPENBLAS_CORETYPE=$core timeout 120 "$probe" \
             --gtest_filter='*GroupedQuery*' 2>&1 | sed -n 's/^Core: *//p' | head -n 1) || rc=$?
  if ((rc == 132)) || [[ -z "$picked" ]]; then
    summary+=("$core: skipped (this CPU cannot run its kernels)")
    continue
  fi
  if [[ "$picked" != "$core" ]]; then
    summary+=("$core: skipped (OpenBLAS loads $picked instead)")
    continue
  fi
  start=$SECONDS
  log="$build_dir/blas-coretype-$core.log"
  if (cd "$build_dir" && OPENBLAS_CORETYPE=$core ctest --output-on-failure --timeout 900 -j "$(nproc)" \
        -L 'unit|mpi|e2e' "$@") > "$log" 2>&1; then
    summary+=("$core: passed, $(grep -o '[0-9]*% tests passed.*' "$log" | head -n 1), $((SECONDS - start)) s")
  else
    failed=1
    summary+=("$core: FAILED ($(grep -c 'Failed\|Timeout\|\*\*\*' "$log") lines of failures; log $log)")
  fi
done
printf '%s\n' "${summary[@]}"
exit "$failed"
