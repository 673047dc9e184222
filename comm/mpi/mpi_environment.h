// RAII owner of MPI's process-wide initialisation. `main` creates exactly one and passes it down; there is
// no hidden global state in zerofit beyond what MPI itself keeps.
#pragma once

#include <memory>

#include "absl/status/statusor.h"

namespace zerofit::comm {

class MpiEnvironment {
 public:
  // Calls MPI_Init_thread(MPI_THREAD_MULTIPLE) unless MPI is already initialised (then it is not owned and
  // not finalised here). Fails if the library cannot provide MPI_THREAD_MULTIPLE: communicators run their
  // collectives on their own progress threads.
  static absl::StatusOr<std::unique_ptr<MpiEnvironment>> Init(int* argc, char*** argv);
  ~MpiEnvironment();
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }

  // Terminates every process of the job (MPI_Abort). For fatal errors in `main` after a peer may be stuck.
  [[noreturn]] void AbortJob(int exit_code) const;

 private:
  MpiEnvironment(bool owned, int rank, int size) : owned_(owned), world_rank_(rank), world_size_(size) {}
  bool owned_;
  int world_rank_;
  int world_size_;
};

}  // namespace zerofit::comm
