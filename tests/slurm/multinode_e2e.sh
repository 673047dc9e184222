#!/bin/bash
# zerofit across nodes (issue 20; label `slurm`, root only): a 3-node Slurm cluster on this machine, each node a
# network namespace of its own (deploy/slurm/local_cluster.sh start DIR --nodes 3: own address on a private
# bridge, own host name, own /etc/hosts and temporary directory), ranks on different nodes talking over TCP
# (Open MPI ob1/tcp, PMIx through `srun --mpi=pmix`), the coordinator found by its host name. Shows:
#   a. 2 nodes x 2 ranks (`zerofit submit --slurm`) == 1 node x 4 ranks == `zerofit run` with 4 ranks: the
#      final checkpoint files are byte-identical;
#   b. node loss: every process of node2 (its slurmd, step daemon and ranks) SIGKILLed mid-job; Slurm marks the
#      node DOWN and requeues the job, which waits for node2 (the job asks for node1 and node2); node2's slurmd
#      comes back, the job resumes from its last checkpoint and ends byte-identical to (a); `zerofit status`
#      and the job's output tell which node, which step, which checkpoint; the times from the kill to
#      Slurm's detection and to the first resumed step are printed (BENCHMARKS.md "Across nodes");
#   c. `zerofit serve` on node3, ranks on node1 and node2; serve SIGKILLed mid-job and started again on node3
#      with the same port and state directory: the job finishes, byte-identical to (a);
#   d. partition: node2's link down for longer than the coordinator's heartbeat deadline, then up: the attempt
#      is failed and restarted from the checkpoint, no rank of the old attempt writes afterwards, the job
#      finishes byte-identical to (a).
# usage: multinode_e2e.sh path/to/zerofit path/to/zerofit_make_arith_prefs path/to/zerofit_worker SOURCE_DIR [PARTS]
#   PARTS: the letters to run (default abcd; (a) runs always: the others compare with it)
set -u
Z=$(realpath "$1")
GEN=$(realpath "$2")
WORKER=$(realpath "$3")
SRC=$(realpath "$4")
PARTS="${5:-abcd}"
CL="$SRC/deploy/slurm/local_cluster.sh"
T0=$(date +%s)
fail() {
  echo "FAIL: $*"
  if [ -n "${D:-}" ] && [ -d "$D/cluster/log" ]; then
    echo "--- last lines of the Slurm daemons' logs"
    tail -n 15 "$D"/cluster/log/slurm*.log 2> /dev/null
  fi
  exit 1
}
if [ "$(id -u)" != 0 ]; then
  echo "SKIP: needs root (slurmd, munged, network namespaces)"
  exit 77
fi
for tool in slurmctld munged ip unshare nsenter; do
  command -v "$tool" > /dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
if ! unshare --net --uts --mount true 2> /dev/null || ! ip link add zfprobe$$ type bridge 2> /dev/null; then
  echo "SKIP: no network/UTS/mount namespaces or bridges here"
  exit 77
fi
ip link del "zfprobe$$"
D=$(mktemp -d /tmp/zerofit-multinode-XXXXXX)
cleanup() {
  SLURM_CONF="$D/cluster/slurm.conf" scancel --full --quiet -u root 2> /dev/null
  [ -n "${SERVE_PID:-}" ] && kill -9 "$SERVE_PID" 2> /dev/null
  "$CL" stop "$D/cluster"
  left=$(pgrep -f "$D" | grep -v "^$$\$" || true)
  [ -z "$left" ] || echo "warning: processes left: $left"
  rm -rf "$D"
}
trap cleanup EXIT
# Ports of their own so that this test and slurm_e2e may share a machine.
export SLURM_PORT_BASE=26917
"$CL" start "$D/cluster" --nodes 3 || fail "cluster start"
export SLURM_CONF="$D/cluster/slurm.conf"
on() {  # on NODE|host CMD...: CMD on that node (host: here, with the nodes' names resolvable)
  local node=$1
  shift
  "$CL" exec "$D/cluster" "$node" "$@"
}
# Open MPI between the nodes: ob1 over TCP on the cluster's bridge network (shared memory within a node); the
# rest (UCX, the other btls) would either see through the namespaces or look for hardware. sbatch passes the
# submitting environment to the batch step, srun to every rank.
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp
OMPI_MCA_btl_tcp_if_include="10.231.$(cat "$D/cluster/net/x").0/24"
export OMPI_MCA_btl_tcp_if_include

