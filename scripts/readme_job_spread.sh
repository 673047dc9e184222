#!/usr/bin/env bash
# The README's main job (examples/jobs/arith_reward.yaml after setup.sh's data and base-model steps), once per
# OpenBLAS core type: its held-out accuracy depends on the rounding of the kernels the CPU picks (issue 29: a
# new user on an AMD EPYC saw 91.7% where the README said 96.8%), so the README quotes the range over these
# runs. Each run starts from nothing in a folder of its own (data, SFT base model, the job), so a run is the
# whole path a new user takes after the build. Usage:
#   scripts/readme_job_spread.sh [--build-dir DIR] [--types "Haswell Sandybridge ..."] [--out DIR]
# Prints one line per core type: held-out accuracy, the job's wall time and the CPU time of the job (base
# model training excluded). A core type this CPU cannot run (SIGILL) is skipped. SFT_STEPS and SFT_LR change
# the base model's recipe (default: setup.sh's, 1000 steps at 3e-3).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=build
types="Haswell Sandybridge Nehalem Prescott"
out=$(mktemp -d /tmp/zerofit-readme-job.XXXXXX)
while (($#)); do
  case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    --types) types=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "readme_job_spread.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
zerofit="$PWD/$build_dir/cli/zerofit"
mpiexec=(mpiexec --oversubscribe -n 2)
[[ $(id -u) -ne 0 ]] || mpiexec+=(--allow-run-as-root)
for core in $types; do
  dir="$out/$core"
  mkdir -p "$dir"
  export OPENBLAS_CORETYPE=$core OMP_NUM_THREADS=1
  if ! "$build_dir/worker/data/zerofit_make_arith_prefs" --out "$dir" --train 4000 --test 400 --ids --pad \
       --wrong near > /dev/null; then
    echo "$core: data generation failed"; continue
  fi
  if ! "${mpiexec[@]}" -x OPENBLAS_CORETYPE -x OMP_NUM_THREADS "$build_dir/worker/torch/zerofit_train_prefs" \
       --task sft --data "$dir" --offload --threads 1 --global-batch 64 --micro 1 --steps "${SFT_STEPS:-1000}" \
       --lr "${SFT_LR:-3e-3}" \
       --log-every 100 --export "$dir/base" > "$dir/base.log" 2>&1; then
    echo "$core: skipped (the base model did not train: $(tail -n 1 "$dir/base.log"))"; continue
  fi
  sed -e "s#build/examples/arith#$dir#g" examples/jobs/arith_reward.yaml > "$dir/job.yaml"
  start=$(date +%s.%N)
  rc=0
  /usr/bin/time -f "%U %S" -o "$dir/cpu" "$zerofit" run "$dir/job.yaml" > "$dir/job.log" 2>&1 || rc=$?
  wall=$(echo "$(date +%s.%N) - $start" | bc)
  if ((rc != 0)); then
    echo "$core: the job failed (rc $rc; $dir/job.log)"; continue
  fi
  acc=$(grep -io 'held-out[^,;]*accuracy[^0-9]*[0-9.]*%\?' "$dir/job.log" | tail -n 1)
  printf '%s: %s; job %.1f s wall, %.1f CPU-s\n' "$core" "$acc" "$wall" "$(awk '{print $1 + $2}' "$dir/cpu")"
done
