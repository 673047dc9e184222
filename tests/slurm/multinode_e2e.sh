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
#      finishes byte-identical to (a);
#   e. shrink (slurm.on_node_loss: shrink, min_nodes: 1; sbatch --nodes=1-2, node3 excluded): node2 killed
#      whole mid-job; Slurm requeues the job, which resumes on node1 alone with 2 ranks from its last
#      checkpoint, re-planned to the same global batch of 8 (2 ranks x 2 micro-batches x 2 pairs instead of
#      4 x 1 x 2), and succeeds; `zerofit status` and the job's output name node2, the checkpoint step and the
#      new world size.
#      The parameters cannot match the uninterrupted 4-rank run of (a) bit for bit (2 micro-batches of 2
#      pairs per rank sum the same 8 pairs in another order), so the reference is a run that shrinks at the
#      same checkpoint by a planned path: `zerofit serve` here, 4 ranks of zerofit_worker_faults with mpiexec
#      (rank 2 exits at step 22), then 2 ranks of zerofit_worker for the restarted attempt. Both runs are made
#      deterministic with the test-only fault worker: in the Slurm job rank 2 hangs in its first all-gather of
#      step 22 (every rank then blocks in step 22 and the last checkpoint is that of step 19, whatever the
#      timing), and node2 is killed while they are stuck; the reference's rank 2 exits as step 22 starts. The
#      final checkpoint files must be byte-identical. Compared with the brief's other option (the same hang,
#      then draining node2 and `scontrol requeue`), this reference needs no second requeue (cred_expire, 15 s)
#      and runs beside the Slurm job while that one waits for Slurm to notice the lost node, so the part costs
#      little more than the node loss itself; and it checks the Slurm path (node range, srun at the
#      allocation's size, requeue, restarted coordinator) against the coordinator's own re-plan, which
#      coordinator_unit_test checks against the step scheduler (same 8 pairs per step at 2 and 4 ranks).
# usage: multinode_e2e.sh path/to/zerofit path/to/zerofit_make_arith_prefs path/to/zerofit_worker SOURCE_DIR [PARTS]
#        [path/to/zerofit_worker_faults]
#   PARTS: the letters to run (default abcde; (a) runs always: the others compare with it). The fault worker
#   (part e) defaults to the one next to zerofit_worker.
#   ZF_TMP: the folder of its working directory (default /tmp); ZF_KEEP=1 keeps that directory
#   (tests/slurm/loop_multinode_e2e.sh uses both).
set -u
Z=$(realpath "$1")
GEN=$(realpath "$2")
WORKER=$(realpath "$3")
SRC=$(realpath "$4")
PARTS="${5:-abcde}"
FAULTY=$(realpath "${6:-$(dirname "$WORKER")/zerofit_worker_faults}")
# Parts b-d act on a running job once its checkpoint of step 19 is written. Their jobs run the test-only fault
# worker: from step 18 on, rank 0 of the first attempt takes 0.5 s longer per step (fault=slow; the numbers do
# not change), so the job is still running when the part acts, however fast the machine trains (with OpenBLAS
# the other 40 steps once ended before node2 was dead). Restarted attempts run at full speed.
MID_JOB_FAULTS="rank=0,step=18,fault=slow,seconds=0.5,attempt=1"
CL="$SRC/deploy/slurm/local_cluster.sh"
T0=$(date +%s)
fail() {
  echo "FAIL: $*"
  if [ -n "${D:-}" ] && [ -d "$D/cluster/log" ]; then
    echo "--- last lines of the Slurm daemons' logs"
    tail -n 15 "$D"/cluster/log/slurm*.log 2> /dev/null
  fi
  # The jobs' own output: the ranks' errors and how a rank died (a crash before any step left nothing else).
  if [ -n "${D:-}" ]; then
    for out in "$D"/st_*/slurm-*.out; do
      [ -f "$out" ] || continue
      echo "--- $out (without step lines)"
      grep -v "step [0-9]*/[0-9]* " "$out" | tail -n 25
    done
  fi
  exit 1
}
[ -x "$FAULTY" ] || fail "parts b-e need zerofit_worker_faults (6th argument): $FAULTY"
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
D=$(mktemp -d "${ZF_TMP:-/tmp}/zerofit-multinode-XXXXXX")
cleanup() {
  SLURM_CONF="$D/cluster/slurm.conf" scancel --full --quiet -u root 2> /dev/null
  [ -n "${SERVE_PID:-}" ] && kill -9 "$SERVE_PID" 2> /dev/null
  [ -n "${SERVE_P_PID:-}" ] && kill -9 "$SERVE_P_PID" 2> /dev/null
  [ -n "${REF_PID:-}" ] && kill -9 "$REF_PID" 2> /dev/null
  [ -f "$D/serve_r.pid" ] && kill -9 "$(cat "$D/serve_r.pid")" 2> /dev/null
  "$CL" stop "$D/cluster"
  left=$(pgrep -f "$D" | grep -v "^$$\$" || true)
  [ -z "$left" ] || echo "warning: processes left: $left"
  [ -n "${ZF_KEEP:-}" ] || rm -rf "$D"
}
trap cleanup EXIT
# Ports of their own (slurmctld and the slurmds from the base, the external coordinators at base+40 and
# base+41), so that this test shares a machine with slurm_e2e (26817...) and with another run of itself (a
# second checkout's): the first base from 26917 in steps of 100 whose 50 ports no TCP socket uses.
free_port_base() {
  local used base p busy
  used=$(ss -Htan | awk '{ sub(/.*:/, "", $4); print $4 }' | sort -un)
  for base in $(seq 26917 100 31917); do
    busy=0
    for p in $used; do ((p >= base && p < base + 50)) && busy=1 && break; done
    ((busy)) || { echo "$base"; return 0; }
  done
  return 1
}
SLURM_PORT_BASE=$(free_port_base) || fail "no free range of 50 ports from 26917"
export SLURM_PORT_BASE
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
wait_log() {  # wait_log FILE PATTERN SECONDS: gives up early once the Slurm job $J has ended
  for i in $(seq $(($3 * 10))); do
    grep -q "$2" "$1" 2> /dev/null && return 0
    if [ $((i % 10)) = 0 ] && [ -n "${J:-}" ]; then
      case "$(state "$J")" in COMPLETED | FAILED | CANCELLED | TIMEOUT) break ;; esac
    fi
    sleep 0.1
  done
  fail "'$2' not in $1 within $3 s: $(tail -5 "$1" 2> /dev/null)${J:+; Slurm: $(scontrol show job -o "$J" 2> /dev/null | grep -o "JobState=[^ ]*\|Reason=[^ ]*\|NumNodes=[^ ]*\|Restarts=[^ ]*" | tr '\n' ' ')}"
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

