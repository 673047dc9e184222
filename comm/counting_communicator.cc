#include "comm/counting_communicator.h"

namespace zerofit::comm {

double CommCounters::total_sent_bytes() const {
  double total = 0;
  for (double b : sent_bytes) total += b;
  return total;
}

CommCounters CountingCommunicator::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

void CountingCommunicator::ResetCounters() {
  std::lock_guard<std::mutex> lock(mu_);
  counters_ = CommCounters{};
}

// Counts only calls the wrapped communicator accepted (pipelined ring broadcast: every rank but the last
// forwards the whole buffer once, averaged per rank).
void CountingCommunicator::Add(CommCounters::Kind kind, uint64_t payload, double sent) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_.calls[kind] += 1;
  counters_.payload_bytes[kind] += payload;
  counters_.sent_bytes[kind] += sent;
}

absl::StatusOr<std::unique_ptr<Work>> CountingCommunicator::ReduceScatter(Buffer in, Buffer out, ReduceOp op,
                                                                          device::Stream* after) {
  const double w = world_size();
  auto work = inner_->ReduceScatter(in, out, op, after);
  if (work.ok()) Add(CommCounters::kReduceScatter, in.bytes(), (w - 1) / w * static_cast<double>(in.bytes()));
  return work;
}

absl::StatusOr<std::unique_ptr<Work>> CountingCommunicator::AllGather(Buffer in, Buffer out,
                                                                      device::Stream* after) {
  const double w = world_size();
  auto work = inner_->AllGather(in, out, after);
  if (work.ok()) Add(CommCounters::kAllGather, out.bytes(), (w - 1) / w * static_cast<double>(out.bytes()));
  return work;
}

absl::StatusOr<std::unique_ptr<Work>> CountingCommunicator::AllReduce(Buffer buf, ReduceOp op,
                                                                      device::Stream* after) {
  const double w = world_size();
  auto work = inner_->AllReduce(buf, op, after);
  if (work.ok())
    Add(CommCounters::kAllReduce, buf.bytes(), 2 * (w - 1) / w * static_cast<double>(buf.bytes()));
  return work;
}

absl::StatusOr<std::unique_ptr<Work>> CountingCommunicator::Broadcast(Buffer buf, int root,
                                                                      device::Stream* after) {
  const double w = world_size();
  auto work = inner_->Broadcast(buf, root, after);
  if (work.ok())
    Add(CommCounters::kBroadcast, buf.bytes(), w > 1 ? (w - 1) / w * static_cast<double>(buf.bytes()) : 0.0);
  return work;
}

absl::Status CountingCommunicator::Barrier(absl::Duration timeout) {
  absl::Status s = inner_->Barrier(timeout);
  if (s.ok()) Add(CommCounters::kBarrier, 0, 0.0);
  return s;
}

}  // namespace zerofit::comm
