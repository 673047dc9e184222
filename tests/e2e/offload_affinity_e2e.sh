#!/bin/bash
# The CPUs an offloading rank may use (issue 30): on the H200, mpiexec's default binding (one core a rank for
# 1-2 ranks) ran 16 CPU AdamW threads at one thread's speed.
#  - a rank bound to one core with --threads 2 warns, naming the launcher flags that fix it;
#  - unbound, the threads default to the CPUs the rank may run on (all of them here), no warning;
#  - `zerofit run` binds each rank to its own share of the host's CPUs (launch/mpiexec_command.h): its one
#    rank here may run on every CPU, not one.
# usage: offload_affinity_e2e.sh path/to/zerofit path/to/zerofit_train_prefs path/to/zerofit_make_arith_prefs
set -u
set -o pipefail
Z="$1"
PREFS="$2"
GEN="$3"
CPUS=$(nproc)
if [ "$CPUS" -lt 2 ]; then echo "SKIP: one CPU: nothing to bind"; exit 0; fi
D=$(mktemp -d)
trap 'pkill -9 -f "zerofit_worker.*$D" 2>/dev/null; rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
ROOT=()
[ "$(id -u)" -eq 0 ] && ROOT=(--allow-run-as-root)
"$GEN" --out "$D/data" --train 64 --test 8 --ids --pad > /dev/null || fail "data generation"
train=("$PREFS" --task reward --data "$D/data" --offload --steps 1 --global-batch 8 --micro 1)

mpiexec "${ROOT[@]}" -n 1 "${train[@]}" --threads 2 > "$D/bound.log" 2>&1 || { cat "$D/bound.log"; fail "bound run"; }
grep -q "warning: rank 0: optimizer offload: 2 threads, but this process may run on only 1 CPU" "$D/bound.log" ||
  fail "no warning for 2 threads on one bound core: $(grep -i offload "$D/bound.log")"
grep -q -- "--bind-to none" "$D/bound.log" || fail "the warning names no fix: $(grep warning "$D/bound.log")"

mpiexec "${ROOT[@]}" --bind-to none -n 1 "${train[@]}" > "$D/free.log" 2>&1 || { cat "$D/free.log"; fail "unbound run"; }
grep -q "offload: CPU AdamW on $CPUS thread(s); rank 0 may run on $CPUS CPU(s)" "$D/free.log" ||
  fail "unbound: want $CPUS threads on $CPUS CPUs: $(grep -i offload "$D/free.log")"
grep -q "warning: rank" "$D/free.log" && fail "unbound: a warning: $(grep warning "$D/free.log")"

cat > "$D/job.yaml" <<YAML
name: affinity
task: reward
model: $D/data
data: $D/data
world_size: 1
training: {steps: 2, global_batch: 8, micro_batch: 8, gradient_accumulation: 1, lr: 1.0e-3, offload: true}
YAML
"$Z" run "$D/job.yaml" --state-dir "$D/state" > "$D/run.log" 2>&1 || { cat "$D/run.log"; fail "zerofit run"; }
grep -q "offload: CPU AdamW on $CPUS thread(s); rank 0 may run on $CPUS CPU(s)" "$D/run.log" ||
  fail "zerofit run: want its one rank on all $CPUS CPUs: $(grep -i offload "$D/run.log")"
grep -q "warning: rank" "$D/run.log" && fail "zerofit run: a warning: $(grep warning "$D/run.log")"
echo PASS
