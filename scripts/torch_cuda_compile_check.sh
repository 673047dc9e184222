#!/usr/bin/env bash
# The torch 2.x CUDA compile tier (issue 28): compiles every .cc under worker/torch as a CUDA build of zerofit
# would (ZEROFIT_TORCH_CUDA, the CUDA device, NCCL) against Debian 13's CUDA build of LibTorch 2.6 and the
# CUDA toolkit under /usr/local/cuda. Compile only: nothing links or runs, so neither LibTorch's libraries nor
# a GPU are needed. scripts/test.sh runs it on every run, beside the test tiers.
#   scripts/torch_cuda_compile_check.sh [BUILD_DIR]      default: ${BUILD_DIR:-build}-torch-cuda
#   --fetch-only    only make sure the headers are there (scripts/fetch_torch_cuda_headers.sh)
# Steps: fetch the headers (nothing when already unpacked; fails loudly when Debian's archive cannot be
# reached), configure BUILD_DIR with ZEROFIT_TORCH_CUDA_COMPILE_CHECK (worker/torch/cuda_compile_check.cmake),
# build the object target zerofit_worker_torch_cuda_compile, then check from the compiler's dependency lists
# that no LibTorch header of Debian 12's 1.13 in /usr/include took the place of a 2.6 header.
set -euo pipefail
cd "$(dirname "$0")/.."

FETCH_ONLY=0
OUT=${BUILD_DIR:-build}-torch-cuda
while (($#)); do
  case "$1" in
    --fetch-only) FETCH_ONLY=1; shift ;;
    -h | --help) sed -n '2,11p' "$0"; exit 0 ;;
    -*) echo "torch_cuda_compile_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    *) OUT=$1; shift ;;
  esac
done

include=$(scripts/fetch_torch_cuda_headers.sh)
include=$(realpath "$include")
((FETCH_ONLY)) && exit 0

target=zerofit_worker_torch_cuda_compile
# Tests and benchmarks off: the target needs the worker's libraries' headers (and the generated protobuf
# headers that worker_main.cc reaches), nothing else.
cmake -S . -B "$OUT" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZEROFIT_BUILD_TESTS=OFF \
  -DZEROFIT_BUILD_BENCHMARKS=OFF "-DZEROFIT_TORCH_CUDA_COMPILE_CHECK=$include" >/dev/null
cmake --build "$OUT" -j "$(nproc)" --target "$target"

# /usr/include is on every compiler's search path after the -isystem folders: a header that the 2.6 tree
# lacks would silently come from Debian 12's LibTorch 1.13 there. The compiler's dependency lists (ninja's
# deps log) name every header each object read.
mixed=$(ninja -C "$OUT" -t deps | awk -v t="$target.dir/" '
  /^[^ \t]/ { inside = index($1, t) > 0; next }
  inside && $1 ~ /^\/usr\/include\/(torch|ATen|c10|caffe2|THC|kineto)\// { print $1 }' | sort -u)
if [[ -n "$mixed" ]]; then
  echo "torch_cuda_compile_check: FAILED: headers of the system's LibTorch were read instead of $include:" >&2
  echo "$mixed" >&2
  exit 1
fi
objects=$(ninja -C "$OUT" -t deps | grep -c "$target.dir/.*\.o: #deps" || true)
echo "torch_cuda_compile_check: worker/torch compiles against LibTorch $(sed -n 's/^#define TORCH_VERSION_\(MAJOR\|MINOR\) //p' \
  "$include/torch/csrc/api/include/torch/version.h" | paste -sd.) with CUDA ($objects objects, $OUT)"