now_ms() { date +%s%3N; } # milliseconds
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) / 1000 }'; }
node_state() { sinfo -h -n "$1" -o %T 2> /dev/null; }

# b. Node loss: node2 dies whole; Slurm requeues the job, which waits for node2 (it asks for node1 and node2).
if [[ "$PARTS" == *b* ]]; then
  spec nodeloss 2 2 '  extra: ["--nodelist=node1,node2"]'
  WORKER="$FAULTY" ZEROFIT_FAULTS="$MID_JOB_FAULTS" submit nodeloss
  wait_log "$OUT" "(checkpoint step 19)" 120
  T_KILL=$(now_ms)
  "$CL" kill-node "$D/cluster" node2 || fail "kill node2"
  for _ in $(seq 200); do [[ "$(node_state node2)" == down* ]] && break; sleep 0.1; done
  [[ "$(node_state node2)" == down* ]] || fail "Slurm did not mark node2 down in 20 s: $(node_state node2)"
  T_DOWN=$(now_ms)
  for _ in $(seq 150); do [ "$(state "$J")" = PENDING ] && break; sleep 0.2; done
  [ "$(state "$J")" = PENDING ] || fail "the job was not requeued after node2 went down: $(state "$J")"
  sleep 2
  [ "$(state "$J")" = PENDING ] || fail "the job did not wait for node2: $(state "$J")"
  # While it waits, `zerofit status` (from the job store: the coordinator went with the allocation) tells the
  # story: the checkpoint it resumes from, the requeue and the node that was lost.
  waiting=$(on host "$Z" status --state-dir "$D/st_nodeloss" | grep job-000001)
  echo "$waiting" | grep -q "checkpoint step [0-9]*, interruptions 1 *\[slurm $J PENDING\] .*SIGTERM from Slurm: job $J requeued (lost node2 down" ||
    fail "zerofit status while the job waits for node2: $waiting"
  T_BACK=$(now_ms)
  "$CL" start-node "$D/cluster" node2 || fail "restart node2's slurmd"
  for _ in $(seq 600); do [ "$(state "$J")" = RUNNING ] && break; sleep 0.1; done
  T_RUNNING=$(now_ms)
  wait_log "$OUT" "attempt 2: 240 training pairs" 90
  T_RESUMED=$(now_ms)
  grep -q "started: rank 2 of 4 (local 0, node 2 of 2: node2), srun, Slurm job $J (requeued 1x)" "$OUT" ||
    fail "the requeued job did not run on node2 again: $(grep "requeued 1x" "$OUT")"
  wait_state "$J" COMPLETED 120
  same_state nodeloss
  resumed=$(grep -o "attempt 2: 240 training pairs, steps [0-9]*" "$OUT" | grep -o "[0-9]*$")
  # Steps lost: the last step attempt 1 finished (1-based in the progress lines) minus where attempt 2 began.
  done1=$(sed '/attempt 2: 240 training pairs/q' "$OUT" | grep -o "step [0-9]*/$STEPS" | cut -d' ' -f2 | cut -d/ -f1 | sort -n | tail -1)
  status=$(on host "$Z" status --state-dir "$D/st_nodeloss")
  echo "$status" | grep -q "job-000001 *nodeloss *succeeded *attempt 2, restarts 0, checkpoint step $((STEPS - 1)), interruptions 1 *\[slurm $J COMPLETED\]" ||
    fail "zerofit status after the node loss: $status"
  grep -q "srun: error: Node failure on node2" "$OUT" || fail "the output does not name node2"
  grep -q "SIGTERM from Slurm: job $J requeued" "$OUT" || fail "the requeue was not recorded as an interruption"
  echo "--- the story in the job's output:"
  grep -v "  loss \|: data:" "$OUT" | grep "Node failure\|requeued\|attempt [0-9]\|checkpoint" | head -8
  echo "b. while node2 was down: $waiting"
  echo "b. $status"
  echo "b. node2 killed after the checkpoint of step 19 (0-based; attempt 1 got to step $done1 of $STEPS):" \
    "Slurm marked node2 down after $(secs "$T_KILL" "$T_DOWN") s and requeued the job; node2's slurmd back" \
    "after $(secs "$T_KILL" "$T_BACK") s, job running again after $(secs "$T_KILL" "$T_RUNNING") s, training resumed" \
    "at step $resumed after $(secs "$T_KILL" "$T_RESUMED") s: $((done1 - resumed)) steps lost; same final state ($(elapsed))"
