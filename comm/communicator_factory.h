// The one place that names the communicator implementations.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace zerofit::comm {

class MpiEnvironment;

enum class Backend { kLocal, kMpi, kNccl };

const char* BackendName(Backend b);
absl::StatusOr<Backend> ParseBackend(const std::string& name);
// The backends compiled into this build, in the order local, mpi, nccl.
std::vector<Backend> BuiltBackends();

struct CommContext {
  const MpiEnvironment* mpi = nullptr;  // required for kMpi and kNccl (bootstrap of the NCCL unique id)
  int cuda_device = 0;                  // kNccl only
};

absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(Backend backend, const CommContext& context,
                                                                 CommOptions options = {});

// The CPU communicator over all ranks of the MPI job: local when the job has one rank, mpi otherwise.
absl::StatusOr<std::unique_ptr<Communicator>> CreateHostCommunicator(const MpiEnvironment& mpi,
                                                                     CommOptions options = {});

}  // namespace zerofit::comm
