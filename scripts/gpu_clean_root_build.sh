#!/usr/bin/env bash
# Proves the GPU recipe (scripts/fetch_gpu_debs.sh + scripts/gpu_check.sh) on a machine without a GPU: builds
# every target gpu_check.sh needs (the CLI `zerofit`, zerofit_worker, zerofit_train_prefs, the example data
# generator and every test of the `gpu` label) against the unpacked packages ALONE, inside a minimal Debian 12
# root where none of this system's -dev packages are visible. Manual (too long for scripts/test.sh); run as
# root on Debian 12 with network access to the Debian archive. See docs/gpu.md.
#
# The root (mmdebstrap, variant minbase) holds only g++, cmake, ninja, python3, ccache and what dpkg needs;
# the repository (same path), the CUDA toolkit (read-only; NCCL is inside it) and /dev, /proc are mounted
# into it in a private mount namespace, unmounted on every exit path. LibTorch: Debian 12's libtorch-dev and
# its closure, downloaded as .debs (fetch_gpu_debs.sh --roots libtorch-dev) and unpacked into a second
# prefix, stand in for pip's torch (gpu_check.sh --torch-prefix); its libraries (in /usr/lib/<arch>, some in
# /usr/lib and /lib/<arch>, BLAS/LAPACK in folders of their own, which Debian names with update-alternatives)
# reach the linker and the programs through LD_LIBRARY_PATH, as pip's torch finds its own through its RPATH.
# Cached under build-clean-root/ (git-ignored): the root, the stand-in's debs and prefix, the build folder and
# a compile cache, so a second run rebuilds only what changed.
#   scripts/gpu_clean_root_build.sh [--dir DIR] [--jobs N] [--cuda DIR] [--fresh-root] [--fresh-build]
#     --dir          cache folder inside the repository (default build-clean-root)
#     --cuda         the CUDA toolkit to mount (default /usr/local/cuda-13.0)
#     --fresh-root   make the root again;  --fresh-build: empty the build folder and the compile cache
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

DIR=build-clean-root
JOBS=2
CUDA=/usr/local/cuda-13.0
FRESH_ROOT=0
FRESH_BUILD=0
INSIDE=0
while (($#)); do
  case "$1" in
    --dir) DIR=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --cuda) CUDA=$2; shift 2 ;;
    --fresh-root) FRESH_ROOT=1; shift ;;
    --fresh-build) FRESH_BUILD=1; shift ;;
    --in-namespace) INSIDE=1; shift ;;  # internal: the second half, in the private mount namespace
    -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "gpu_clean_root_build: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
