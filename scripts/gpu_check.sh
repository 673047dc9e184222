#!/usr/bin/env bash
# Builds zerofit on a GPU machine with no package registry and runs its GPU checks. The machine brings
# Python 3 with pip's torch (CUDA build) and the nvidia-nccl-cu13 wheel, nvcc, cmake and ninja; everything
# else comes from the .deb files scripts/fetch_gpu_debs.sh downloaded into third_party/gpu-debs/, unpacked
# with `dpkg -x` into a prefix inside the build folder (never into /). Steps:
#   1. unpack the debs (once per manifest) and write wrappers for protoc, grpc_cpp_plugin, mpicxx, mpiexec,
#      pkg-config (they find the prefix's libraries through LD_LIBRARY_PATH; nothing else sees it)
#   2. find torch's CMake prefix (or take --torch-prefix) and NCCL's include/ and lib/ inside the
#      nvidia-nccl-cu13 package
#   3. configure (torch's C++ standard chosen by worker/torch; the prefix's library folders on the link
#      search path), build, `ctest -L gpu`
#   4. the acceptance run (scripts/gpu_acceptance.sh): compute-sanitizer, reward and DPO on cuda:0 next to the
#      CPU, zerofit run and zerofit submit + serve with and without offload, device peaks against the plan
#   or, with --bench, instead of 3's gpu tier and 4: the benchmark against Hugging Face transformers
#      (scripts/gpu_bench.sh, issue 30), its table in gpu-logs/bench.md
# Logs go to <build>/gpu-logs; with $OUT set (the device tool), summary.md, bench.md, gpu_check.log and
# gpu-logs.tar.gz are copied there at the end.
#   scripts/gpu_check.sh [--build-dir DIR] [--debs DIR] [--jobs N] [--dry-run] [--no-torch] [--skip-job]
#                        [--torch-prefix DIR] [--build-only] [--targets "T ..."] [--bench] [--bench-args "..."]
#     --dry-run       steps 1-2 and the configure only (works without a GPU, torch or NCCL: proves the recipe)
#     --no-torch      configure without LibTorch (the gpu tier needs none of it; no job)
#     --torch-prefix  LibTorch's CMake prefix (a folder holding Torch/TorchConfig.cmake or one above it)
#                     instead of asking python3's torch; also TORCH_CMAKE_PREFIX=DIR
#     --build-only    stop after the build (no ctest, no job: scripts/gpu_clean_root_build.sh)
#     --targets       build only these targets (default: all; with --bench: zerofit_train_prefs)
#     --bench         build, then only the benchmark (no gpu tier, no acceptance run: with the build they fill
#                     one device call; run gpu_check.sh without --bench for those); --bench-args passes
#                     options to scripts/gpu_bench.sh, split at spaces ("--only zf-* --steps 5"); the
#                     benchmark runs under BENCH_DEADLINE seconds (420: with the build, inside the device
#                     tool's 10 minutes a call)
#   The gpu tier runs under a 300 s deadline, the acceptance run under ACCEPTANCE_DEADLINE seconds (600);
#   a failing tier does not stop the acceptance run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

BUILD=build-gpu
DEBS=third_party/gpu-debs
JOBS=$(nproc)
DRY_RUN=0
WITH_TORCH=1
RUN_JOB=1
BUILD_ONLY=0
TARGETS=()
RUN_BENCH=0
BENCH_ARGS=()
TORCH_PREFIX=${TORCH_CMAKE_PREFIX:-}
while (($#)); do
  case "$1" in
    --build-dir) BUILD=$2; shift 2 ;;
    --debs) DEBS=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --dry-run) DRY_RUN=1; shift ;;
    --no-torch) WITH_TORCH=0; RUN_JOB=0; shift ;;
    --skip-job) RUN_JOB=0; shift ;;
    --torch-prefix) TORCH_PREFIX=$2; shift 2 ;;
    --build-only) BUILD_ONLY=1; RUN_JOB=0; shift ;;
    --targets) read -ra TARGETS <<<"$2"; shift 2 ;;
    --bench) RUN_BENCH=1; RUN_JOB=0; shift ;;
    --bench-args) read -ra BENCH_ARGS <<<"$2"; shift 2 ;;
    -h | --help) sed -n '2,32p' "$0"; exit 0 ;;
    *) echo "gpu_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd)
