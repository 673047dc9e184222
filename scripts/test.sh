#!/usr/bin/env bash
# The project's test command (README, .ci/run): makes sure dependencies are installed, builds, and runs every
# test tier that this machine can run (labels unit, mpi and e2e on loopback; slurm on Slurm clusters the tests
# start themselves, as root: one node, and three nodes in network namespaces; gpu tests skip themselves
# without a GPU), then the tests of the sanitizer builds, which compile beside the tiers at nice 19
# (cmake/ZerofitSanitize.cmake, issue 19):
#   build-asan  AddressSanitizer (leak detection on) + UndefinedBehaviorSanitizer (no recovery) over every
#               LibTorch-free library and its unit tests;
#   build-tsan  ThreadSanitizer over the gRPC-free unit tests that run threads: core concurrency (thread pool,
#               serial executor, ordered line map), the coordinator (job state, job store),
#               the test device (streams on their own threads), the CUDA device and kernels on the emulated GPU.
# Both sanitizer builds compile the CUDA code against the host emulation of CUDA (docs/gpu.md, "on an emulated GPU").
# Beside them, also at nice 19, the torch 2.x CUDA compile tier (scripts/torch_cuda_compile_check.sh, issue
# 28): every .cc under worker/torch compiled, not linked, as a CUDA build against Debian 13's CUDA LibTorch 2.6
# headers (downloaded once with apt-get download into third_party/torch-cuda-headers/; the command fails when
# Debian's archive cannot be reached and they are not there yet) in build-torch-cuda.
# Sanitizer builds compile with -O0 -g1 (line numbers in every report), except the parsing and tokenizing
# code their tests spend their time in, which keeps -O1 (zerofit_sanitize_hot): 0.63x the CPU time of -O1
# everywhere to compile, about 1.3x to run the tests (BENCHMARKS.md, "A cold machine within about 15 minutes").
# Extra arguments go to the main tier's ctest (e.g. -R name). SANITIZERS=0 skips the sanitizer
# builds (a quick local run); CI always runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
SANITIZERS=${SANITIZERS:-1}
JOBS=$(nproc)
./scripts/setup.sh --deps-only
# The LibTorch 2.6 CUDA headers of the compile tier, first: an archive that cannot be reached fails the command
# now, not after the tiers (nothing is downloaded when they are already unpacked).
./scripts/torch_cuda_compile_check.sh --fetch-only

elapsed() { echo "test.sh: $1 done after $((SECONDS / 60)) min $((SECONDS % 60)) s"; }

