#include "comm/communicator.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace zerofit::comm {

namespace {
class DoneWork final : public Work {
 public:
  explicit DoneWork(absl::Status status) : status_(std::move(status)) {}
  absl::Status Wait(absl::Duration) override { return status_; }
  bool IsCompleted() override { return true; }

 private:
  absl::Status status_;
};
}  // namespace

std::unique_ptr<Work> CompletedWork(absl::Status status) { return std::make_unique<DoneWork>(std::move(status)); }

absl::Status WaitFor(absl::StatusOr<std::unique_ptr<Work>> work, absl::Duration timeout) {
  if (!work.ok()) return work.status();
  return (*work)->Wait(timeout);
}

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "unknown";
}

absl::Status ValidateBuffer(const char* op_name, const Buffer& buf) {
  if (buf.count > 0 && buf.data == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(op_name, ": buffer of ", buf.count, " elements has a null data pointer"));
  }
  return absl::OkStatus();
}

absl::Status ValidateReduceScatter(const Communicator& comm, const Buffer& in, const Buffer& out) {
  ZF_RETURN_IF_ERROR(ValidateBuffer("ReduceScatter input", in));
  ZF_RETURN_IF_ERROR(ValidateBuffer("ReduceScatter output", out));
  if (in.dtype != out.dtype) {
    return absl::InvalidArgumentError(absl::StrCat("ReduceScatter: input dtype ", core::DTypeName(in.dtype),
                                                   " != output dtype ", core::DTypeName(out.dtype)));
  }
  if (in.device != out.device) return absl::InvalidArgumentError("ReduceScatter: input and output devices differ");
  const size_t world = static_cast<size_t>(comm.world_size());
  if (in.count != out.count * world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReduceScatter: input has ", in.count, " elements but output has ", out.count, " and world size is ",
        world, "; the input must hold exactly output.count * world_size = ", out.count * world, " elements"));
  }
  const char* in_p = static_cast<const char*>(in.data);
  const char* out_p = static_cast<const char*>(out.data);
  if (out.count > 0 && in_p < out_p + out.bytes() && out_p < in_p + in.bytes()) {
    return absl::InvalidArgumentError("ReduceScatter: input and output buffers overlap");
  }
  return absl::OkStatus();
}

absl::Status ValidateAllGather(const Communicator& comm, const Buffer& in, const Buffer& out) {
  ZF_RETURN_IF_ERROR(ValidateBuffer("AllGather input", in));
  ZF_RETURN_IF_ERROR(ValidateBuffer("AllGather output", out));
  if (in.dtype != out.dtype) {
    return absl::InvalidArgumentError(absl::StrCat("AllGather: input dtype ", core::DTypeName(in.dtype),
                                                   " != output dtype ", core::DTypeName(out.dtype)));
  }
  if (in.device != out.device) return absl::InvalidArgumentError("AllGather: input and output devices differ");
  const size_t world = static_cast<size_t>(comm.world_size());
  if (out.count != in.count * world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AllGather: output has ", out.count, " elements but input has ", in.count, " and world size is ", world,
        "; the output must hold exactly input.count * world_size = ", in.count * world, " elements"));
  }
  const char* in_p = static_cast<const char*>(in.data);
  const char* out_p = static_cast<const char*>(out.data);
  const bool overlaps = in.count > 0 && in_p < out_p + out.bytes() && out_p < in_p + in.bytes();
  if (overlaps && in_p != out_p + static_cast<size_t>(comm.rank()) * in.bytes()) {
    return absl::InvalidArgumentError(
        "AllGather: input overlaps output but is not this rank's block of it (in-place needs "
        "in.data == out.data + rank * in.bytes())");
  }
  return absl::OkStatus();
}

absl::Status ValidateRoot(const Communicator& comm, int root) {
  if (root < 0 || root >= comm.world_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Broadcast: root ", root, " is outside [0, ", comm.world_size(), ")"));
  }
  return absl::OkStatus();
}

}  // namespace zerofit::comm