LOGS=$BUILD/gpu-logs  # $OUT (when set) gets the summary and one tarball of these at the end
mkdir -p "$LOGS"
LOGS=$(cd "$LOGS" && pwd)
PREFIX=$BUILD/gpu-prefix
step() { echo "== gpu_check: $*" | tee -a "$LOGS/gpu_check.log"; }
# What comes back from a lent machine, however the run ends: the summary, this script's log and one tarball
# of every log (the device tool returns at most 8 files).
deliver() {
  [[ -n "${OUT:-}" && -d "${OUT:-}" ]] || return 0
  cp "$LOGS/gpu_check.log" "$OUT/" 2>/dev/null || true
  [[ -f "$LOGS/summary.md" ]] && cp "$LOGS/summary.md" "$OUT/"
  [[ -f "$LOGS/bench.md" ]] && cp "$LOGS/bench.md" "$OUT/"
  tar -C "$LOGS" -czf "$OUT/gpu-logs.tar.gz" . 2>/dev/null || true
}
trap deliver EXIT
die() { echo "gpu_check: error: $*" | tee -a "$LOGS/gpu_check.log" >&2; exit 1; }
# Runs a command with its output in $LOGS/<name>.log (and the tail on the terminal if it fails).
logged() {
  local name=$1; shift
  if ! "$@" >"$LOGS/$name.log" 2>&1; then
    tail -n 40 "$LOGS/$name.log" >&2
    die "$name failed (full log: $LOGS/$name.log)"
  fi
}

