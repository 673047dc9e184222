// A decorator that calls a hook on the calling thread before each collective is issued, then forwards.
// zerofit_worker's hook notes each collective in the rank's activity (worker/loop/rank_activity.h: what the
// coordinator's progress watchdog quotes when a rank hangs); the test-only fault-injection worker's hook can
// also make one collective hang until Abort() (worker/loop/fault_plan.h). A hook's error fails the call
// without issuing it, so a hang simulated here behaves, for this rank, like a collective whose peer never
// arrives: it ends only by Abort() or a deadline.
//
// Thread-safety: the wrapped communicator's; the hook must be as thread-safe as the callers need.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "comm/communicator.h"

namespace zerofit::comm {

class HookedCommunicator final : public Communicator {
 public:
  // `op`: "reduce_scatter", "all_gather", "all_reduce", "broadcast" or "barrier".
  using Hook = std::function<absl::Status(HookedCommunicator& self, const char* op)>;

  HookedCommunicator(Communicator* inner, Hook hook) : inner_(inner), hook_(std::move(hook)) {}

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  std::string backend_name() const override { return "hooked(" + inner_->backend_name() + ")"; }
  const CommOptions& options() const override { return inner_->options(); }

  absl::StatusOr<std::unique_ptr<Work>> ReduceScatter(Buffer in, Buffer out, ReduceOp op,
                                                      device::Stream* after = nullptr) override;
  absl::StatusOr<std::unique_ptr<Work>> AllGather(Buffer in, Buffer out,
                                                  device::Stream* after = nullptr) override;
  absl::StatusOr<std::unique_ptr<Work>> AllReduce(Buffer buf, ReduceOp op,
                                                  device::Stream* after = nullptr) override;
  absl::StatusOr<std::unique_ptr<Work>> Broadcast(Buffer buf, int root,
                                                  device::Stream* after = nullptr) override;
  absl::Status Barrier(absl::Duration timeout) override;
  // Never blocks: wakes every WaitForAbort, then aborts the wrapped communicator.
  void Abort() override;

  // Blocks until Abort() (then Aborted) or `timeout` (then DeadlineExceeded). For hooks.
  absl::Status WaitForAbort(absl::Duration timeout);

 private:
  Communicator* inner_;  // not owned
  Hook hook_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool aborted_ = false;  // guarded by mu_
};

}  // namespace zerofit::comm
