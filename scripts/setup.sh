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
  # LibTorch's BLAS: Debian's libtorch recommends OpenBLAS, which --no-install-recommends leaves out, and then
  # every matrix product runs in the reference BLAS (libblas3): training the project's models took 4-6x as
  # long (BENCHMARKS.md, "A cold machine within about 15 minutes"). The OpenMP build runs on LibTorch's own
  # OpenMP runtime (libgomp) instead of a thread pool of its own.
  libopenblas0-openmp
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libopenmpi-dev openmpi-bin
  libsqlite3-dev nlohmann-json3-dev libyaml-cpp-dev libcli11-dev libspdlog-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libsentencepiece-dev libpcre2-dev libicu-dev
  python3-jinja2
  slurm-wlm slurmd slurmctld slurm-client slurm-wlm-basic-plugins munge
  iproute2  # the multi-node test cluster: network namespaces, veth, a bridge (deploy/slurm/local_cluster.sh)
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
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZEROFIT_PLAIN_TORCH_FREE_UNIT_TESTS=ON
cmake --build "$BUILD_DIR" -j "$(nproc)"
# Data for the README's main job (examples/jobs/arith_reward.yaml): generated offline, deterministic. Wrong
# answers are off by 1 to 9 (--wrong near), so a reward model's last token can always tell them apart.
ARITH=$BUILD_DIR/examples/arith
"$BUILD_DIR/worker/data/zerofit_make_arith_prefs" --out "$ARITH" --train 4000 --test 400 --ids --pad \
  --wrong near > /dev/null
# The job's base model: a reward model starts from a language model, as in every RLHF pipeline; one trained
# from scratch on this task sits at ~50% for minutes (BENCHMARKS.md, "The README's main job"). Supervised
# fine-tuning on the training problems' correct answers only (no held-out problem, no rejected answer), about
# 7 s on 2 cores; kept when it exists, since the data above is the same every time.
MPIEXEC=(mpiexec --oversubscribe -n 2)
[[ $(id -u) -ne 0 ]] || MPIEXEC+=(--allow-run-as-root)
if [[ ! -f "$ARITH/base/model.safetensors" ]]; then
  echo "setup: training the example's base model (SFT, 1000 steps) into $ARITH/base"
  "${MPIEXEC[@]}" "$BUILD_DIR/worker/torch/zerofit_train_prefs" --task sft --data "$ARITH" --offload --threads 1 \
    --global-batch 64 --micro 1 --steps 1000 --lr 3e-3 --log-every 100 --export "$ARITH/base"
fi
# The GRPO example (examples/jobs/arith_grpo.yaml): smaller operands, prompts with their answers, and a
# policy start from 200 SFT steps (21% of held-out problems answered exactly here; about 5 s).
GRPO=$BUILD_DIR/examples/arith-grpo
"$BUILD_DIR/worker/data/zerofit_make_arith_prefs" --out "$GRPO" --train 700 --test 150 --max-operand 40 --ids \
  > /dev/null
if [[ ! -f "$GRPO/sft/model.safetensors" ]]; then
  echo "setup: training the GRPO example's starting policy (SFT, 200 steps) into $GRPO/sft"
  "${MPIEXEC[@]}" "$BUILD_DIR/worker/torch/zerofit_train_prefs" --task sft --data "$GRPO" --global-batch 64 \
    --micro 1 --steps 200 --lr 3e-3 --log-every 100 --export "$GRPO/sft"
fi
echo "setup: built into $BUILD_DIR (example data in $ARITH, its base model in $ARITH/base; GRPO's in $GRPO)"