fi

# c and d use an external coordinator on node3 (ranks on node1 and node2): c one with the default heartbeat
# deadline (10 s), d one whose deadline (4 s) is well under SlurmdTimeout (12 s), so that the partition fails
# the attempt before Slurm would call node2 down. (A 5 s deadline in c fails the attempt while the ranks' gRPC
# channels are still backing off after the restart: see the report of issue 20.)
start_serve() {  # start_serve NAME PORT HEARTBEAT_S: appends to NAME.log; waits until it listens
  local before
  before=$(grep -c "listening on" "$D/$1.log" 2> /dev/null)
  on node3 "$Z" serve --listen "0.0.0.0:$2" --state-dir "$D/$1" --heartbeat-timeout "$3" >> "$D/$1.log" 2>&1 &
  for _ in $(seq 300); do
    [ "$(grep -c "listening on" "$D/$1.log" 2> /dev/null)" -gt "${before:-0}" ] && return 0
    sleep 0.1
  done
  fail "zerofit serve on node3 did not listen: $(tail -3 "$D/$1.log")"
}
serve_pid() { pgrep -f "^$Z serve --listen 0.0.0.0:$2 --state-dir $D/$1 "; }

# c. The coordinator on node3 killed -9 mid-job and started again there (same port and state directory).
if [[ "$PARTS" == *c* ]]; then
  SPORT=$((SLURM_PORT_BASE + 40))
  start_serve serve "$SPORT" 10
  SERVE_PID=$(serve_pid serve "$SPORT")
  spec external 2 2 '  extra: ["--nodelist=node1,node2"]'
  WORKER="$FAULTY" ZEROFIT_FAULTS="$MID_JOB_FAULTS" submit external --slurm-coordinator "node3:$SPORT" --token "$(cat "$D/serve/token")"
  wait_log "$OUT" "(checkpoint step 19)" 120
  kill -9 "$SERVE_PID" || fail "kill -9 zerofit serve"
  sleep 1
  start_serve serve "$SPORT" 10
  SERVE_PID=$(serve_pid serve "$SPORT")
  wait_state "$J" COMPLETED 180
  same_state external
  status=$(on node3 "$Z" status --state-dir "$D/serve" job-000001)
  echo "$status" | grep -q "job-000001 *external *succeeded .*\[slurm $J COMPLETED\]" ||
    { grep -v "  loss " "$OUT" | tail -30; fail "external coordinator after kill -9: $status"; }
  echo "c. zerofit serve on node3 killed -9 after step 19 and restarted: $status ($(elapsed))"
