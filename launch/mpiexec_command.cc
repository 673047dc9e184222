#include "launch/mpiexec_command.h"

#include "absl/strings/str_cat.h"

namespace zerofit::launch {

std::vector<std::string> MpiexecCommand(const MpiexecLaunch& launch) {
  std::vector<std::string> args = {launch.mpiexec, "--oversubscribe"};
  if (launch.as_root) args.push_back("--allow-run-as-root");
  const int per_rank = launch.world_size > 0 ? launch.host_cpus / launch.world_size : 0;
  if (per_rank >= 1) {
    // Logical CPUs, as core::AllowedCpus() counts them (PE counts cores unless told hardware threads).
    args.insert(args.end(), {"--use-hwthread-cpus", "--map-by", absl::StrCat("slot:PE=", per_rank),
                             "--bind-to", "hwthread"});
  } else {
    args.insert(args.end(), {"--bind-to", "none"});
  }
  args.insert(args.end(), {"-n", absl::StrCat(launch.world_size)});
  args.insert(args.end(), launch.worker.begin(), launch.worker.end());
  return args;
}

}  // namespace zerofit::launch
