// A decorator that forwards to another communicator and tallies, per collective kind, how many calls were
// made and how many bytes this rank sends under the bandwidth-optimal (ring) algorithm that NCCL and MPI use
// for large messages:
//   ReduceScatter: (W-1)/W * input bytes      AllGather: (W-1)/W * output bytes
//   AllReduce:   2(W-1)/W * buffer bytes      Broadcast: (W-1)/W * buffer bytes (pipelined ring, per rank)
// These are the "bus bytes" of nccl-tests. They are a model of the wire traffic, not a packet capture; what
// they prove is which collectives were issued, on how many bytes (e.g. a true reduce-scatter vs all-reduce).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

#include "comm/communicator.h"

namespace zerofit::comm {

struct CommCounters {
  enum Kind { kReduceScatter = 0, kAllGather, kAllReduce, kBroadcast, kBarrier, kNumKinds };
  std::array<uint64_t, kNumKinds> calls{};
  std::array<uint64_t, kNumKinds> payload_bytes{};  // bytes of the user buffer (input for RS, output for AG)
  std::array<double, kNumKinds> sent_bytes{};       // ring-model bytes this rank sends

  double total_sent_bytes() const;
};

// Thread-safe counters; forwarding has the wrapped communicator's thread-safety.
class CountingCommunicator final : public Communicator {
 public:
  explicit CountingCommunicator(Communicator* inner) : inner_(inner) {}

  CommCounters counters() const;
  void ResetCounters();

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  std::string backend_name() const override { return "counting(" + inner_->backend_name() + ")"; }
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
  void Abort() override { inner_->Abort(); }

 private:
  void Add(CommCounters::Kind kind, uint64_t payload, double sent);

  Communicator* inner_;  // not owned
  mutable std::mutex mu_;
  CommCounters counters_;  // guarded by mu_
};

}  // namespace zerofit::comm
