#!/usr/bin/env bash
# Builds bench/zero2_state_hash.cc against the ZeRO-2 engine of OLD_COMMIT and of the working tree, runs both
# on 1..3 MPI ranks and diffs the final-state hashes (flat parameters, master weights, AdamW moments). Each side
# compiles its own tree's copy of the program: how it composes the engine may change (issue 31: the offload
# updater comes from offload/, library zerofit_offload_updater), what it trains and prints must not.
#   scripts/compare_engine_hashes.sh OLD_COMMIT [WORK_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:?usage: scripts/compare_engine_hashes.sh OLD_COMMIT [WORK_DIR]}
work=${2:-$(mktemp -d)}
build() {  # build <source tree> <build dir>
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZEROFIT_WITH_TORCH=OFF \
    -DZEROFIT_BUILD_TESTS=OFF -DZEROFIT_BUILD_BENCHMARKS=OFF -DZEROFIT_WITH_GRPC=OFF >"$2.cmake.log"
  cmake --build "$2" --target golden -j "$(nproc)" >"$2.build.log"
}
git worktree add -q --detach "$work/old" "$old"
trap 'git worktree remove --force "$work/old"' EXIT
# A throw-away CMake project per tree: the tree's engine libraries plus the hash program.
for side in old new; do
  tree=$([[ $side == old ]] && echo "$work/old" || echo "$PWD")
  mkdir -p "$work/$side-src"
  cat >"$work/$side-src/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.22)
project(hash LANGUAGES CXX)
set(ZEROFIT_WITH_TORCH OFF)
set(ZEROFIT_BUILD_TESTS OFF)
set(ZEROFIT_BUILD_BENCHMARKS OFF)
set(ZEROFIT_WITH_GRPC OFF)
add_subdirectory($tree zerofit)
add_executable(golden $tree/bench/zero2_state_hash.cc)
target_link_libraries(golden PRIVATE zerofit_sharding zerofit_comm)
if(TARGET zerofit_offload_updater)
  target_link_libraries(golden PRIVATE zerofit_offload_updater)
endif()
CMAKE
  build "$work/$side-src" "$work/$side-build"
done
status=0
for n in 1 2 3; do
  for side in old new; do
    mpiexec --oversubscribe --allow-run-as-root -n "$n" "$work/$side-build/golden" | sort >"$work/$side.$n.txt"
  done
  if diff "$work/old.$n.txt" "$work/new.$n.txt"; then echo "np$n: identical"; else echo "np$n: differ"; status=1; fi
done
exit $status
