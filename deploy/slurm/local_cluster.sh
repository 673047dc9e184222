#!/bin/bash
# A one-node Slurm cluster on this machine, for trying zerofit's Slurm path and for its `slurm` tests:
#   deploy/slurm/local_cluster.sh start DIR   # writes DIR/slurm.conf from `slurmd -C`, starts munged,
#                                             # slurmctld and slurmd (as root), waits until the node is idle
#   deploy/slurm/local_cluster.sh stop DIR    # stops the three daemons it started (pid files in DIR)
#   export SLURM_CONF=DIR/slurm.conf          # for sbatch / srun / squeue / scontrol / zerofit
# Everything lives in DIR: its own munge key and socket, state, spool, logs, and ports (SLURM_PORT_BASE,
# default 26817/26818), so it does not touch a system Slurm or munge. Needs slurm-wlm and munge
# (apt-get install slurm-wlm munge).
set -euo pipefail

cmd=${1:-}
dir=${2:-}
if [[ -z "$cmd" || -z "$dir" ]]; then
  echo "usage: $0 start|stop DIR" >&2
  exit 2
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
port=${SLURM_PORT_BASE:-26817}

stop_pid() {  # name pidfile
  local pidfile=$2
  [[ -f "$pidfile" ]] || return 0
  local pid
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      echo "$1 ($pid) did not stop on SIGTERM: SIGKILL" >&2
      kill -9 "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$pidfile"
}

case "$cmd" in
start)
  for tool in munged slurmctld slurmd slurmd sinfo; do
    command -v "$tool" >/dev/null || { echo "$tool not found: apt-get install slurm-wlm munge" >&2; exit 1; }
  done
  mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log"
  chmod 700 "$dir/munge"
  [[ -f "$dir/munge/munge.key" ]] || { dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none; }
  chmod 600 "$dir/munge/munge.key"
  munged --force --socket="$dir/munge/socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed"
  host=$(hostname -s)
  node=$(slurmd -C | head -1)  # NodeName=<host> CPUs=... RealMemory=...
  cat > "$dir/slurm.conf" <<CONF
# One-node cluster written by deploy/slurm/local_cluster.sh
ClusterName=zerofit-local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
# cred_expire also sets how long a requeued job waits before it may start again (default 120 s).
AuthInfo=socket=$dir/munge/socket,cred_expire=${SLURM_CRED_EXPIRE:-15}
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobRequeue=1
KillWait=10
MinJobAge=3600
SchedulerType=sched/builtin
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -f "$SLURM_CONF"
  slurmd -f "$SLURM_CONF"
  for _ in $(seq 1 150); do
    state=$(sinfo -h -o %T 2>/dev/null || true)
    if [[ "$state" == idle* ]]; then
      echo "local Slurm cluster up: $host idle (SLURM_CONF=$SLURM_CONF)"
      exit 0
    fi
    sleep 0.2
  done
  echo "the node did not become idle (sinfo: '${state:-}'); logs in $dir/log" >&2
  tail -20 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
  exit 1
  ;;
stop)
  stop_pid slurmd "$dir/slurmd.pid"
  stop_pid slurmctld "$dir/slurmctld.pid"
  stop_pid munged "$dir/munge/munged.pid"
  ;;
*)
  echo "usage: $0 start|stop DIR" >&2
  exit 2
  ;;
esac
