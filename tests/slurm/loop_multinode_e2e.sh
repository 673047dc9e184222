#!/bin/bash
# Runs tests/slurm/multinode_e2e.sh again and again to catch a rare failure (a rank's SIGSEGV at start was
# seen in a few of many runs), keeping what a failed run leaves: its log, its working directory (the jobs'
# output, the Slurm daemons' logs) and the core files of any process that crashed.
#
# usage: loop_multinode_e2e.sh BUILD_DIR OUT_DIR [PARTS (default ab)] [RUNS (default 20)]
#   As root, like multinode_e2e.sh. Creates OUT_DIR; touch OUT_DIR/stop to end after the current run.
#   OUT_DIR/summary: one line a run (its number, exit code, seconds, cores found);
#   OUT_DIR/runN.log: that run's output; OUT_DIR/keepN/: a failed run's (or a crashed process's) directory.
#   Cores: the kernel's core_pattern must write them into the crashing process's directory (`core`, the
#   default), which for the ranks is the job's directory under OUT_DIR/work; core size is set unlimited here
#   and Slurm passes the limit on to the ranks. Read one with
#     gdb BUILD_DIR/worker/torch/zerofit_worker_faults OUT_DIR/keepN/.../core -batch -ex "thread apply all bt"
# Load beside it changes the timing: the failures seen so far came with sanitizer tests running alongside.
set -u
if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD_DIR OUT_DIR [PARTS] [RUNS]" >&2
  exit 2
fi
BUILD=$(realpath "$1")
OUT=$2
PARTS=${3:-ab}
RUNS=${4:-20}
SRC=$(realpath "$(dirname "$0")/../..")
mkdir -p "$OUT/work"
OUT=$(realpath "$OUT")
ulimit -c unlimited
for i in $(seq 1 "$RUNS"); do
  [ -f "$OUT/stop" ] && break
  start=$(date +%s)
  ZF_TMP="$OUT/work" ZF_KEEP=1 bash "$SRC/tests/slurm/multinode_e2e.sh" "$BUILD/cli/zerofit" \
    "$BUILD/worker/data/zerofit_make_arith_prefs" "$BUILD/worker/torch/zerofit_worker" "$SRC" "$PARTS" \
    "$BUILD/worker/torch/zerofit_worker_faults" > "$OUT/run$i.log" 2>&1
  rc=$?
  cores=$(find "$OUT/work" -name "core*" -type f | wc -l)
  echo "run $i rc=$rc $(($(date +%s) - start)) s cores=$cores" >> "$OUT/summary"
  if [ "$rc" = 0 ] && [ "$cores" = 0 ]; then
    rm -rf "${OUT:?}/work/"*
  else
    mkdir -p "$OUT/keep$i"
    mv "$OUT/work/"* "$OUT/keep$i/"
  fi
done
cat "$OUT/summary"
