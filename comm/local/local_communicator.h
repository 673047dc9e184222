// World-size-1 communicator: every collective is a local copy (or nothing). Needs no MPI; used by
// single-process runs and as the reference backend in tests.
#pragma once

#include <atomic>

#include "comm/communicator.h"

namespace zerofit::comm {

// Thread-compatible. CPU buffers only.
class LocalCommunicator final : public Communicator {
 public:
  explicit LocalCommunicator(CommOptions options = {}) : options_(options) {}

  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string backend_name() const override { return "local"; }
  const CommOptions& options() const override { return options_; }

  absl::StatusOr<std::unique_ptr<Work>> ReduceScatter(Buffer in, Buffer out, ReduceOp op,
                                                      device::Stream* after = nullptr) override;
  absl::StatusOr<std::unique_ptr<Work>> AllGather(Buffer in, Buffer out,
                                                  device::Stream* after = nullptr) override;
  absl::StatusOr<std::unique_ptr<Work>> AllReduce(Buffer buf, ReduceOp op,
                                                  device::Stream* after = nullptr) override;
  absl::StatusOr<std::unique_ptr<Work>> Broadcast(Buffer buf, int root,
                                                  device::Stream* after = nullptr) override;
  absl::Status Barrier(absl::Duration timeout) override;
  void Abort() override { aborted_ = true; }

 private:
  absl::Status CheckUsable(const Buffer& buf, device::Stream* after) const;

  CommOptions options_;
  std::atomic<bool> aborted_{false};
};

}  // namespace zerofit::comm
