#!/usr/bin/env bash
# CPU time of a ctest run and of everything it starts, daemons included (the slurm tier's slurmctld, slurmd
# and the ranks they start are not the test's children): the run goes into a cgroup v1 cpuacct group of
# its own. Root only. Prints wall seconds, CPU seconds and the average number of busy cores.
#   bench/ctest_cpu.sh BUILD_DIR [ctest arguments...]      e.g. bench/ctest_cpu.sh build -j 2 -L slurm
# Slurm's processes stay in the group because the test clusters use proctrack/linuxproc and task/none
# (deploy/slurm/local_cluster.sh); network namespaces do not change a process's cgroup.
set -euo pipefail
build=$1
shift
acct=/sys/fs/cgroup/cpuacct
[[ -d $acct ]] || { echo "ctest_cpu.sh: no cgroup v1 cpuacct hierarchy at $acct" >&2; exit 2; }
group=$acct/zerofit-ctest-$$
mkdir "$group"
trap 'rmdir "$group" 2> /dev/null || true' EXIT
start=$(date +%s.%N)
rc=0
bash -c "echo \$\$ > '$group/tasks' && cd '$build' && exec ctest $(printf '%q ' "$@")" || rc=$?
end=$(date +%s.%N)
cpu_ns=$(cat "$group/cpuacct.usage")
awk -v w="$(echo "$end - $start" | bc)" -v c="$cpu_ns" 'BEGIN {
  printf "ctest_cpu.sh: %.1f s wall, %.1f CPU-seconds, %.2f cores busy on average\n", w, c / 1e9, c / 1e9 / w }'
exit $rc
