#!/usr/bin/env bash
# Installs every system package zerofit needs (Debian 12, apt-get only; nothing is downloaded at build or run
# time) and builds the project into ./build.
#   ./scripts/setup.sh              install packages (as root or via sudo) and build
#   ./scripts/setup.sh --deps-only  install packages only
#   BUILD_DIR=... ./scripts/setup.sh   build somewhere else
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git clang-format
  libtorch-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libopenmpi-dev openmpi-bin
  libsqlite3-dev nlohmann-json3-dev libyaml-cpp-dev libcli11-dev libspdlog-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libsentencepiece-dev libpcre2-dev libicu-dev
  python3-jinja2
  slurm-wlm slurmd slurmctld slurm-client slurm-wlm-basic-plugins munge
  openssl
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${#missing[@]} packages: ${missing[*]}"
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup: all ${#PACKAGES[@]} packages already installed"
fi

[[ "${1:-}" == "--deps-only" ]] && exit 0

BUILD_DIR=${BUILD_DIR:-build}
# CUDA and NCCL under /usr/local/cuda are picked up automatically (the nccl backend compiles without a GPU).
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$BUILD_DIR" -j "$(nproc)"
# Data for the README's main job (examples/jobs/arith_reward.yaml): generated offline, deterministic.
"$BUILD_DIR/worker/data/zerofit_make_arith_prefs" --out "$BUILD_DIR/examples/arith" --train 2000 --test 200 \
  --ids --pad > /dev/null
echo "setup: built into $BUILD_DIR (example data in $BUILD_DIR/examples/arith)"