fi

# d. Partition: node2's veth down for 8 s (> the 5 s heartbeat deadline, < SlurmdTimeout), then up.
if [[ "$PARTS" == *d* ]]; then
  PPORT=$((SLURM_PORT_BASE + 41))
  start_serve serve_p "$PPORT" 4
  SERVE_P_PID=$(serve_pid serve_p "$PPORT")
  spec partition 2 2 '  extra: ["--nodelist=node1,node2"]'
  WORKER="$FAULTY" ZEROFIT_FAULTS="$MID_JOB_FAULTS" submit partition --slurm-coordinator "node3:$PPORT" --token "$(cat "$D/serve_p/token")"
  wait_log "$OUT" "(checkpoint step 19)" 120
  old=$(pgrep -f "^$FAULTY --coordinator node3:$PPORT --token-file $D/st_partition/token")
  [ "$(echo "$old" | wc -w)" = 4 ] || fail "expected the 4 ranks of attempt 1, found: $old"
  T_CUT=$(now_ms)
  "$CL" link "$D/cluster" node2 down || fail "link down"
  sleep 8
  "$CL" link "$D/cluster" node2 up || fail "link up"
  wait_log "$OUT" "attempt 2: 240 training pairs" 120
  T_RESUMED=$(now_ms)
  for p in $old; do
    [ -d "/proc/$p" ] && fail "rank process $p of attempt 1 still runs in attempt 2: $(tr '\0' ' ' < "/proc/$p/cmdline")"
  done
  wait_state "$J" COMPLETED 180
  same_state partition
  grep -v "  loss " "$OUT" | grep -i "fail\|heartbeat\|attempt 2\|restart" | head -10
  echo "d. node2 cut off for 8 s: the attempt failed, no rank of it left when attempt 2 began" \
    "$(secs "$T_CUT" "$T_RESUMED") s after the cut; same final state ($(elapsed))"
