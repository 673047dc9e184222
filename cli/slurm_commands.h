// Slurm: `zerofit slurm job.yaml` prepares a job's state directory and writes its sbatch script;
// `zerofit submit --slurm job.yaml` also submits it with sbatch; `zerofit slurm-launch` is what the script
// runs on the first node of the allocation (embedded coordinator + `srun --mpi=pmix` workers, SIGUSR1 ->
// checkpoint + requeue). docs/slurm.md.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace CLI {
class App;
}

namespace zerofit::cli {

// Flags of `zerofit slurm` and `zerofit submit --slurm`: each overrides the spec's slurm: field.
struct SlurmFlags {
  std::string spec_path;
  bool submit = false;  // submit --slurm
  std::optional<int> nodes, gpus_per_node, tasks_per_node, cpus_per_task, signal_seconds, port, min_nodes;
  std::string on_node_loss;  // wait | shrink; empty: the spec's
  std::string mem, time, partition, account, qos, state_dir, coordinator, worker;
  std::string token;                    // an external coordinator's bearer token (submit --token)
  std::string tls_ca, tls_server_name;  // an external coordinator that serves TLS (submit --tls-ca)
  std::string sbatch = "sbatch";
};

struct SlurmLaunchFlags {
  std::string state_dir, spec, coordinator, worker;
  std::string tls_ca, tls_server_name;  // the external coordinator serves TLS: its CA; passed to the ranks
  int port = 0;
  double heartbeat_timeout_s = 30;
  std::string srun = "srun", scontrol = "scontrol";
};

CLI::App* AddSlurmCommand(CLI::App& app, SlurmFlags* flags);
// The Slurm override flags (all but --state-dir, which `submit` has already) on `zerofit submit --slurm`.
void AddSlurmSubmitFlags(CLI::App* submit, SlurmFlags* flags);
CLI::App* AddSlurmLaunchCommand(CLI::App& app, SlurmLaunchFlags* flags);

// Prepares the state directory (token, spec snapshot, sbatch.sh) and prints the script; with flags.submit
// also runs sbatch and records the Slurm job id.
absl::Status RunSlurm(const SlurmFlags& flags);
// Returns the process exit code: 0 (job succeeded), 1 (failed or cancelled), 75 (preempted and requeued),
// 143 (stopped by SIGTERM: scancel, an outside requeue, the time limit).
absl::StatusOr<int> RunSlurmLaunch(const SlurmLaunchFlags& flags);

// "RUNNING", "PENDING", "COMPLETED"... from squeue, else scontrol; "unknown (...)" when Slurm does not know
// the job (any more).
std::string SlurmJobState(const std::string& slurm_job_id);

}  // namespace zerofit::cli
