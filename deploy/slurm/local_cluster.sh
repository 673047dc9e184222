#!/bin/bash
# A local Slurm cluster on this machine, for trying zerofit's Slurm path and for its `slurm` tests (root only).
#
# One node (the default):
#   deploy/slurm/local_cluster.sh start DIR   # writes DIR/slurm.conf from `slurmd -C`, starts munged,
#                                             # slurmctld and slurmd (as root), waits until the node is idle
#   deploy/slurm/local_cluster.sh stop DIR    # stops the three daemons it started (pid files in DIR)
#   export SLURM_CONF=DIR/slurm.conf          # for sbatch / srun / squeue / scontrol / zerofit
#
# Several nodes (N = 2..9), each a network namespace of its own:
#   deploy/slurm/local_cluster.sh start DIR --nodes N
#       a bridge zfbr<X> in this (the root) network namespace with 10.231.<X>.1/24, where X derives from a hash
#       of DIR and is moved on until no address or route of this machine uses 10.231.<X>.0/24 (so two clusters,
#       or a real network, do not clash); nodes node1..nodeN, each with a network namespace bound to
#       DIR/ns/nodeI.net, a veth pair (zf<X>n<I> on the bridge, eth0 = 10.231.<X>.(10+I) inside), its own host
#       name (UTS namespace) and DIR/hosts bind-mounted over /etc/hosts in a mount namespace of its own (the
#       machine's /etc/hosts is never touched), where /dev/shm is the node's own too
#       (/dev/shm/zerofit-cluster-<X>/nodeI); one slurmd per node (`slurmd -N nodeI`, per-node spool, pid
#       file and log through %n). slurmctld and munged run in the root namespace as in the one-node mode;
#       slurmctld listens on the bridge address, which the nodes reach.
#   deploy/slurm/local_cluster.sh exec DIR NODE CMD...   # CMD on nodeI (its net/UTS/mount namespaces), or on
#       NODE=host: the root network namespace with DIR/hosts as /etc/hosts (node names resolve there too)
#   deploy/slurm/local_cluster.sh kill-node DIR NODE     # SIGKILL every process in the node's namespace
#   deploy/slurm/local_cluster.sh start-node DIR NODE    # start the node's slurmd again
#   deploy/slurm/local_cluster.sh link DIR NODE up|down  # the node's veth (host side): a network partition
#   deploy/slurm/local_cluster.sh stop DIR   # kills every process in each node namespace and the daemons by
#       their pid files, deletes the veths, the bridge and the namespace bind mounts: nothing is left behind.
#       `start` runs it first when DIR holds a cluster from before (a crash).
# The timeouts are small so that tests see failures in seconds: SlurmdTimeout=12 (a node that does not answer
# for 12 s is DOWN and its jobs are requeued), MessageTimeout=5, TCPTimeout=3, KillWait=5, sched_interval=2 (a requeued
# job starts again within seconds of becoming eligible, not at the next 60 s scheduler pass), and
# ReturnToService=2 (a node whose slurmd comes back is usable again at once). Each node claims 4 CPUs whatever
# the machine has (SlurmdParameters=config_overrides): the tests oversubscribe a 2-core machine with tiny jobs.
#
# Everything lives in DIR: its own munge key and socket, state, spool, logs, and ports (SLURM_PORT_BASE,
# default 26817/26818), so it does not touch a system Slurm or munge. Needs slurm-wlm and munge
# (apt-get install slurm-wlm munge), and iproute2 / util-linux (ip, unshare, nsenter) for several nodes.
set -euo pipefail

usage() {
  echo "usage: $0 start DIR [--nodes N] | stop DIR | exec DIR NODE CMD... | kill-node DIR NODE |" \
    "start-node DIR NODE | link DIR NODE up|down" >&2
  exit 2
}
cmd=${1:-}
dir=${2:-}
[[ -n "$cmd" && -n "$dir" ]] || usage
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

start_munge() {
  for tool in munged slurmctld slurmd sinfo; do
    command -v "$tool" >/dev/null || { echo "$tool not found: apt-get install slurm-wlm munge" >&2; exit 1; }
  done
  mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log"
  chmod 700 "$dir/munge"
  [[ -f "$dir/munge/munge.key" ]] || { dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none; }
  chmod 600 "$dir/munge/munge.key"
  munged --force --socket="$dir/munge/socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed"
}

