#include "core/cpu_affinity.h"

#include <sched.h>

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"

namespace zerofit::core {

int AllowedCpus() {
  // A set for up to 4096 CPUs: the fixed cpu_set_t (1024) is too small on the largest hosts.
  constexpr int kMaxCpus = 4096;
  cpu_set_t* set = CPU_ALLOC(kMaxCpus);
  const size_t bytes = CPU_ALLOC_SIZE(kMaxCpus);
  int count = 0;
  if (set != nullptr && sched_getaffinity(0, bytes, set) == 0) count = CPU_COUNT_S(bytes, set);
  if (set != nullptr) CPU_FREE(set);
  if (count > 0) return count;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

int ThreadsOrAllowedCpus(int threads) { return threads >= 1 ? threads : AllowedCpus(); }

absl::Status CheckThreadsFitCpus(absl::string_view what, int threads, int cpus) {
  if (threads <= cpus) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      what, ": ", threads, " threads, but this process may run on only ", cpus,
      " CPU(s) (its affinity mask), so they share them. The launcher set that mask: Open MPI's mpiexec binds "
      "each rank to one core unless given --bind-to none or --map-by slot:PE=<cores per rank> --bind-to "
      "core; srun gives each task --cpus-per-task CPUs."));
}

}  // namespace zerofit::core