fi
# e. Shrink: node2 dies whole; the job resumes on node1 alone with 2 ranks (the header says why the reference
# is a run that shrinks by a planned path).
shrink_reference() {  # the reference (header, e): zerofit serve here, 4 ranks failing at step 22, then 2 ranks
  local port=$((SLURM_PORT_BASE + 42)) st="$D/serve_r" i
  "$Z" serve --listen "127.0.0.1:$port" --state-dir "$st" --heartbeat-timeout 2 > "$D/serve_r.log" 2>&1 &
  echo $! > "$D/serve_r.pid"  # this runs in the background: cleanup reads it
  for i in $(seq 100); do grep -q "listening on" "$D/serve_r.log" 2> /dev/null && break; sleep 0.1; done
  "$Z" submit "$D/shrink_ref.yaml" --state-dir "$st" > /dev/null || return 1
  local mpi=(mpiexec --allow-run-as-root --oversubscribe)
  export ZEROFIT_TOKEN
  ZEROFIT_TOKEN=$(cat "$st/token")
  # Rank 2 exits as step 22 starts (after the checkpoint of step 19), mpiexec ends the other ranks.
  ZEROFIT_FAULTS="rank=2,step=22,fault=exit,attempt=1" "${mpi[@]}" -n 4 -x ZEROFIT_TOKEN -x ZEROFIT_FAULTS \
    "$FAULTY" --coordinator "127.0.0.1:$port" --job job-000001 > "$D/ref_1.log" 2>&1 && return 1
  for i in $(seq 100); do  # the missed heartbeats fail attempt 1 (2 s)
    "$Z" status --state-dir "$st" job-000001 2> /dev/null | grep -q restarting && break
    sleep 0.1
  done
  "${mpi[@]}" -n 2 -x ZEROFIT_TOKEN "$WORKER" --coordinator "127.0.0.1:$port" --job job-000001 > "$D/ref_2.log" 2>&1 ||
    return 1
  "$Z" status --state-dir "$st" job-000001 > "$D/ref_status.log" 2>&1
  kill "$(cat "$D/serve_r.pid")"
}
if [[ "$PARTS" == *e* ]]; then
  T_E=$(now_ms)
  SHRINK=('  on_node_loss: shrink' '  min_nodes: 1' '  extra: ["--exclude=node3"]')
  STEPS=40 spec shrink 2 2 "${SHRINK[@]}"
  STEPS=40 spec shrink_ref 2 2 "${SHRINK[@]}"
  shrink_reference > "$D/ref.log" 2>&1 &
  REF_PID=$!
  WORKER="$FAULTY" ZEROFIT_FAULTS="rank=2,step=22,fault=hang_allgather,attempt=1" submit shrink
  grep -q "^#SBATCH --nodes=1-2$" "$D/st_shrink/sbatch.sh" || fail "no node range: $(grep nodes "$D/st_shrink/sbatch.sh")"
  # "step 22/40" is 0-based step 21: from here every rank blocks in step 22, the last checkpoint is step 19.
  wait_log "$OUT" "step 22/40 " 120
  T_KILL=$(now_ms)
  "$CL" kill-node "$D/cluster" node2 || fail "kill node2"
  wait_log "$OUT" "attempt 2: 240 training pairs" 60
  T_RESUMED=$(now_ms)
  wait_state "$J" COMPLETED 120
  for want in "attempt 2 running on 2 ranks (1 node of 2: node2 lost) from step 20: re-planned 2 x 2 micro-batches x 2 pairs = global batch 8" \
    "started: rank 1 of 2 (local 1, node 1 of 1: node1), srun, Slurm job $J (requeued 1x)" \
    "SIGTERM from Slurm: job $J requeued (lost node2 down" "2 ranks (of 4) on 1 node(s)" \
    "scontrol update JobId=$J NumNodes=1-2 NumTasks=2: the job resumes on the nodes Slurm has for it"; do
    grep -qF "$want" "$OUT" || { grep -v "  loss " "$OUT" | tail -30; fail "not in the shrunken job's output: $want"; }
  done
  status=$(on host "$Z" status --state-dir "$D/st_shrink")
  echo "$status" | grep -q "job-000001 *shrink *succeeded *attempt 2, restarts 0, checkpoint step 39, interruptions 1, on 2 of 4 ranks (1 node of 2: node2 lost) *\[slurm $J COMPLETED\]" ||
    fail "zerofit status after the shrink: $status"
  wait "$REF_PID" || { cat "$D/ref.log" "$D/ref_1.log" "$D/ref_2.log" "$D/serve_r.log" 2> /dev/null | tail -40; fail "the reference run"; }
  REF_PID=
  grep -q "succeeded *attempt 2, restarts 1" "$D/ref_status.log" || fail "the reference: $(cat "$D/ref_status.log")"
  final=$(printf "step-%08d" 40)  # the checkpoint after the last (0-based) step 39
  ls "$D/ck_shrink/$final"/rank-0000[2-9]* > /dev/null 2>&1 && fail "the shrunken job wrote more than 2 ranks' shards"
  for r in 0 1; do
    cmp "$D/ck_shrink_ref/$final/rank-0000$r.safetensors" "$D/ck_shrink/$final/rank-0000$r.safetensors" ||
      fail "shrink: rank $r's parameters/optimizer state differ from the reference that shrank by plan"
  done
  echo "--- the story in the job's output:"
  grep -v "  loss \|: data:\|zerofit_worker_faults:" "$OUT" | grep "Node failure\|requeue\|attempt [0-9]\|lost\|shrink" | head -10
  echo "e. $status"
  echo "e. node2 killed while every rank was blocked in step 22 (checkpoint step 19): training resumed on node1" \
    "with 2 ranks at step 20 after $(secs "$T_KILL" "$T_RESUMED") s: 2 steps lost; same final state as the" \
    "reference that shrank by plan (part e: $(secs "$T_E" "$(now_ms)") s; $(elapsed))"
fi
echo "PASS"
