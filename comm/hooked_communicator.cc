#include "comm/hooked_communicator.h"

#include "absl/strings/str_cat.h"

namespace zerofit::comm {

absl::StatusOr<std::unique_ptr<Work>> HookedCommunicator::ReduceScatter(Buffer in, Buffer out, ReduceOp op,
                                                                        device::Stream* after) {
  if (absl::Status s = hook_(*this, "reduce_scatter"); !s.ok()) return s;
  return inner_->ReduceScatter(in, out, op, after);
}

absl::StatusOr<std::unique_ptr<Work>> HookedCommunicator::AllGather(Buffer in, Buffer out,
                                                                    device::Stream* after) {
  if (absl::Status s = hook_(*this, "all_gather"); !s.ok()) return s;
  return inner_->AllGather(in, out, after);
}

absl::StatusOr<std::unique_ptr<Work>> HookedCommunicator::AllReduce(Buffer buf, ReduceOp op,
                                                                    device::Stream* after) {
  if (absl::Status s = hook_(*this, "all_reduce"); !s.ok()) return s;
  return inner_->AllReduce(buf, op, after);
}

absl::StatusOr<std::unique_ptr<Work>> HookedCommunicator::Broadcast(Buffer buf, int root,
                                                                    device::Stream* after) {
  if (absl::Status s = hook_(*this, "broadcast"); !s.ok()) return s;
  return inner_->Broadcast(buf, root, after);
}

absl::Status HookedCommunicator::Barrier(absl::Duration timeout) {
  if (absl::Status s = hook_(*this, "barrier"); !s.ok()) return s;
  return inner_->Barrier(timeout);
}

void HookedCommunicator::Abort() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
  }
  cv_.notify_all();
  inner_->Abort();
}

absl::Status HookedCommunicator::WaitForAbort(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [this] { return aborted_; })) {
    return absl::AbortedError(absl::StrCat("rank ", rank(), ": communicator aborted"));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("rank ", rank(), ": not aborted within ", absl::FormatDuration(timeout)));
}

}  // namespace zerofit::comm
