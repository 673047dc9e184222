// The mpiexec command line of `zerofit run` (one host): world_size ranks of the worker, each bound to its own
// share of the host's CPUs. Open MPI binds every rank to ONE core by default (1-2 ranks: by core), so a
// rank's offload thread pool (CPU AdamW, gradient accumulation) ran 16 threads on one core: one thread's
// speed (issue 30, measured on an H200). With cpus >= world_size each rank gets cpus / world_size logical
// CPUs (`--use-hwthread-cpus --map-by slot:PE=n --bind-to hwthread`: disjoint sets, so no two ranks' pools
// compete); with fewer CPUs than ranks (oversubscribed test machines) no binding at all.
#pragma once

#include <string>
#include <vector>

namespace zerofit::launch {

struct MpiexecLaunch {
  std::string mpiexec = "mpiexec";
  int world_size = 1;
  int host_cpus = 1;                // CPUs the ranks may share (core::AllowedCpus() of the launching process)
  bool as_root = false;             // adds --allow-run-as-root (Open MPI refuses root otherwise)
  std::vector<std::string> worker;  // the rank's command line: program and arguments
};

std::vector<std::string> MpiexecCommand(const MpiexecLaunch& launch);

}  // namespace zerofit::launch
