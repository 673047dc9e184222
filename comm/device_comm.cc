#include "comm/device_comm.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace zerofit::comm {

absl::StatusOr<DeviceComm> ParseDeviceComm(std::string_view text) {
  for (DeviceComm c : {DeviceComm::kAuto, DeviceComm::kNccl, DeviceComm::kMpi}) {
    if (text == DeviceCommName(c)) return c;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown device communicator '", std::string(text),
                                                 "'; expected one of: auto, nccl, mpi"));
}

const char* DeviceCommName(DeviceComm c) {
  switch (c) {
    case DeviceComm::kAuto:
      return "auto";
    case DeviceComm::kNccl:
      return "nccl";
    case DeviceComm::kMpi:
      return "mpi";
  }
  return "unknown";
}

absl::StatusOr<DeviceCommChoice> ChooseDeviceComm(DeviceComm requested, int local_rank, int visible_gpus,
                                                  bool some_rank_lacks_gpu) {
  if (visible_gpus <= 0) return absl::FailedPreconditionError("no CUDA device visible to this process");
  local_rank = std::max(0, local_rank);
  DeviceCommChoice c;
  c.staged_mpi = requested == DeviceComm::kMpi || (requested == DeviceComm::kAuto && some_rank_lacks_gpu);
  if (!c.staged_mpi && local_rank >= visible_gpus) {
    return absl::FailedPreconditionError(
        absl::StrCat("local rank ", local_rank, " has no GPU of its own (", visible_gpus,
                     " visible) and NCCL refuses two ranks on one GPU: run at most ", visible_gpus,
                     " ranks per node, or use device communicator mpi (auto picks it)"));
  }
  c.cuda_device = c.staged_mpi ? local_rank % visible_gpus : local_rank;
  return c;
}

}  // namespace zerofit::comm
