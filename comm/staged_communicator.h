// StagedCommunicator: device buffers over a host communicator, staged through pinned host memory.
//
// Why: NCCL refuses two ranks on one GPU, so several ranks that share a device (a one-GPU machine running
// 2-4 ranks as a test mode, local ranks > visible GPUs) cannot use it. This decorator lets them use MPI
// (or any host backend) with device memory: each staged collective
//   1. on the decorator's input stream, waits for `after` (an event, never a host wait) and copies the
//      device input into a pinned host staging block,
//   2. hands the staging block to the host communicator with that input stream as its producer (so the
//      host backend's progress thread waits for the copy, not the caller),
//   3. on completion, a completion thread of the decorator enqueues the copy of the result back into the
//      device buffer on the decorator's output stream, waits for it, and only then completes the Work.
//      Only what the collective changes comes back: not an in-place all-gather's own slot, not a
//      broadcast root's buffer (MPI and NCCL leave those untouched too, and ZeRO-2 relies on it).
// The contract of communicator.h holds: Work::Wait returns once the device buffer holds the result;
// Work::OrderBefore(consumer) waits on the host until the host collective is done (as the host backends
// do) and then makes `consumer` wait for the copy back with an event, without waiting for the copy itself.
// Deadlines are the host communicator's (options().timeout from the call), errors of the copies break the
// communicator like a failed collective (later calls fail with FailedPrecondition), and Abort() aborts the
// host communicator too, so a pending collective returns at once.
//
// Which buffers are staged: the decorator is built with the Device whose memory it stages, and stages every
// buffer whose Buffer::device tag is DeviceOf(device): on CUDA the kCuda buffers, while kCpu buffers (host
// scalars, pinned offload memory) pass through to the host communicator untouched. The host and test devices
// tag their memory kCpu, so there every buffer is staged: that is what lets the CPU tests drive the whole
// staging path (copies on the test device's delayed streams, events, the pool) without a GPU, and it stays
// correct for plain host memory, which those devices' streams copy like their own.
//
// Staging memory: pinned host blocks from device.Allocate(kPinned), kept in a pool and reused across calls;
// a collective takes the smallest free block that fits (a new, larger one when none does, dropping a free
// block too small to serve), and gives it back once its copy back has run. So the pool holds as many blocks
// as collectives were in flight at once, each as large as the largest such collective. A block that a failed
// or aborted host collective may still write (MPI cannot cancel a collective) is never reused or freed: it
// is leaked on purpose, like the MPI backend's abandoned requests.
//
// Thread-safety: all public methods may be called from any thread; collectives are issued to the host
// communicator in call order.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "device/device.h"

namespace zerofit::comm {

struct StagingStats {
  size_t staged_calls = 0;          // collectives whose buffers went through staging
  size_t passed_through_calls = 0;  // collectives on host buffers, handed on untouched
  size_t blocks = 0;                // staging blocks the pool holds now (free or in use)
  size_t block_allocations = 0;     // blocks ever allocated (reuse keeps this at the in-flight maximum)
  size_t bytes = 0;                 // bytes of the blocks the pool holds now
  size_t pinned_bytes = 0;          // of those, bytes the OS actually page-locked
};

class StagedCommunicator final : public Communicator {
 public:
  // Borrows `host` (a host-buffer communicator: mpi or local) and `device`; both must outlive the decorator.
  static absl::StatusOr<std::unique_ptr<StagedCommunicator>> Create(Communicator* host,
                                                                    device::Device* device);
  // Owns `host`.
  static absl::StatusOr<std::unique_ptr<StagedCommunicator>> Create(std::unique_ptr<Communicator> host,
                                                                    device::Device* device);
  // Stops the completion thread: collectives still pending are given their deadline, at most 10 s, then
  // fail; the decorator's streams are drained (bounded by the host communicator's timeout).
  ~StagedCommunicator() override;

  int rank() const override;
  int world_size() const override;
  // "<host backend>+staged", e.g. "mpi+staged".
  std::string backend_name() const override;
  const CommOptions& options() const override;

  absl::StatusOr<std::unique_ptr<Work>> ReduceScatter(Buffer in, Buffer out, ReduceOp op,
                                                      device::Stream* after = nullptr) override;
  absl::StatusOr<std::unique_ptr<Work>> AllGather(Buffer in, Buffer out,
                                                  device::Stream* after = nullptr) override;
  absl::StatusOr<std::unique_ptr<Work>> AllReduce(Buffer buf, ReduceOp op,
                                                  device::Stream* after = nullptr) override;
  absl::StatusOr<std::unique_ptr<Work>> Broadcast(Buffer buf, int root,
                                                  device::Stream* after = nullptr) override;
  // The host communicator's barrier (issued after every collective called before it).
  absl::Status Barrier(absl::Duration timeout) override;
  // Never blocks; aborts the host communicator too.
  void Abort() override;

  StagingStats stats() const;
  // Whether a buffer of `where` is staged (see the header comment).
  bool Stages(Device where) const;

  struct Impl;

 private:
  explicit StagedCommunicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace zerofit::comm
