// OpenMPI-backed communicator for CPU buffers.
//
// Every collective is queued to one progress thread per communicator, which issues the MPI non-blocking
// collective (MPI_Ireduce_scatter_block, MPI_Iallgather, ...) on a private duplicate of MPI_COMM_WORLD and
// polls it against the deadline. This gives (a) real overlap: the caller's thread keeps computing while the
// progress thread drives MPI; (b) deadlines: a rank that never arrives yields DeadlineExceeded instead of a
// hang; (c) one issue order per communicator, which MPI's matching rules require.
//
// bf16 / fp16 travel as 2-byte opaque MPI types with user reduction ops that accumulate in fp32 and round
// once per reduction step (MPI has no bf16 type).
//
// Thread-safety: all public methods may be called from any thread; collectives are issued in call order.
#pragma once

#include <memory>

#include "comm/communicator.h"
#include "comm/mpi/mpi_environment.h"

namespace zerofit::comm {

class MpiCommunicator final : public Communicator {
 public:
  // Duplicates MPI_COMM_WORLD. Collective over all ranks of the job.
  static absl::StatusOr<std::unique_ptr<MpiCommunicator>> Create(const MpiEnvironment& env,
                                                                 CommOptions options = {});
  // Stops the progress thread. A collective still in flight is given a bounded grace period (at most 10 s)
  // and then abandoned, so destruction never hangs.
  ~MpiCommunicator() override;

  int rank() const override;
  int world_size() const override;
  std::string backend_name() const override { return "mpi"; }
  const CommOptions& options() const override;

  absl::StatusOr<std::unique_ptr<Work>> ReduceScatter(Buffer in, Buffer out, ReduceOp op,
                                                      device::Stream* after = nullptr) override;
  absl::StatusOr<std::unique_ptr<Work>> AllGather(Buffer in, Buffer out,
                                                  device::Stream* after = nullptr) override;
  absl::StatusOr<std::unique_ptr<Work>> AllReduce(Buffer buf, ReduceOp op,
                                                  device::Stream* after = nullptr) override;
  absl::StatusOr<std::unique_ptr<Work>> Broadcast(Buffer buf, int root,
                                                  device::Stream* after = nullptr) override;
  absl::Status Barrier(absl::Duration timeout) override;
  void Abort() override;

  struct Impl;

 private:
  explicit MpiCommunicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace zerofit::comm
