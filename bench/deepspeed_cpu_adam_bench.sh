#!/usr/bin/env bash
# zerofit's fused CPU AdamW vs DeepSpeed's cpu_adam, same tensors and threads (see
# bench/deepspeed_cpu_adam/main.cc for what each side does).
#
#   bench/deepspeed_cpu_adam_bench.sh DEEPSPEED_SRC [bench flags: --sizes 16777216,67108864 --threads 1,2 --reps 7]
#
# DEEPSPEED_SRC is a DeepSpeed source copy (a checkout of github.com/deepspeedai/DeepSpeed, or just its csrc/);
# it is only read. The bench is built in ${BUILD_DIR:-build-deepspeed} (git-ignored) with a minimal
# configuration (no LibTorch, MPI, gRPC, CUDA or tests) and only its own target.
set -euo pipefail
if [[ $# -lt 1 || ! -f "$1/csrc/includes/cpu_adam.h" ]]; then
  echo "usage: $0 DEEPSPEED_SRC [bench flags]  (DEEPSPEED_SRC/csrc/includes/cpu_adam.h must exist)" >&2
  exit 2
fi
ds_src=$(cd "$1" && pwd)
shift
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-deepspeed}
# DeepSpeed's op builder picks its SIMD define from the CPU flags the same way.
if grep -qw avx512f /proc/cpuinfo; then simd=__AVX512__; elif grep -qw avx2 /proc/cpuinfo; then simd=__AVX256__; else
  echo "this CPU has neither AVX-512 nor AVX2: DeepSpeed's cpu_adam would run its scalar loop" >&2
  exit 2
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZEROFIT_WITH_TORCH=OFF \
  -DZEROFIT_WITH_MPI=OFF -DZEROFIT_WITH_GRPC=OFF -DZEROFIT_WITH_CUDA=OFF -DZEROFIT_WITH_NCCL=OFF \
  -DZEROFIT_BUILD_TESTS=OFF -DZEROFIT_BUILD_BENCHMARKS=ON -DZEROFIT_DEEPSPEED_SRC="$ds_src" \
  -DZEROFIT_DEEPSPEED_SIMD=$simd >/dev/null
cmake --build "$build" -j2 --target deepspeed_cpu_adam_bench >/dev/null
if git -C "$ds_src" rev-parse HEAD >/dev/null 2>&1; then
  echo "DeepSpeed source: $ds_src (commit $(git -C "$ds_src" rev-parse HEAD))"
elif [[ -f "$ds_src/COMMIT" ]]; then
  echo "DeepSpeed source: $ds_src (commit $(cat "$ds_src/COMMIT"))"
else
  echo "DeepSpeed source: $ds_src (commit unknown)"
fi
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
exec "$build/bench/deepspeed_cpu_adam_bench" "$@"
