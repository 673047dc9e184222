#!/bin/bash
# Two local Slurm clusters of 2 nodes each (deploy/slurm/local_cluster.sh), side by side on this machine, each
# running one batch job of RUNS sruns of the same 4-rank MPI program (the two quick MPI cases of
# comm_conformance_test) over PMIx. Both clusters name their nodes node1 and node2 and number jobs and steps
# from 1 and 0, so their steps have the same names; this shows whether one cluster's ranks can see the
# other's (Open MPI's shared-memory segments are named by host name and a hash of the job and step ids).
#
# usage: concurrent_clusters_stress.sh BUILD_DIR OUT_DIR [RUNS (default 100)] [LOCAL_CLUSTER_SH]
#   As root. LOCAL_CLUSTER_SH: the cluster script to use (default this checkout's; give an older one, e.g.
#   `git show REV:deploy/slurm/local_cluster.sh > old.sh`, to compare). An srun still running 60 s after the
#   other cluster's job ended (or 120 s + 10 s a run after its start) counts as hung and is cancelled.
#   Other OMPI_MCA_* settings in the environment reach the ranks (sbatch and srun pass it on); ZF_PORT_BASE
#   sets the clusters' Slurm ports (default: a random one of 28817 + 100k, the second cluster 50 above).
#   Prints per cluster: sruns passed, failed, of which a rank died of SIGSEGV, and hung; OUT_DIR/cK/ keeps
#   each failed srun's output and any core.
set -u
if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD_DIR OUT_DIR [RUNS] [LOCAL_CLUSTER_SH]" >&2
  exit 2
fi
BUILD=$(realpath "$1")
mkdir -p "$2"
OUT=$(realpath "$2")
RUNS=${3:-100}
SRC=$(realpath "$(dirname "$0")/../..")
CL=$(realpath "${4:-$SRC/deploy/slurm/local_cluster.sh}")
PROGRAM="$BUILD/tests/comm_conformance_test"
[ -x "$PROGRAM" ] || { echo "no $PROGRAM" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (slurmd, munged, network namespaces)"; exit 77; }
ulimit -c unlimited

cat > "$OUT/job.sh" << 'JOB'
#!/bin/bash
# One cluster's batch job: RUNS sruns, a line each in summary, a failed one's output kept.
ulimit -c unlimited
cd "$JOB_OUT" || exit 1
for i in $(seq 1 "$RUNS"); do
  srun --mpi=pmix --kill-on-bad-exit=1 --nodes=2 --ntasks=4 --cpus-per-task=1 \
    "$PROGRAM" --gtest_filter='*AllReduceSumMaxMin/mpi:*BarrierCompletes/mpi' > srun.log 2>&1
  rc=$?
  echo "srun $i rc=$rc" >> summary
  [ "$rc" = 0 ] || cp srun.log "fail$i.log"
done
JOB
chmod +x "$OUT/job.sh"

cluster() {  # cluster K PORT_BASE: start cluster K, run its job, print its figures, stop it
  local k=$1 d="$OUT/c$1/cluster" job
  rm -rf "$OUT/c$k"
  mkdir -p "$OUT/c$k"
  SLURM_PORT_BASE=$2 "$CL" start "$d" --nodes 2 > "$OUT/c$k/cluster.log" 2>&1 || { echo "cluster $k: start failed"; return 1; }
  export SLURM_CONF="$d/slurm.conf" JOB_OUT="$OUT/c$k" RUNS PROGRAM
  # Open MPI between the nodes as multinode_e2e.sh sets it: ob1 over TCP on the bridge, shared memory within.
  export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp
  OMPI_MCA_btl_tcp_if_include="10.231.$(cat "$d/net/x").0/24"
  export OMPI_MCA_btl_tcp_if_include
  job=$(sbatch --parsable --nodes=2 --ntasks=4 --cpus-per-task=1 --time=60 -o "$OUT/c$k/slurm-%j.out" \
    --chdir "$OUT/c$k" "$OUT/job.sh")
  local deadline=$(($(date +%s) + 120 + RUNS * 10))
  while squeue -h -j "$job" 2> /dev/null | grep -q .; do
    # The other cluster done for 60 s and this one still running, or both past any plausible time: hung.
    if { [ -f "$OUT/done" ] && (($(date +%s) - $(stat -c %Y "$OUT/done") > 60)); } || (($(date +%s) > deadline)); then
      scancel --full "$job"
      echo hung > "$OUT/c$k/hung"
      break
    fi
    sleep 3
  done
  touch "$OUT/done"
  local passed failed segv hung=0
  passed=$(grep -c "rc=0$" "$OUT/c$k/summary" 2> /dev/null)
  failed=$(grep -vc "rc=0$" "$OUT/c$k/summary" 2> /dev/null)
  segv=$(grep -l "Segmentation fault\|signal 11" "$OUT/c$k"/fail*.log 2> /dev/null | wc -l)
  [ -f "$OUT/c$k/hung" ] && hung=1
  echo "cluster $k: ${passed:-0} sruns passed, ${failed:-0} failed (SIGSEGV in $segv), $hung hung"
  "$CL" stop "$d" > /dev/null 2>&1
}

rm -f "$OUT/done"
port=${ZF_PORT_BASE:-$((28817 + RANDOM % 20 * 100))}
cluster 1 "$port" > "$OUT/c1.result" &
cluster 2 $((port + 50)) > "$OUT/c2.result" &
wait
cat "$OUT/c1.result" "$OUT/c2.result"