# The slurm.conf lines both modes share; $1 = SlurmctldHost's address.
common_conf() {
  cat <<CONF
ClusterName=zerofit-local
SlurmctldHost=$(hostname -s)($1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
# cred_expire also sets how long a requeued job waits before it may start again (default 120 s).
AuthInfo=socket=$dir/munge/socket,cred_expire=${SLURM_CRED_EXPIRE:-15}
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmctldPidFile=$dir/slurmctld.pid
SlurmctldLogFile=$dir/log/slurmctld.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobRequeue=1
MinJobAge=3600
SchedulerType=sched/builtin
CONF
}

wait_idle() {  # wait_idle COUNT: until COUNT nodes are idle
  local idle=0
  for _ in $(seq 1 150); do
    idle=$(sinfo -h -N -o %T 2>/dev/null | grep -c '^idle' || true)
    [[ "$idle" -ge "$1" ]] && return 0
    sleep 0.2
  done
  echo "$idle of $1 node(s) became idle (sinfo: $(sinfo -h -N -o '%N %T' 2>&1 | tr '\n' ' ')); logs in $dir/log" >&2
  tail -20 "$dir"/log/*.log >&2 || true
  return 1
}

start_one_node() {
  start_munge
  local host node
  host=$(hostname -s)
  node=$(slurmd -C | head -1)  # NodeName=<host> CPUs=... RealMemory=...
  {
    echo "# One-node cluster written by deploy/slurm/local_cluster.sh"
    common_conf 127.0.0.1
    cat <<CONF
SlurmdSpoolDir=$dir/spool
SlurmdPidFile=$dir/slurmd.pid
SlurmdLogFile=$dir/log/slurmd.log
KillWait=10
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
  } > "$dir/slurm.conf"
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -f "$SLURM_CONF"
  slurmd -f "$SLURM_CONF"
  wait_idle 1
  echo "local Slurm cluster up: $host idle (SLURM_CONF=$SLURM_CONF)"
}

# ---- several nodes ----------------------------------------------------------------------------------------

net_x() { cat "$dir/net/x"; }
node_index() {  # nodeI -> I, checked against the cluster's size
  local n=${1#node}
  [[ "$1" == node* && "$n" =~ ^[1-9]$ && "$n" -le "$(cat "$dir/net/nodes")" ]] ||
    { echo "no node '$1' in the cluster in $dir (node1..node$(cat "$dir/net/nodes"))" >&2; exit 2; }
  echo "$n"
}

# A free 10.231.X.0/24: X from a hash of DIR, moved on past any X this machine already has an address or a
# route in (another cluster's bridge, a real network).
pick_subnet() {
  local x used
  x=$(($(printf '%s' "$dir" | cksum | cut -d' ' -f1) % 250 + 2))
  used=$(ip -4 -o addr show; ip -4 route show table all)
  for _ in $(seq 1 250); do
    if ! grep -q "10\.231\.$x\." <<<"$used" && ! ip link show "zfbr$x" >/dev/null 2>&1; then
      echo "$x"
      return 0
    fi
    x=$((x % 250 + 2))
  done
  echo "no free 10.231.X.0/24 for the cluster's bridge" >&2
  exit 1
}

# in_node I CMD...: CMD in nodeI's network namespace, with a UTS namespace (host name nodeI) and a mount
# namespace of its own (both end with the last process in them): DIR/hosts over /etc/hosts, DIR/tmp/nodeI
# over DIR/nodetmp, the cluster's TmpFS, so that each node has a temporary directory of its own as real nodes
# do (Slurm's PMIx plugin makes /tmp-like directories named by job and step only, which nodes would share),
# and a shared-memory folder of its own over /dev/shm (node_shm): Open MPI names its shared-memory segments
# there by host name and job id, and the job id is a hash of Slurm's job and step ids, which repeat in a
# requeued job and in every new cluster. Sharing the machine's /dev/shm, two clusters' same-numbered steps
# opened each other's segments: ranks crashed on the other job's fragments, or hung (BENCHMARKS.md, "Local
# clusters side by side, and a crash inside MPI_Init"); a killed node's segments waited there for its next
# step of the same ids. A real node has its own /dev/shm, emptied when it boots.
# shellcheck disable=SC2016  # the inner script's $1.. are its own arguments
in_node() {
  local i=$1
  shift
  nsenter --net="$dir/ns/node$i.net" unshare --uts --mount --propagation private -- \
    bash -c 'mount --bind "$1" /etc/hosts && mount --bind "$2" "$3" && mount --bind "$4" /dev/shm &&
             hostname "$5" && shift 5 && exec "$@"' \
    in_node "$dir/hosts" "$dir/tmp/node$i" "$dir/nodetmp" "$(node_shm "$i")" "node$i" "$@"
}

# The cluster's shared-memory folders: one per node in the machine's /dev/shm (tmpfs, as /dev/shm is), named
# by the cluster's bridge number, which no other running cluster has.
cluster_shm() { echo "/dev/shm/zerofit-cluster-$(net_x)"; }
node_shm() { echo "$(cluster_shm)/node$1"; }

# The pids of every process in nodeI's network namespace (its slurmd, step daemons, ranks...).
node_pids() {
  local ns pid
  ns="net:[$(stat -L -c %i "$dir/ns/node$1.net")]"
  for pid in /proc/[0-9]*; do
    [[ "$(readlink "$pid/ns/net" 2>/dev/null)" == "$ns" ]] && echo "${pid#/proc/}"
  done
  return 0
}

kill_node() {
  local pids
  pids=$(node_pids "$1")
  # shellcheck disable=SC2086  # one pid per word
  [[ -z "$pids" ]] || kill -9 $pids 2>/dev/null || true
  for _ in $(seq 1 50); do
    [[ -z "$(node_pids "$1")" ]] && return 0
    sleep 0.1
  done
  echo "processes left in node$1's namespace: $(node_pids "$1" | tr '\n' ' ')" >&2
  return 1
}

# A node that starts is a node that booted: nothing of it runs, its temporary directory and /dev/shm start
# empty and its spool holds no PMIx directories or sockets of dead step daemons (a killed node leaves them
# behind, in TmpFS and in the spool, and a requeued job keeps its id: its step 0 would find them and fail to
# launch there).
start_slurmd() {  # start_slurmd I
  [[ ! -e "$dir/ns/node$1.net" || -z "$(node_pids "$1")" ]] ||
    { echo "node$1 still runs processes ($(node_pids "$1" | tr '\n' ' ')): kill-node it first" >&2; exit 1; }
  rm -rf "$dir/tmp/node$1" "$(node_shm "$1")"
  rm -rf "$dir/spool/node$1"/pmix.*
  [[ ! -d "$dir/spool/node$1" ]] || find "$dir/spool/node$1" -type s -delete
  mkdir -p "$dir/spool/node$1" "$dir/tmp/node$1" "$dir/nodetmp" "$(node_shm "$1")"
  chmod 1777 "$(node_shm "$1")"
  in_node "$1" slurmd -f "$dir/slurm.conf" -N "node$1"
}

start_nodes() {  # start_nodes N
  local n=$1 x i host
  [[ "$n" =~ ^[2-9]$ ]] || { echo "--nodes: 2 to 9 nodes (got '$n'); leave it out for one node" >&2; exit 2; }
  for tool in ip unshare nsenter; do
    command -v "$tool" >/dev/null || { echo "$tool not found (iproute2, util-linux)" >&2; exit 1; }
  done
  x=$(pick_subnet)
  mkdir -p "$dir/net" "$dir/ns"
  echo "$x" > "$dir/net/x"
  echo "$n" > "$dir/net/nodes"
  host=$(hostname -s)
  ip link add "zfbr$x" type bridge
  ip addr add "10.231.$x.1/24" dev "zfbr$x"
  ip link set "zfbr$x" up
  printf '127.0.0.1 localhost\n10.231.%s.1 %s\n' "$x" "$host" > "$dir/hosts"
  for i in $(seq 1 "$n"); do
    touch "$dir/ns/node$i.net"
    unshare --net="$dir/ns/node$i.net" true
    nsenter --net="$dir/ns/node$i.net" ip link add eth0 type veth peer name "zf${x}n$i" netns $$
    ip link set "zf${x}n$i" master "zfbr$x" up
    nsenter --net="$dir/ns/node$i.net" ip addr add "10.231.$x.$((10 + i))/24" dev eth0
    nsenter --net="$dir/ns/node$i.net" ip link set eth0 up
    nsenter --net="$dir/ns/node$i.net" ip link set lo up
    echo "10.231.$x.$((10 + i)) node$i" >> "$dir/hosts"
  done
  start_munge
  {
    echo "# $n-node cluster in network namespaces, written by deploy/slurm/local_cluster.sh"
    common_conf "10.231.$x.1"
    cat <<CONF
SlurmdSpoolDir=$dir/spool/%n
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmdLogFile=$dir/log/slurmd-%n.log
SlurmdParameters=config_overrides
TmpFS=$dir/nodetmp
SlurmdTimeout=12
MessageTimeout=5
TCPTimeout=3
KillWait=5
# A requeued job may start again once cred_expire has passed, but only the periodic scheduler pass notices
# (every 60 s by default): every 2 s here.
SchedulerParameters=sched_interval=2
CONF
    for i in $(seq 1 "$n"); do
      echo "NodeName=node$i NodeAddr=10.231.$x.$((10 + i)) CPUs=4 RealMemory=2000 State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
  } > "$dir/slurm.conf"
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -f "$SLURM_CONF"
  for i in $(seq 1 "$n"); do start_slurmd "$i"; done
  wait_idle "$n"
  echo "local Slurm cluster up: node1..node$n on zfbr$x 10.231.$x.0/24 (SLURM_CONF=$SLURM_CONF)"
}

stop_nodes() {
  local x n i
  x=$(net_x)
  n=$(cat "$dir/net/nodes")
  for i in $(seq 1 "$n"); do
    if [[ -e "$dir/ns/node$i.net" ]] && mountpoint -q "$dir/ns/node$i.net"; then
      kill_node "$i" || true
      umount "$dir/ns/node$i.net"
    fi
    rm -f "$dir/ns/node$i.net" "$dir/slurmd-node$i.pid"
    ip link del "zf${x}n$i" 2>/dev/null || true  # usually gone with its namespace
  done
  ip link del "zfbr$x" 2>/dev/null || true
  rm -rf "$(cluster_shm)" "$dir/net" "$dir/ns" "$dir/tmp" "$dir/nodetmp"
}

stop_all() {
  [[ -f "$dir/net/x" ]] && stop_nodes
  stop_pid slurmd "$dir/slurmd.pid"
  stop_pid slurmctld "$dir/slurmctld.pid"
  stop_pid munged "$dir/munge/munged.pid"
}

case "$cmd" in
start)
  nodes=1
  if [[ $# -ge 3 ]]; then
    [[ "$3" == --nodes && $# -eq 4 ]] || usage
    nodes=$4
  fi
  [[ -f "$dir/net/x" || -f "$dir/slurmctld.pid" ]] && { echo "cleaning up a cluster from before in $dir" >&2; stop_all; }
  if [[ "$nodes" == 1 ]]; then start_one_node; else start_nodes "$nodes"; fi
  ;;
stop)
  stop_all
  ;;
exec)
  [[ $# -ge 4 ]] || usage
  node=$3
  shift 3
  if [[ "$node" == host ]]; then
    # shellcheck disable=SC2016  # the inner script's $1.. are its own arguments
    exec unshare --mount --propagation private -- bash -c 'mount --bind "$1" /etc/hosts && shift && exec "$@"' \
      exec_host "$dir/hosts" "$@"
  fi
  i=$(node_index "$node")
  in_node "$i" "$@"
  ;;
kill-node)
  [[ $# -eq 3 ]] || usage
  kill_node "$(node_index "$3")"
  ;;
start-node)
  [[ $# -eq 3 ]] || usage
  start_slurmd "$(node_index "$3")"
  ;;
link)
  [[ $# -eq 4 && ( "$4" == up || "$4" == down ) ]] || usage
  ip link set "zf$(net_x)n$(node_index "$3")" "$4"
  ;;
*)
  usage
  ;;
esac