# The LibTorch-free unit tests are compiled and run once, instrumented, in the sanitizer builds below; the
# main build leaves them out unless those builds are skipped (ZEROFIT_PLAIN_TORCH_FREE_UNIT_TESTS, cmake/
# ZerofitSanitize.cmake).
plain_unit_tests=OFF
[[ "$SANITIZERS" != 0 ]] || plain_unit_tests=ON
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DZEROFIT_PLAIN_TORCH_FREE_UNIT_TESTS="$plain_unit_tests" >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
elapsed "main build"
# Every tier runs even when an earlier one fails (a sanitizer finding is worth seeing next to a failing e2e
# test); the command fails if any did. Builds that fail stop the command (set -e; the sanitizer builds' once
# the test tiers have ended).
failed=()
# The checks that read sources rather than run code gain nothing from instrumentation.
not_instrumented='^(format_check|layering_test|sanitizer_counts_test|torch_include_boundary_test|torch_pb_separation_test)$'
# Both compile the CUDA device and kernels against the host emulation of CUDA (cmake/ZerofitCudaEmulation.cmake):
# the CUDA conformance suite, the fused kernels and the emulation's own tests run there as unit tests.
sanitizer_flags=(-G Ninja -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O0 -g1" -DZEROFIT_CUDA_EMULATION=ON)
# The gRPC-free threaded tests: Debian's gRPC and abseil are not instrumented and absl::Mutex is invisible
# to TSan, so the service and client tests drown in reports from gRPC's own handoffs (tests/sanitizers/
# tsan.supp says more); they run under ASan+UBSan.
# device_gpu_test and the *emulated* tests: the CUDA device, its kernels and the engine on it, on the emulated GPU
# there (CUDA threads and streams are host threads, so TSan sees their shared memory, barriers and handoffs).
tsan_tests=(core_unit_test ordered_line_map_test device_unit_test coordinator_unit_test offload_unit_test
  device_gpu_test cuda_emulation_test kernels_emulated_cuda_test zero2_emulated_cuda_test)
sanitizer_builds() {
  cmake -S . -B "$BUILD_DIR-asan" "${sanitizer_flags[@]}" -DZEROFIT_SANITIZE=address,undefined >/dev/null
  nice -n 19 cmake --build "$BUILD_DIR-asan" -j "$JOBS"
  cmake -S . -B "$BUILD_DIR-tsan" "${sanitizer_flags[@]}" -DZEROFIT_SANITIZE=thread >/dev/null
  nice -n 19 cmake --build "$BUILD_DIR-tsan" -j "$JOBS" --target "${tsan_tests[@]}" sanitizer_canary
}
# The sanitizer builds (a cold machine's longest compile) start now, at the lowest CPU priority, and compile
# in the time the test tiers leave idle (their e2e and slurm tests wait on processes and on Slurm); next to a
# busy nice-0 process a nice-19 one gets about 1.5% of a core (CFS weights 15 and 1024), so the tests keep
# their timing. Once the tiers end, the builds have the machine.
if [[ "$SANITIZERS" != 0 ]]; then
  sanitizer_log="$BUILD_DIR/sanitizer-builds.log"
  (set -e; sanitizer_builds) > "$sanitizer_log" 2>&1 &
  sanitizer_build=$!
fi
# The torch 2.x CUDA compile tier the same way (about 2.6 CPU-minutes cold, BENCHMARKS.md "The torch 2.x
# CUDA compile tier"); its result is read at the end.
torch_cuda_log="$BUILD_DIR/torch-cuda-compile.log"
nice -n 19 ./scripts/torch_cuda_compile_check.sh "$BUILD_DIR-torch-cuda" > "$torch_cuda_log" 2>&1 &
torch_cuda_check=$!
# The slurm tier runs beside the others, not after them: its two tests spend most of their time waiting on
# Slurm (scheduling passes, a dead node noticed after SlurmdTimeout, a requeued job's start) while the
# training they run is tiny (BENCHMARKS.md "The test command's time": a fraction of one core), and each
# runs a cluster of its own (own directory, ports and namespaces), so they run at the same time too. Its
# output is printed when it ends.
slurm_log="$BUILD_DIR/slurm-tier.log"
(cd "$BUILD_DIR" && ctest --output-on-failure --timeout 900 -j 2 -L slurm "$@") > "$slurm_log" 2>&1 &
slurm_tier=$!
# -j: tests declare the cores they use (PROCESSORS: MPI ranks, the e2e tests' workers), so ctest never runs
# more ranks at once than the machine has cores; the longest start first (COST), so that short ones fill in.
(cd "$BUILD_DIR" && ctest --output-on-failure --timeout 900 -j "$JOBS" -L 'unit|mpi|e2e' "$@") ||
  failed+=("main tiers")
elapsed "unit, mpi and e2e tiers"
slurm_ok=1
wait "$slurm_tier" || slurm_ok=0
cat "$slurm_log"
((slurm_ok)) || failed+=("slurm tier")
elapsed "slurm tier"

if [[ "$SANITIZERS" != 0 ]]; then
  if ! wait "$sanitizer_build"; then
    tail -n 60 "$sanitizer_log"
    echo "test.sh: FAILED: the sanitizer builds (the whole log: $sanitizer_log)"
    exit 1
  fi
  elapsed "sanitizer builds"
  (cd "$BUILD_DIR-asan" && ctest --output-on-failure --timeout 300 -j "$JOBS" -L unit -E "$not_instrumented") ||
    failed+=("ASan+UBSan")
  elapsed "ASan+UBSan"

  tsan_regex="^($(IFS='|'; echo "${tsan_tests[*]}")|sanitizer_canary_.*)\$"
  (cd "$BUILD_DIR-tsan" && ctest --output-on-failure --timeout 300 -j "$JOBS" -R "$tsan_regex") || failed+=("TSan")
  elapsed "TSan"
fi

if wait "$torch_cuda_check"; then
  tail -n 1 "$torch_cuda_log"
else
  tail -n 60 "$torch_cuda_log"
  echo "test.sh: the torch 2.x CUDA compile tier failed (the whole log: $torch_cuda_log)"
  failed+=("torch 2.x CUDA compile")
fi
elapsed "torch 2.x CUDA compile tier"

if ((${#failed[@]})); then
  echo "test.sh: FAILED: ${failed[*]}"
  exit 1
fi
echo "test.sh: all tiers passed"
