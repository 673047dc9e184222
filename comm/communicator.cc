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

std::unique_ptr<Work> CompletedWork(absl::Status status) {
  return std::make_unique<DoneWork>(std::move(status));
}

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

namespace {

// Checks shared by the two-buffer collectives: both buffers usable, same dtype and device, and `big` (the
// side holding world_size blocks) exactly world_size times `small`.
absl::Status ValidatePair(const Communicator& comm, const char* op, const Buffer& in, const Buffer& out,
                          const Buffer& small, const Buffer& big, const char* small_name,
                          const char* big_name) {
  ZF_RETURN_IF_ERROR(ValidateBuffer(absl::StrCat(op, " input").c_str(), in));
  ZF_RETURN_IF_ERROR(ValidateBuffer(absl::StrCat(op, " output").c_str(), out));
  if (in.dtype != out.dtype) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": input dtype ", core::DTypeName(in.dtype),
                                                   " != output dtype ", core::DTypeName(out.dtype)));
  }
  if (in.device != out.device)
    return absl::InvalidArgumentError(absl::StrCat(op, ": input and output devices differ"));
  const size_t world = static_cast<size_t>(comm.world_size());
  if (big.count != small.count * world) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", big_name, " has ", big.count, " elements but ", small_name, " has ",
                     small.count, " and world size is ", world, "; the ", big_name, " must hold exactly ",
                     small_name, ".count * world_size = ", small.count * world, " elements"));
  }
  return absl::OkStatus();
}

bool Overlap(const Buffer& a, const Buffer& b) {
  const char* pa = static_cast<const char*>(a.data);
  const char* pb = static_cast<const char*>(b.data);
  return a.count > 0 && b.count > 0 && pa < pb + b.bytes() && pb < pa + a.bytes();
}

}  // namespace

absl::Status ValidateReduceScatter(const Communicator& comm, const Buffer& in, const Buffer& out) {
  ZF_RETURN_IF_ERROR(ValidatePair(comm, "ReduceScatter", in, out, out, in, "output", "input"));
  if (Overlap(in, out)) return absl::InvalidArgumentError("ReduceScatter: input and output buffers overlap");
  return absl::OkStatus();
}

absl::Status ValidateAllGather(const Communicator& comm, const Buffer& in, const Buffer& out) {
  ZF_RETURN_IF_ERROR(ValidatePair(comm, "AllGather", in, out, in, out, "input", "output"));
  if (Overlap(in, out) &&
      static_cast<const char*>(in.data) != static_cast<const char*>(out.data) + comm.rank() * in.bytes()) {
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
