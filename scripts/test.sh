#!/usr/bin/env bash
# The project's test command (README, .ci/run): makes sure dependencies are installed, builds, and runs every
# test tier that this machine can run (labels unit, mpi and e2e on loopback; slurm on a one-node Slurm cluster
# the test starts itself, as root; gpu tests skip themselves without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
./scripts/setup.sh --deps-only
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
cd "$BUILD_DIR"
ctest --output-on-failure --timeout 900 -L 'unit|mpi|e2e|slurm' "$@"
