// `zerofit run job.yaml`: the one-command local run. An embedded coordinator (loopback, its own token) takes
// the job; the workers are started with mpiexec; their logs stream to the terminal; when an attempt fails
// (a worker killed, out of memory, missed heartbeats) the job restarts from its last checkpoint, up to
// max_restarts.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "jobspec/job_spec.h"

namespace CLI {
class App;
}

namespace zerofit::cli {

struct RunFlags {
  std::string spec_path;
  std::string state_dir;  // default: a fresh directory under $TMPDIR
  std::string worker;     // zerofit_worker binary (default: the one built next to this zerofit)
  std::string mpiexec = "mpiexec";
  double heartbeat_timeout_s = 30;
  // Replace the checkpoints an earlier zerofit job left in the spec's checkpoint.dir (only folders with
  // zerofit's owner marker), as the spec's checkpoint.overwrite does.
  bool overwrite_checkpoints = false;
  // Continue from the checkpoint an earlier job left in checkpoint.dir, as the spec's checkpoint.resume does.
  bool resume = false;
};

CLI::App* AddRunCommand(CLI::App& app, RunFlags* flags);
absl::Status RunRun(const RunFlags& flags);

// What a finished job left behind, as the last lines `zerofit run` prints: the exported model, the last
// checkpoint (`checkpoint_note`, e.g. " (step 399)"), the metrics file and the TensorBoard directory.
std::string RunOutputs(const jobspec::JobSpec& spec, const std::string& checkpoint_note);

}  // namespace zerofit::cli