"$GEN" --out "$D/data" --train 240 --test 16 --ids --pad > /dev/null || fail "data generation"
STEPS=60
FINAL=$(printf "step-%08d" "$STEPS")
spec() {  # spec NAME NODES TASKS_PER_NODE [YAML lines...]
  local name=$1 nodes=$2 tpn=$3
  shift 3
  {
    cat << YAML
name: $name
task: reward
model: $D/data
data: $D/data
world_size: 4
max_restarts: 2
training:
  steps: $STEPS
  global_batch: 8
  micro_batch: 2
  gradient_accumulation: 1
  lr: 1.0e-3
checkpoint: {dir: $D/ck_$name, every: 5, keep: 2}
slurm:
  nodes: $nodes
  tasks_per_node: $tpn
  cpus_per_task: 1
  time: "00:10:00"
  signal_seconds: 0
YAML
    for line in "$@"; do echo "$line"; done
  } > "$D/$name.yaml"
}
submit() {  # submit NAME [zerofit submit flags]: sets J (the Slurm job id) and OUT (its output file)
  local name=$1
  shift
  (cd "$D" && "$Z" submit --slurm "$D/$name.yaml" --state-dir "$D/st_$name" --worker "$WORKER" "$@") > "$D/submit_$name.log" 2>&1 ||
    { cat "$D/submit_$name.log"; fail "submit $name"; }
  J=$(cat "$D/st_$name/slurm_job_id")
  OUT="$D/st_$name/slurm-$J.out"
}
state() { scontrol show job -o "$1" 2> /dev/null | grep -o "JobState=[A-Z_]*" | cut -d= -f2; }
wait_state() {  # wait_state JOB STATE SECONDS
  local now
  for _ in $(seq $(($3 * 5))); do
    now=$(state "$1")
    [ "$now" = "$2" ] && return 0
    case "$now" in COMPLETED | FAILED | CANCELLED | TIMEOUT) break ;; esac
    sleep 0.2
  done
  grep -v "step [0-9]*/[0-9]* " "$D"/st_*/slurm-"$1".out 2> /dev/null | tail -40
  fail "Slurm job $1 not $2 within $3 s (is $(state "$1"))"
}
wait_log() {  # wait_log FILE PATTERN SECONDS
  for _ in $(seq $(($3 * 10))); do grep -q "$2" "$1" 2> /dev/null && return 0; sleep 0.1; done
  fail "'$2' not in $1 within $3 s: $(tail -5 "$1" 2> /dev/null)"
}
same_state() {  # same_state NAME: final checkpoint files equal those of the 2 x 2 run
  for r in 0 1 2 3; do
    cmp "$D/ck_twobytwo/$FINAL/rank-0000$r.safetensors" "$D/ck_$1/$FINAL/rank-0000$r.safetensors" ||
      fail "$1: rank $r's parameters/optimizer state differ from the 2 x 2 run"
  done
}
elapsed() { echo "$(($(date +%s) - T0)) s"; }

# a. 2 x 2 == 1 x 4 == zerofit run.
spec twobytwo 2 2
submit twobytwo
wait_state "$J" COMPLETED 120
grep -q "job-000001 succeeded (attempt 1, restarts 0, interruptions 0); exit 0" "$OUT" || { cat "$OUT"; fail "2 x 2"; }
for r in "rank 1 of 4 (local 1, node 1 of 2: node1)" "rank 2 of 4 (local 0, node 2 of 2: node2)"; do
  grep -q "started: $r" "$OUT" || fail "ranks not on two nodes: $(grep started: "$OUT")"
done
grep -q "coordinator node1:" "$OUT" || fail "the coordinator's address is not node1's name: $(grep coordinator "$OUT")"
spec onebyfour 1 4
submit onebyfour
wait_state "$J" COMPLETED 120
same_state onebyfour
spec local 1 4
"$Z" run "$D/local.yaml" --state-dir "$D/st_local" --worker "$WORKER" > "$D/local.log" 2>&1 || { tail -20 "$D/local.log"; fail "zerofit run"; }
same_state local
echo "a. 2 nodes x 2 ranks (ranks on node1 and node2 over TCP) == 1 node x 4 ranks == zerofit run 4 ranks ($(elapsed))"
echo "PASS"
