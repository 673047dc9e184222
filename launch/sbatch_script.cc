#include "launch/sbatch_script.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zerofit::launch {
namespace {

// Letters, digits and the punctuation neither bash nor sbatch gives a meaning to.
bool NeedsNoQuotes(const std::string& s) {
  return !s.empty() &&
         s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=@%+,") ==
             std::string::npos;
}

}  // namespace

std::string SbatchQuote(const std::string& s) {
  if (NeedsNoQuotes(s)) return s;
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string SlurmJobName(const std::string& job_name) {
  std::string out = "zerofit-";
  for (const char c : job_name) {
    const bool plain = absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ||
                       c == '+' || c == '-' || c == '@';
    out += plain ? c : '_';
  }
  return out;
}

std::string ShellQuote(const std::string& s) {
  if (NeedsNoQuotes(s)) return s;
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string SbatchScript(const jobspec::JobSpec& spec, const jobspec::SlurmSpec& x, const SbatchPaths& p) {
  std::string s = "#!/bin/bash\n";
  absl::StrAppend(&s, "# zerofit job '", spec.name, "' (task ", spec.task, "): ", x.nodes, " node(s) x ",
                  x.ranks_per_node(), " rank(s) = ", spec.world_size, " ranks, ", spec.training.steps,
                  " steps.\n");
  absl::StrAppend(&s, "# Written by `zerofit slurm`; submit with `sbatch ", ShellQuote(p.state_dir),
                  "/sbatch.sh` (what `zerofit submit --slurm` does).\n");
  auto opt = [&s](const std::string& name, const std::string& value) {
    absl::StrAppend(&s, "#SBATCH --", name, value.empty() ? "" : "=", value.empty() ? "" : SbatchQuote(value),
                    "\n");
  };
  opt("job-name", SlurmJobName(spec.name));
  // A range lets Slurm start a requeued job on the nodes it has left (slurm.on_node_loss: shrink).
  opt("nodes",
      x.fewest_nodes() < x.nodes ? absl::StrCat(x.fewest_nodes(), "-", x.nodes) : absl::StrCat(x.nodes));
  opt("ntasks-per-node", absl::StrCat(x.ranks_per_node()));
  if (x.gpus_per_node > 0) opt("gpus-per-node", absl::StrCat(x.gpus_per_node));
  if (x.cpus_per_task > 0) opt("cpus-per-task", absl::StrCat(x.cpus_per_task));
  if (!x.mem.empty()) opt("mem", x.mem);
  if (!x.time.empty()) opt("time", x.time);
  if (!x.partition.empty()) opt("partition", x.partition);
  if (!x.account.empty()) opt("account", x.account);
  if (!x.qos.empty()) opt("qos", x.qos);
  // B: the signal goes to the batch step only (the launcher), which relays it through the coordinator so
  // that every rank stops at the same step.
  if (x.signal_seconds > 0) opt("signal", absl::StrCat("B:USR1@", x.signal_seconds));
  opt(x.requeue ? "requeue" : "no-requeue", "");
  opt("open-mode", "append");  // a requeued run appends to the same output file
  opt("output", absl::StrCat(p.state_dir, "/slurm-%j.out"));
  opt("chdir", p.workdir);
  for (const std::string& e : x.extra) absl::StrAppend(&s, "#SBATCH ", e, "\n");
  s += "\n# The batch step runs on the first node: the coordinator starts there (its address goes to the "
       "state\n"
       "# directory), then every rank with `srun --mpi=pmix`. SIGUSR1 before the time limit: the ranks\n"
       "# checkpoint at one common step and exit with code 75, and the job requeues itself (scontrol "
       "requeue);\n"
       "# the next run resumes from that checkpoint.\n";
  std::vector<std::string> argv = {ShellQuote(p.zerofit),   "slurm-launch", "--state-dir",
                                   ShellQuote(p.state_dir), "--spec",       ShellQuote(p.spec)};
  if (!x.coordinator.empty()) {
    argv.push_back("--coordinator");
    argv.push_back(ShellQuote(x.coordinator));
  }
  if (x.port > 0) {
    argv.push_back("--port");
    argv.push_back(absl::StrCat(x.port));
  }
  if (!p.worker.empty()) {
    argv.push_back("--worker");
    argv.push_back(ShellQuote(p.worker));
  }
  if (!p.tls_ca.empty()) {
    argv.push_back("--tls-ca");
    argv.push_back(ShellQuote(p.tls_ca));
  }
  if (!p.tls_server_name.empty()) {
    argv.push_back("--tls-server-name");
    argv.push_back(ShellQuote(p.tls_server_name));
  }
  absl::StrAppend(&s, "exec ", absl::StrJoin(argv, " "), "\n");
  return s;
}

absl::StatusOr<int> AttemptWorldSize(const jobspec::JobSpec& spec, const SlurmAllocation& a) {
  int world = spec.world_size;
  if (spec.slurm && spec.slurm->on_node_loss == jobspec::NodeLoss::kShrink) {
    world = a.nodes * spec.slurm->ranks_per_node();
    const std::vector<int> allowed = jobspec::AllowedWorldSizes(spec);
    if (std::find(allowed.begin(), allowed.end(), world) == allowed.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the allocation has ", a.nodes, " node(s) x ", spec.slurm->ranks_per_node(), " ranks = ", world,
          " ranks, but job '", spec.name, "' runs on ", spec.slurm->fewest_nodes(), "..", spec.slurm->nodes,
          " nodes (slurm.min_nodes..nodes)"));
    }
  }
  if (a.tasks > 0 && a.tasks != world) {
    return absl::FailedPreconditionError(absl::StrCat("the allocation has ", a.tasks,
                                                      " tasks (SLURM_NTASKS) but job '", spec.name,
                                                      "' wants world_size ", world));
  }
  return world;
}

std::vector<std::string> RequeueRangeCommand(const std::string& scontrol, const std::string& job_id,
                                             const jobspec::SlurmSpec& x) {
  if (x.on_node_loss != jobspec::NodeLoss::kShrink || x.fewest_nodes() >= x.nodes) return {};
  return {scontrol, "update", absl::StrCat("JobId=", job_id),
          absl::StrCat("NumNodes=", x.fewest_nodes(), "-", x.nodes),
          absl::StrCat("NumTasks=", x.fewest_nodes() * x.ranks_per_node())};
}

std::vector<std::string> SrunCommand(int world_size, int nodes, int cpus_per_task, const std::string& worker,
                                     const std::string& coordinator_address, const std::string& token_file,
                                     const std::string& job_id) {
  std::vector<std::string> argv = {"srun", "--mpi=pmix", "--kill-on-bad-exit=1",
                                   absl::StrCat("--nodes=", nodes), absl::StrCat("--ntasks=", world_size)};
  if (cpus_per_task > 0) argv.push_back(absl::StrCat("--cpus-per-task=", cpus_per_task));
  for (const std::string& a : {worker, std::string("--coordinator"), coordinator_address,
                               std::string("--token-file"), token_file, std::string("--job"), job_id}) {
    argv.push_back(a);
  }
  return argv;
}

}  // namespace zerofit::launch
