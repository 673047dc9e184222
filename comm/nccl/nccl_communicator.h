// NCCL-backed communicator for CUDA device buffers.
//
// Collectives are enqueued on the communicator's own CUDA stream and complete asynchronously; each Work holds
// a CUDA event recorded after the collective and polls it (plus ncclCommGetAsyncError) against a deadline.
// The NCCL communicator is created non-blocking (ncclConfig_t.blocking = 0), so initialisation also honours
// the deadline; any call may return ncclInProgress before its kernel is enqueued, so each collective polls
// ncclCommGetAsyncError out of ncclInProgress (same deadline) before its completion event is recorded.
// Every CUDA/NCCL call first makes `cuda_device` current (ranks may use several threads). On a timeout or
// error the communicator calls ncclCommAbort (never waits) and becomes unusable.
//
// Callers order their own streams against ours with events (see stream()): never a device-wide sync.
// Thread-compatible: issue collectives from one thread.
#pragma once

#include <array>
#include <memory>

#include "comm/communicator.h"
#include "comm/rendezvous.h"

namespace zerofit::comm {

// The 128-byte ncclUniqueId, as plain bytes so that callers need no NCCL header to pass it around
// (it travels through MPI broadcast or the coordinator's rendezvous).
using NcclUniqueIdBytes = std::array<char, 128>;

class NcclCommunicator final : public Communicator {
 public:
  // Rank 0 calls this and distributes the id to every rank.
  static absl::StatusOr<NcclUniqueIdBytes> NewUniqueId();
  // Collective over all ranks. `cuda_device` is the local GPU index this rank uses.
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(const NcclUniqueIdBytes& id, int rank,
                                                                  int world_size, int cuda_device,
                                                                  CommOptions options = {});
  // Rank 0 makes the id and `bootstrap` (e.g. an MPI communicator) broadcasts it.
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> CreateWithBootstrap(Communicator& bootstrap,
                                                                               int cuda_device,
                                                                               CommOptions options = {});
  // Rank 0 makes the id and publishes it in `rendezvous` under `key`; the others wait for it there (up to
  // options.timeout). No MPI needed: srun/torchrun-style launches with the coordinator's key-value store.
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> CreateWithRendezvous(Rendezvous& rendezvous,
                                                                                const std::string& key,
                                                                                int rank, int world_size,
                                                                                int cuda_device,
                                                                                CommOptions options = {});
  // Idle and healthy: ncclCommFinalize polled to completion (up to 30 s or options.timeout if shorter), then
  // ncclCommDestroy.
  // Work still pending, an earlier failure, or a finalize past its deadline: ncclCommAbort (never waits).
  ~NcclCommunicator() override;

  int rank() const override;
  int world_size() const override;
  std::string backend_name() const override { return "nccl"; }
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

  // The cudaStream_t collectives run on, as an opaque pointer.
  void* stream() const;

  struct Impl;

 private:
  explicit NcclCommunicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace zerofit::comm
