// The collective-communication interface every zerofit backend implements (local, mpi, nccl).
//
// Contract shared by all backends (tests/comm/conformance_test.cc holds every backend to it):
//  - Buffers are raw memory: {data, count (ELEMENTS, not bytes), dtype, device}. The caller keeps them alive
//    and untouched until the returned Work completes.
//  - Every rank must issue the same collectives in the same order with matching counts and dtypes. With
//    CommOptions::check_collectives a backend verifies that across ranks and fails with InvalidArgument
//    instead of corrupting memory or hanging.
//  - Calls are asynchronous: they return a Work; Work::Wait(timeout) returns DeadlineExceeded if the
//    collective does not finish in time (e.g. a peer never arrives). After such a failure the communicator is
//    broken: later calls fail fast with FailedPrecondition. The abandoned collective may still complete (and
//    write its buffers) if the late peer arrives after all: keep the buffers alive or end the process.
//  - bf16 / fp16 sums are computed in fp32 and rounded once per reduction step.
//  - Abort() never blocks; it makes every pending and later call fail.
//  - Stream order (device/stream.h): a collective given a producer stream `after` reads its inputs only
//    once the work enqueued on `after` before the call has run; work that consumes its outputs on a stream
//    orders itself with Work::OrderBefore(stream). NCCL does both on the device without blocking the host;
//    the host backends (local, mpi) wait for the producer on their own progress thread and make
//    OrderBefore a host wait. `after` must outlive the Work.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/dtype.h"
#include "device/device.h"
#include "device/stream.h"

namespace zerofit::comm {

using core::DType;

enum class Device { kCpu, kCuda };
enum class ReduceOp { kSum, kMax, kMin };

struct Buffer {
  void* data = nullptr;
  size_t count = 0;  // elements
  DType dtype = DType::kFloat32;
  Device device = Device::kCpu;

  size_t bytes() const { return count * core::DTypeSize(dtype); }
};

// Where a device's memory lives, as the communicators see it: CUDA memory, or host memory (host and test
// devices).
inline Device DeviceOf(const device::Device& d) {
  return d.kind() == device::DeviceKind::kCuda ? Device::kCuda : Device::kCpu;
}

struct CommOptions {
  // Deadline for one collective, measured from the moment it is issued.
  absl::Duration timeout = absl::Minutes(5);
  // Verify before each collective that all ranks call the same operation with the same count and dtype
  // (like TORCH_DISTRIBUTED_DEBUG=DETAIL). Costs one small extra collective per call.
  bool check_collectives = false;
};

// Completion handle of one asynchronous collective. Thread-compatible: one thread waits on it.
class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the collective completes, fails, or `timeout` passes (DeadlineExceeded).
  virtual absl::Status Wait(absl::Duration timeout) = 0;
  // Non-blocking completion check (true after success or failure).
  virtual bool IsCompleted() = 0;
  // Work enqueued on `consumer` from now on runs after this collective. The host backends wait here (up
  // to `timeout`); NCCL makes the stream wait on its completion event and returns at once.
  virtual absl::Status OrderBefore(device::Stream& consumer, absl::Duration timeout) { return Wait(timeout); }
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string backend_name() const = 0;
  virtual const CommOptions& options() const = 0;

  // in.count == out.count * world_size(). Rank r receives the reduction of block r of every rank's input.
  // This is a true reduce-scatter: each rank receives only its block. `in` and `out` must not overlap.
  virtual absl::StatusOr<std::unique_ptr<Work>> ReduceScatter(Buffer in, Buffer out, ReduceOp op,
                                                              device::Stream* after = nullptr) = 0;
  // out.count == in.count * world_size(); block r of `out` is rank r's `in`. In place is allowed when
  // in.data == out.data + rank * in.bytes().
  virtual absl::StatusOr<std::unique_ptr<Work>> AllGather(Buffer in, Buffer out,
                                                          device::Stream* after = nullptr) = 0;
  // In place.
  virtual absl::StatusOr<std::unique_ptr<Work>> AllReduce(Buffer buf, ReduceOp op,
                                                          device::Stream* after = nullptr) = 0;
  // In place: every rank ends with root's contents.
  virtual absl::StatusOr<std::unique_ptr<Work>> Broadcast(Buffer buf, int root,
                                                          device::Stream* after = nullptr) = 0;
  // Returns DeadlineExceeded when some rank does not arrive within `timeout`.
  virtual absl::Status Barrier(absl::Duration timeout) = 0;
  // Never blocks. Pending and later calls fail with Aborted.
  virtual void Abort() = 0;
};

// A Work that has already finished with `status` (for backends that complete synchronously).
std::unique_ptr<Work> CompletedWork(absl::Status status = absl::OkStatus());

// Waits for the Work of a just-issued collective with the communicator's own timeout.
absl::Status WaitFor(absl::StatusOr<std::unique_ptr<Work>> work, absl::Duration timeout);

// Argument checks shared by every backend; `op_name` names the collective in the error.
absl::Status ValidateReduceScatter(const Communicator& comm, const Buffer& in, const Buffer& out);
absl::Status ValidateAllGather(const Communicator& comm, const Buffer& in, const Buffer& out);
absl::Status ValidateBuffer(const char* op_name, const Buffer& buf);
absl::Status ValidateRoot(const Communicator& comm, int root);

const char* ReduceOpName(ReduceOp op);

}  // namespace zerofit::comm
