// The sbatch script of a zerofit job: #SBATCH lines from the job's Slurm section (nothing cluster-specific
// is invented: an empty field is left to Slurm's defaults), and a batch step that execs
// `zerofit slurm-launch`, which starts the coordinator on the first node and the ranks with
// `srun --mpi=pmix` (cli/slurm_launch.h). Pure: the same inputs give the same text.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "jobspec/job_spec.h"
#include "launch/launch_env.h"

namespace zerofit::launch {

struct SbatchPaths {
  std::string zerofit;    // absolute path of the zerofit binary (every node must see it)
  std::string state_dir;  // absolute: job store, token, spec snapshot, script, slurm-%j.out
  std::string spec;       // absolute: the job spec the allocation runs (the snapshot in state_dir)
  std::string workdir;    // absolute: --chdir (relative paths in the spec resolve against it)
  std::string worker;     // zerofit_worker; empty: the one built with zerofit
  // An external coordinator that serves TLS: its CA (absolute path) and, optionally, the name its
  // certificate carries; passed on to slurm-launch, which passes them to every rank.
  std::string tls_ca = "", tls_server_name = "";
};

std::string SbatchScript(const jobspec::JobSpec& spec, const jobspec::SlurmSpec& slurm,
                         const SbatchPaths& paths);

// The srun command line that starts one attempt's ranks inside the allocation: `world_size` tasks over
// `nodes` nodes (the allocation's tasks per node), one rank each, MPI wired by PMIx. `cpus_per_task` 0
// leaves it to Slurm (since 22.05 srun does not inherit the batch's --cpus-per-task: pass
// SLURM_CPUS_PER_TASK).
std::vector<std::string> SrunCommand(int world_size, int nodes, int cpus_per_task, const std::string& worker,
                                     const std::string& coordinator_address, const std::string& token_file,
                                     const std::string& job_id);

// The ranks an attempt runs on in this allocation. With slurm.on_node_loss: shrink, the allocation's node
// count (sbatch --nodes=MIN-MAX: a requeued job may get fewer) x the spec's ranks per node, which must be a
// world size the job allows; otherwise the spec's world size. Either must match SLURM_NTASKS when set.
absl::StatusOr<int> AttemptWorldSize(const jobspec::JobSpec& spec, const SlurmAllocation& allocation);

// What a shrinking job's batch step runs when Slurm requeues the job (a node was lost): Slurm keeps the
// node and task counts of the allocation it ran on (NumNodes=2 NumTasks=4 for a 2 x 2 job), so the requeued
// job would wait for as many nodes again; this gives the range back (NumNodes=MIN-MAX NumTasks=MIN x ranks
// per node), and Slurm starts it on as many nodes of the range as it has. Empty for a job that waits.
std::vector<std::string> RequeueRangeCommand(const std::string& scontrol, const std::string& job_id,
                                             const jobspec::SlurmSpec& slurm);

// `s` quoted for bash ('...' with embedded quotes escaped).
std::string ShellQuote(const std::string& s);

// `s` as one argument of an `#SBATCH` line, which sbatch splits at whitespace, with '...' or "..." grouping,
// a backslash escaping the next character and an unquoted '#' starting a comment: as it is when every
// character is plain, else in double quotes with '"' and '\' escaped.
std::string SbatchQuote(const std::string& s);

// The Slurm job name of a zerofit job: "zerofit-" and the job's name with every character but letters,
// digits and ._+-@ replaced by '_' (an `#SBATCH` line is split at whitespace, and squeue prints the name).
std::string SlurmJobName(const std::string& job_name);

}  // namespace zerofit::launch