# --- 1. the packages ------------------------------------------------------------------------------------
MANIFEST=$DEBS/MANIFEST.tsv
[[ -f "$MANIFEST" ]] || die "$MANIFEST not found: run scripts/fetch_gpu_debs.sh on a Debian 12 machine with apt, then copy third_party/gpu-debs/ here"
STAMP=$PREFIX/.manifest.sha256
want=$(sha256sum "$MANIFEST" | cut -d' ' -f1)
if [[ ! -f "$STAMP" || "$(cat "$STAMP")" != "$want" ]]; then
  step "unpacking $(grep -vc '^#' "$MANIFEST") packages from $DEBS into $PREFIX"
  rm -rf "$PREFIX"
  mkdir -p "$PREFIX"
  while IFS=$'\t' read -r pkg _ver _arch file sha; do
    [[ "$pkg" == \#* || -z "$pkg" ]] && continue
    deb=$DEBS/$file
    [[ -f "$deb" ]] || die "$deb (listed in the manifest) is missing"
    [[ "$(sha256sum "$deb" | cut -d' ' -f1)" == "$sha" ]] || die "$deb does not match its sha256 in the manifest"
    if command -v dpkg >/dev/null; then
      dpkg -x "$deb" "$PREFIX"
    else  # no dpkg: a .deb is an ar archive holding data.tar.*
      tmp=$(mktemp -d)
      (cd "$tmp" && ar x "$ROOT/$deb" && tar -xf data.tar.* -C "$PREFIX")
      rm -rf "$tmp"
    fi
  done <"$MANIFEST"
  echo "$want" >"$STAMP"
else
  step "packages already unpacked in $PREFIX"
fi

ARCH_DIR=$(ls -d "$PREFIX"/usr/lib/*-linux-gnu 2>/dev/null | head -n 1)
[[ -n "$ARCH_DIR" ]] || die "no $PREFIX/usr/lib/<arch>-linux-gnu after unpacking"
LIBS="$ARCH_DIR:$ARCH_DIR/openmpi/lib"
# Debian 12 packages still put some libraries in /lib/<arch> (libnl-3, which Open MPI's libibverbs needs,
# zlib, liblzma, ...): a folder of the search paths too.
if [[ -d "$PREFIX/lib/$(basename "$ARCH_DIR")" ]]; then LIBS="$LIBS:$PREFIX/lib/$(basename "$ARCH_DIR")"; fi
# Debian makes the generic Open MPI names (mpicxx, mpiexec, libmpi.so, the include dir) with
# update-alternatives, which dpkg -x does not run: wrappers and links stand in for them. OPAL_PREFIX makes
# the relocated Open MPI find its own files.
BIN=$PREFIX/bin
mkdir -p "$BIN"
wrap() {  # wrap <name> <real program under $PREFIX/usr/bin> [VAR=value ...: more of its environment]
  local name=$1 prog=$2 env
  shift 2
  [[ -x "$PREFIX/usr/bin/$prog" ]] || die "$PREFIX/usr/bin/$prog not unpacked (is its package in the manifest?)"
  {
    echo '#!/bin/sh'
    echo "export LD_LIBRARY_PATH=\"$LIBS\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\""
    echo "export OPAL_PREFIX=\"$PREFIX/usr\""
    for env in "$@"; do echo "export ${env%%=*}=\"${env#*=}\""; done
    echo "exec \"$PREFIX/usr/bin/$prog\" \"\$@\""
  } >"$BIN/$name"
  chmod +x "$BIN/$name"
}
wrap protoc protoc
wrap grpc_cpp_plugin grpc_cpp_plugin
wrap mpicxx mpicxx.openmpi
wrap mpiexec mpiexec.openmpi
# pkg-config (text/'s PCRE2, gRPC's re2 and c-ares) reads only the prefix's .pc files, and the sysroot puts the
# prefix in front of the /usr paths they hold; no folder is dropped as a "system" one, since these packages
# are not in the system's /usr. (CMake's FindPkgConfig adds CMAKE_PREFIX_PATH's pkgconfig folders through
# PKG_CONFIG_PATH: the same files, and a given torch prefix's.)
wrap pkg-config pkgconf PKG_CONFIG_LIBDIR="$ARCH_DIR/pkgconfig:$PREFIX/usr/share/pkgconfig" \
  PKG_CONFIG_SYSROOT_DIR="$PREFIX" PKG_CONFIG_SYSTEM_INCLUDE_PATH=/nonexistent \
  PKG_CONFIG_SYSTEM_LIBRARY_PATH=/nonexistent
ln -sfn openmpi/lib/libmpi.so "$ARCH_DIR/libmpi.so"
ln -sfn openmpi/lib/libmpi_cxx.so "$ARCH_DIR/libmpi_cxx.so"
# Absolute symlinks in the packages point into / (where nothing is installed): make them prefix-relative.
while IFS= read -r link; do
  target=$(readlink "$link")
  [[ "$target" == /* && -e "$PREFIX$target" ]] && ln -sfn "$PREFIX$target" "$link"
done < <(find "$PREFIX/usr" -type l)
"$BIN/protoc" --version >/dev/null || die "the unpacked protoc does not run (see above)"

# --- 2. torch and NCCL from pip -------------------------------------------------------------------------
PY=${PYTHON:-python3}
PREFIX_PATH="$PREFIX/usr"
CMAKE_ARGS=()
if ((WITH_TORCH)) && [[ -n "$TORCH_PREFIX" ]]; then
  [[ -d "$TORCH_PREFIX" ]] || die "--torch-prefix $TORCH_PREFIX is not a folder"
  TORCH_PREFIX=$(cd "$TORCH_PREFIX" && pwd)
  step "LibTorch CMake prefix given: $TORCH_PREFIX"
  PREFIX_PATH="$PREFIX_PATH;$TORCH_PREFIX"
elif ((WITH_TORCH)); then
  if TORCH_PREFIX=$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>"$LOGS/torch_import.log"); then
    TORCH_VERSION=$("$PY" -c 'import torch; print(torch.__version__, torch.version.cuda)')
    step "torch $TORCH_VERSION, CMake prefix $TORCH_PREFIX"
    PREFIX_PATH="$PREFIX_PATH;$TORCH_PREFIX"
  elif ((DRY_RUN)); then
    step "no importable torch (dry run): configuring without LibTorch"
    WITH_TORCH=0
  else
    die "python3 cannot import torch ($(tail -n 1 "$LOGS/torch_import.log")): install pip's torch, or pass --no-torch"
  fi
fi
if ((WITH_TORCH)); then CMAKE_ARGS+=(-DZEROFIT_WITH_TORCH=ON); else CMAKE_ARGS+=(-DZEROFIT_WITH_TORCH=OFF); fi
if NCCL_DIR=$("$PY" -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null); then
  NCCL_LIB=$(ls "$NCCL_DIR"/lib/libnccl.so* 2>/dev/null | head -n 1)
  [[ -f "$NCCL_DIR/include/nccl.h" && -n "$NCCL_LIB" ]] || die "nvidia-nccl package at $NCCL_DIR has no include/nccl.h or lib/libnccl.so*"
  step "NCCL from pip: $NCCL_LIB"
  CMAKE_ARGS+=(-DZEROFIT_NCCL_INCLUDE_DIR="$NCCL_DIR/include" -DZEROFIT_NCCL_LIBRARY="$NCCL_LIB")
  LIBS="$LIBS:$NCCL_DIR/lib"
else
  step "no nvidia-nccl pip package: NCCL only if CMake finds it next to CUDA"
fi
if [[ -z "${CUDACXX:-}" ]] && ! command -v nvcc >/dev/null; then
  for d in /usr/local/cuda/bin /usr/local/cuda-13*/bin; do [[ -x "$d/nvcc" ]] && export PATH="$d:$PATH" && break; done
fi
command -v nvcc >/dev/null || step "warning: nvcc not found: the CUDA device will not be built"
# The environment the built programs run in, for a person (or scripts/gpu_clean_root_build.sh) to source.
cat >"$BUILD/gpu-env.sh" <<ENV
# Written by scripts/gpu_check.sh: the environment zerofit's programs of this build run in.
export LD_LIBRARY_PATH="$LIBS\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export OPAL_PREFIX="$PREFIX/usr"
export PATH="$BIN:\$PATH"
ENV

# --- 3. configure, build, the gpu tier --------------------------------------------------------------------
# The prefix's library folders are on the link search path (-L): some dependencies reach the link line as a
# bare -l<name> (gRPC's re2 comes through pkg-config as -lre2 alone: re2.pc's libdir is a system folder),
# and the linker finds those only there. -rpath-link lets it follow the libraries' own dependencies. The build
# RPATH is a DT_RPATH (--disable-new-dtags), which the loader uses for the libraries' dependencies too
# (libgrpc's libupb, ...; a DT_RUNPATH serves only the program's own), so the CLI runs without
# LD_LIBRARY_PATH; Open MPI's libraries carry a RUNPATH into /usr of their own, so MPI programs need
# $BUILD/gpu-env.sh's LD_LIBRARY_PATH (the steps below export the same).
LINK_FLAGS="-Wl,--disable-new-dtags -L${LIBS//:/ -L} -Wl,-rpath-link,${LIBS//:/ -Wl,-rpath-link,}"
step "configuring $BUILD"
logged configure cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_PREFIX_PATH="$PREFIX_PATH" \
  -DProtobuf_PROTOC_EXECUTABLE="$BIN/protoc" -DZEROFIT_GRPC_CPP_PLUGIN="$BIN/grpc_cpp_plugin" \
  -DMPI_CXX_COMPILER="$BIN/mpicxx" -DMPIEXEC_EXECUTABLE="$BIN/mpiexec" \
  -DPKG_CONFIG_EXECUTABLE="$BIN/pkg-config" \
  -DCMAKE_EXE_LINKER_FLAGS="$LINK_FLAGS" -DCMAKE_SHARED_LINKER_FLAGS="$LINK_FLAGS" \
  -DCMAKE_BUILD_RPATH="${LIBS//:/;}" \
  "${CMAKE_ARGS[@]}"
grep -E "^(absl_DIR|gRPC_DIR|Protobuf_INCLUDE_DIR|yaml-cpp_DIR|nlohmann_json_DIR|CLI11_DIR|GTest_DIR|MPI_CXX_COMPILER|Torch_DIR|ZEROFIT_NCCL_LIBRARY|CMAKE_CUDA_COMPILER|SQLite3_LIBRARY|ZEROFIT_SENTENCEPIECE_LIBRARY|ICU_UC_LIBRARY_RELEASE|PKG_CONFIG_EXECUTABLE|Protobuf_LIBRARY_RELEASE):" \
  "$BUILD/CMakeCache.txt" | tee -a "$LOGS/gpu_check.log"
grep -E "zerofit: (CUDA|NCCL)" "$LOGS/configure.log" | tee -a "$LOGS/gpu_check.log" || true
if ((DRY_RUN)); then
  step "dry run: configured OK (logs in $LOGS)"
  exit 0
fi
grep -q "ZEROFIT_HAVE_CUDA_DEVICE" "$BUILD/build.ninja" || die "the CUDA device was not configured (no nvcc / CUDA toolkit?): see $LOGS/configure.log"
if command -v nvidia-smi >/dev/null; then nvidia-smi >"$LOGS/nvidia-smi.log" 2>&1 || true; fi

((RUN_BENCH && ${#TARGETS[@]} == 0)) && TARGETS=(zerofit_train_prefs)  # all the benchmark runs
step "building ${TARGETS[*]:-all targets} with $JOBS jobs"
logged build cmake --build "$BUILD" -j "$JOBS" ${TARGETS[@]:+--target "${TARGETS[@]}"}
if ((BUILD_ONLY)); then
  step "build only: built OK (logs in $LOGS)"
  exit 0
fi

# --bench: the benchmark alone, under its deadline (scripts/gpu_bench.sh rewrites the table after every run, so
# a deadline that passes still leaves the rows done so far). It runs before the prefix's libraries are
# exported: its zerofit runs source gpu-env.sh, its transformers runs keep python3's own environment.
if ((RUN_BENCH)); then
  # What the machine's torch 2.x keeps for backward in one eager layer, against the planner's 2.x terms
  # (docs/planning.md, "The GPU workers' build"): a second of CPU.
  step "autograd's saved bytes per token of one layer (scripts/layer_saved_bytes.py)"
  timeout 60 python3 scripts/layer_saved_bytes.py 2>&1 | tail -n 1 | tee -a "$LOGS/gpu_check.log" || true
  step "benchmark (scripts/gpu_bench.sh ${BENCH_ARGS[*]}): table in $LOGS/bench.md"
  bench_rc=0
  timeout -k 10 "${BENCH_DEADLINE:-420}" scripts/gpu_bench.sh --build-dir "$BUILD" --logs "$LOGS" \
    ${BENCH_ARGS[@]+"${BENCH_ARGS[@]}"} 2>&1 | tee "$LOGS/bench.log" || bench_rc=$?
  ((bench_rc == 0)) || die "the benchmark ended with exit $bench_rc (see $LOGS/bench.log; rows so far in $LOGS/bench.md)"
  step "OK: benchmark table in $LOGS/bench.md (logs in $LOGS)"
  exit 0
fi

# The gpu tier and the acceptance run each under a deadline; a failing tier does not stop the acceptance run
# (each reports what it saw; the script fails at the end if either failed).
step "ctest -L gpu"
export LD_LIBRARY_PATH="$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" OPAL_PREFIX="$PREFIX/usr"
export PATH="$BIN:$PATH"
ctest_rc=0
(cd "$BUILD" && timeout -k 10 300 ctest -L gpu --output-on-failure --no-tests=error) 2>&1 |
  tee "$LOGS/ctest_gpu.log" || ctest_rc=$?
timeout 120 "$BUILD/tests/device_gpu_test" --gtest_brief=0 >"$LOGS/device_gpu_test.log" 2>&1 || true
if grep -q "SKIPPED" "$LOGS/device_gpu_test.log"; then step "warning: GPU tests SKIPPED: no GPU visible to this process?"; fi
((ctest_rc == 0)) || step "ctest -L gpu FAILED (exit $ctest_rc; see $LOGS/ctest_gpu.log)"

# --- 4. the acceptance run: GPU next to CPU, the coordinator paths, peaks against the plan, sanitizers -------
acceptance_rc=0
if ((RUN_JOB)); then
  step "acceptance run (scripts/gpu_acceptance.sh): summary in $LOGS/summary.md"
  timeout -k 10 "${ACCEPTANCE_DEADLINE:-600}" scripts/gpu_acceptance.sh --build-dir "$BUILD" --logs "$LOGS" 2>&1 |
    tee "$LOGS/acceptance.log" || acceptance_rc=$?
fi
((ctest_rc == 0)) || die "ctest -L gpu failed (see $LOGS/ctest_gpu.log)"
((acceptance_rc == 0)) || die "the acceptance run failed (see $LOGS/summary.md)"
step "OK (logs in $LOGS)"
