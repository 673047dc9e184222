#include "comm/local/local_communicator.h"

#include <cstring>

#include "core/status_macros.h"

namespace zerofit::comm {

absl::Status LocalCommunicator::CheckUsable(const Buffer& buf, device::Stream* after) const {
  if (aborted_) return absl::AbortedError("local communicator was aborted");
  if (buf.device != Device::kCpu) return absl::InvalidArgumentError("local communicator: CPU buffers only");
  // The copy runs inline: the producer's work must have run first.
  if (after != nullptr) return after->Synchronize(options_.timeout);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Work>> LocalCommunicator::ReduceScatter(Buffer in, Buffer out, ReduceOp,
                                                                       device::Stream* after) {
  ZF_RETURN_IF_ERROR(CheckUsable(in, after));
  ZF_RETURN_IF_ERROR(ValidateReduceScatter(*this, in, out));
  if (out.count > 0) std::memcpy(out.data, in.data, out.bytes());
  return CompletedWork();
}

absl::StatusOr<std::unique_ptr<Work>> LocalCommunicator::AllGather(Buffer in, Buffer out,
                                                                   device::Stream* after) {
  ZF_RETURN_IF_ERROR(CheckUsable(in, after));
  ZF_RETURN_IF_ERROR(ValidateAllGather(*this, in, out));
  if (in.count > 0 && in.data != out.data) std::memcpy(out.data, in.data, in.bytes());
  return CompletedWork();
}

absl::StatusOr<std::unique_ptr<Work>> LocalCommunicator::AllReduce(Buffer buf, ReduceOp,
                                                                   device::Stream* after) {
  ZF_RETURN_IF_ERROR(CheckUsable(buf, after));
  ZF_RETURN_IF_ERROR(ValidateBuffer("AllReduce", buf));
  return CompletedWork();
}

absl::StatusOr<std::unique_ptr<Work>> LocalCommunicator::Broadcast(Buffer buf, int root,
                                                                   device::Stream* after) {
  ZF_RETURN_IF_ERROR(CheckUsable(buf, after));
  ZF_RETURN_IF_ERROR(ValidateBuffer("Broadcast", buf));
  ZF_RETURN_IF_ERROR(ValidateRoot(*this, root));
  return CompletedWork();
}

absl::Status LocalCommunicator::Barrier(absl::Duration) {
  if (aborted_) return absl::AbortedError("local communicator was aborted");
  return absl::OkStatus();
}

}  // namespace zerofit::comm