case "$DIR/" in "$REPO"/*) ;; *) echo "gpu_clean_root_build: --dir must be inside $REPO (it is mounted into the root with it)" >&2; exit 2 ;; esac
ROOTFS=$DIR/root
TORCH_DEBS=$DIR/torch-debs
TORCH_PREFIX=$DIR/torch-prefix
BUILD=$DIR/build
LOG=$DIR/clean_root_build.log
# The packages of the root: a compiler, CMake, Ninja, Python 3 (gpu_check.sh asks it for torch and NCCL when
# no prefix is given) and ccache (a compile cache for the second run, not a dependency of zerofit).
ROOT_PACKAGES=g++,cmake,ninja-build,python3,ccache
ARCH_LIBS=usr/lib/x86_64-linux-gnu
say() { echo "== gpu_clean_root_build: $*" | tee -a "$LOG"; }
die() { echo "gpu_clean_root_build: FAILED: $*" | tee -a "$LOG" >&2; exit 1; }
now() { date +%s; }
elapsed() { echo "$(($(now) - $1)) s"; }

# --- the second half: mounts, the build inside the root --------------------------------------------------------
if ((INSIDE)); then
  mounted=()
  cleanup() {  # reverse order; -l so that a busy mount (a killed compiler) still goes
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
  }
  trap cleanup EXIT
  trap 'exit 130' INT TERM
  bind() {  # bind <source> <target inside the root> [ro|rec]
    mkdir -p "$ROOTFS$2"
    if [[ "${3:-}" == rec ]]; then mount --rbind "$1" "$ROOTFS$2"; else mount --bind "$1" "$ROOTFS$2"; fi
    mounted+=("$ROOTFS$2")
    if [[ "${3:-}" == ro ]]; then mount -o remount,bind,ro "$ROOTFS$2"; fi
  }
  bind "$REPO" "$REPO"
  bind "$CUDA" "$CUDA" ro
  mount -t proc proc "$ROOTFS/proc"
  mounted+=("$ROOTFS/proc")
  bind /dev /dev rec
  # The stand-in's library folders: /usr/lib/<arch>, /usr/lib, /lib/<arch>, and those of the BLAS and LAPACK
  # it depends on (Debian puts them in folders of their own and links them into /usr/lib/<arch> with
  # update-alternatives, which dpkg -x does not run).
  TORCH_LIBS="$TORCH_PREFIX/$ARCH_LIBS:$TORCH_PREFIX/usr/lib:$TORCH_PREFIX/lib/x86_64-linux-gnu"
  for lib in libblas.so.3 liblapack.so.3; do
    found=$(find "$TORCH_PREFIX/$ARCH_LIBS" -name "$lib" -printf '%h\n' | head -n 1)
    [[ -n "$found" ]] || die "no $lib in the LibTorch stand-in"
    TORCH_LIBS+=":$found"
  done
  in_root() {  # a clean environment: nothing of this shell's PATH, LD_LIBRARY_PATH or compiler settings
    chroot "$ROOTFS" /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
      PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
      CCACHE_DIR="$DIR/ccache" CCACHE_BASEDIR="$REPO" \
      LD_LIBRARY_PATH="$TORCH_LIBS" \
      "$@"
  }

  # What the root must NOT have: the headers of any dependency gpu_check.sh unpacks (this machine has them
  # all in /usr/include; the root sees only its own /usr).
  for h in grpcpp google/protobuf absl mpi.h openmpi sqlite3.h yaml-cpp nlohmann CLI gtest benchmark unicode \
    pcre2.h re2 sentencepiece_processor.h torch ATen spdlog; do
    in_root test ! -e "/usr/include/$h" || die "the root has /usr/include/$h: it is not clean"
  done
  installed=$(in_root dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' | awk '$1 == "ii" {print $2}')
  say "root: $(wc -l <<<"$installed") packages, the -dev ones: $(grep -- '-dev$' <<<"$installed" | tr '\n' ' ')"
  say "root: $(in_root g++ --version | head -n 1), $(in_root cmake --version | head -n 1), $(in_root ninja --version)"

  gpu_check=(nice -n 10 "$REPO/scripts/gpu_check.sh" --build-dir "$BUILD" --torch-prefix "$TORCH_PREFIX/usr"
    --jobs "$JOBS")
  t=$(now)
  say "configure inside the root (gpu_check.sh --dry-run; logs in $BUILD/gpu-logs)"
  in_root "${gpu_check[@]}" --dry-run >>"$LOG" 2>&1 || die "gpu_check.sh --dry-run inside the root (see $LOG, $BUILD/gpu-logs/configure.log)"
  grep -q "ZEROFIT_HAVE_CUDA_DEVICE" "$BUILD/build.ninja" || die "the CUDA device was not configured (see $BUILD/gpu-logs/configure.log)"
  grep -q "zerofit: NCCL .* found" "$BUILD/gpu-logs/configure.log" || die "NCCL was not found in $CUDA"
  # Every target gpu_check.sh builds or runs after the build: the programs of its jobs and every test of the
  # gpu label (their commands' programs, from ctest; a program that is no target of this build is an error).
  targets=(zerofit zerofit_worker zerofit_train_prefs zerofit_make_arith_prefs)
  # ctest names the gpu tests; their add_test lines in the CTestTestfile.cmake files name the programs (the
  # first argument, or a later one: an mpiexec line), every one under the build folder that is a target.
  in_root sh -c "cd '$BUILD' && ctest -L gpu --show-only=json-v1" >"$BUILD/gpu-logs/gpu_tests.json" ||
    die "ctest -L gpu --show-only inside the root"
  mapfile -t gpu_programs < <(python3 - "$BUILD" "$BUILD/gpu-logs/gpu_tests.json" <<'PY'
import json, pathlib, re, sys
build = sys.argv[1]
names = {t["name"] for t in json.load(open(sys.argv[2]))["tests"]}
for testfile in pathlib.Path(build).rglob("CTestTestfile.cmake"):
    for m in re.finditer(r'^add_test\(\[=\[(.+?)\]=\] (.*)\)$', testfile.read_text(), re.M):
        if m.group(1) in names:
            for arg in re.findall(r'"([^"]*)"', m.group(2)):
                if arg.startswith(build + "/"):
                    print(m.group(1), arg)
PY
)
  ((${#gpu_programs[@]})) || die "no test has the label gpu"
  for line in "${gpu_programs[@]}"; do
    target=$(basename "${line#* }")
    grep -q "^build $target: phony" "$BUILD/build.ninja" || die "the gpu test ${line%% *} runs ${line#* }: no target of this build"
    targets+=("$target")
  done
  say "configured in $(elapsed "$t"); building ${targets[*]} with $JOBS jobs"
  t=$(now)
  in_root "${gpu_check[@]}" --build-only --targets "${targets[*]}" >>"$LOG" 2>&1 ||
    die "the build inside the root (see $BUILD/gpu-logs/build.log)"
  build_s=$(($(now) - t))
  say "built in ${build_s} s"

  # The built programs load with the prefix's libraries (build RPATH; gpu-env.sh's LD_LIBRARY_PATH for the
  # MPI programs, as in gpu_check.sh's later steps) and the stand-in's (LD_LIBRARY_PATH);
  # zerofit_worker links libprotobuf itself (issue 28: pip's torch left it off the link line); the gpu tier
  # runs and skips cleanly (no GPU, no driver in the root).
  in_root "$BUILD/cli/zerofit" --help >/dev/null || die "$BUILD/cli/zerofit --help does not run inside the root"
  worker=$(find "$BUILD" -name zerofit_worker -type f -perm -u+x | head -n 1)
  [[ -n "$worker" ]] || die "no zerofit_worker program in $BUILD"
  in_root sh -c "readelf -d '$worker' | grep -q 'NEEDED.*libprotobuf'" || die "$worker does not link libprotobuf"
  in_root sh -c ". '$BUILD/gpu-env.sh' && cd '$BUILD' && ctest -L gpu --output-on-failure" >>"$LOG" 2>&1 ||
    die "ctest -L gpu inside the root (see $LOG)"
  say "inside the root: zerofit --help runs, $worker needs libprotobuf, ctest -L gpu passed (skipped: no GPU)"
  echo "$build_s" >"$DIR/.build_seconds"
  exit 0
fi

# --- the first half, on this machine: packages, the root, the stand-in prefix ----------------------------------
[[ $(id -u) -eq 0 ]] || { echo "gpu_clean_root_build: needs root (mmdebstrap, chroot, mounts)" >&2; exit 1; }
for tool in mmdebstrap unshare chroot dpkg-deb; do
  command -v "$tool" >/dev/null || { echo "gpu_clean_root_build: '$tool' not found (apt-get install mmdebstrap)" >&2; exit 1; }
done
[[ -x "$CUDA/bin/nvcc" ]] || { echo "gpu_clean_root_build: no $CUDA/bin/nvcc (--cuda DIR)" >&2; exit 1; }
: >"$LOG"
start=$(now)

t=$(now)
say "the recipe's packages (scripts/fetch_gpu_debs.sh)"
scripts/fetch_gpu_debs.sh >>"$LOG" 2>&1 || die "fetch_gpu_debs.sh (see $LOG)"
say "the LibTorch stand-in's packages (fetch_gpu_debs.sh --roots libtorch-dev --out $TORCH_DEBS)"
scripts/fetch_gpu_debs.sh --roots libtorch-dev --out "$TORCH_DEBS" >>"$LOG" 2>&1 || die "fetch_gpu_debs.sh --roots libtorch-dev (see $LOG)"
say "packages in $(elapsed "$t")"

# The root, made once for this package list (and again with --fresh-root).
stamp="bookworm minbase $ROOT_PACKAGES"
if ((FRESH_ROOT)) || [[ ! -f "$ROOTFS/.zerofit-root" || "$(cat "$ROOTFS/.zerofit-root")" != "$stamp" ]]; then
  t=$(now)
  say "making the root in $ROOTFS (mmdebstrap: $stamp)"
  rm -rf "$ROOTFS" "$ROOTFS.tmp"
  nice -n 10 mmdebstrap --variant=minbase --include="$ROOT_PACKAGES" bookworm "$ROOTFS.tmp" \
    http://deb.debian.org/debian >>"$LOG" 2>&1 || die "mmdebstrap (see $LOG)"
  mkdir -p "$ROOTFS.tmp/usr/local"
  ln -sfn "$CUDA" "$ROOTFS.tmp/usr/local/cuda"  # CMakeLists.txt's default toolkit; the folder is mounted
  echo "$stamp" >"$ROOTFS.tmp/.zerofit-root"
  mv "$ROOTFS.tmp" "$ROOTFS"
  say "root made in $(elapsed "$t")"
else
  say "root cached in $ROOTFS"
fi

# The stand-in prefix, unpacked once per manifest, without the packages the recipe's prefix has (protobuf,
# absl, ...: LibTorch then uses the recipe's, as pip's torch brings its own copies, and no library is found in
# two folders); absolute links are made to point into the prefix.
RECIPE_MANIFEST=third_party/gpu-debs/MANIFEST.tsv
want=$(cat "$TORCH_DEBS/MANIFEST.tsv" "$RECIPE_MANIFEST" | sha256sum | cut -d' ' -f1)
if [[ ! -f "$TORCH_PREFIX/.manifest.sha256" || "$(cat "$TORCH_PREFIX/.manifest.sha256")" != "$want" ]]; then
  t=$(now)
  say "unpacking the LibTorch stand-in into $TORCH_PREFIX"
  rm -rf "$TORCH_PREFIX"
  mkdir -p "$TORCH_PREFIX"
  while IFS=$'\t' read -r pkg _ver _arch file sha; do
    [[ "$pkg" == \#* || -z "$pkg" ]] && continue
    if cut -f1 "$RECIPE_MANIFEST" | grep -qx -- "$pkg"; then continue; fi
    [[ "$(sha256sum "$TORCH_DEBS/$file" | cut -d' ' -f1)" == "$sha" ]] || die "$TORCH_DEBS/$file does not match its manifest"
    dpkg-deb -x "$TORCH_DEBS/$file" "$TORCH_PREFIX"
  done <"$TORCH_DEBS/MANIFEST.tsv"
  while IFS= read -r link; do
    target=$(readlink "$link")
    if [[ "$target" == /* && -e "$TORCH_PREFIX$target" ]]; then ln -sfn "$TORCH_PREFIX$target" "$link"; fi
  done < <(find "$TORCH_PREFIX/usr" -type l)
  [[ -f "$TORCH_PREFIX/$ARCH_LIBS/cmake/Torch/TorchConfig.cmake" ]] || die "no TorchConfig.cmake in the stand-in"
  echo "$want" >"$TORCH_PREFIX/.manifest.sha256"
  say "stand-in unpacked in $(elapsed "$t")"
fi

if ((FRESH_BUILD)); then rm -rf "$BUILD" "$DIR/ccache"; fi
rm -f "$DIR/.build_seconds"
# The second half runs in a private mount namespace: its mounts are invisible outside it and vanish with it,
# whatever ends it; its trap unmounts them in order on every exit path besides.
args=(--dir "$DIR" --jobs "$JOBS" --cuda "$CUDA" --in-namespace)
if unshare --mount --propagation private "$0" "${args[@]}"; then
  say "OK: every target gpu_check.sh needs built against the unpacked packages alone, in $(elapsed "$start") (build $(cat "$DIR/.build_seconds") s); log $LOG"
else
  rc=$?
  echo "gpu_clean_root_build: FAILED after $(elapsed "$start") (exit $rc); log $LOG, build logs $BUILD/gpu-logs" >&2
  exit "$rc"
fi
