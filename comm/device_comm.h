// Which communicator carries a rank's device buffers (ZeRO-2's gradients and parameters) on CUDA, and on
// which GPU the rank trains.
//
// NCCL needs one GPU per rank: it refuses two ranks on one device. When more ranks run on a node than it has
// GPUs (a one-GPU machine running 2-4 ranks, e.g. `mpiexec -n 4` or `torchrun --nproc_per_node 4` for a
// multi-rank test), the device buffers go over MPI instead, staged through pinned host memory
// (comm/staged_communicator.h), and the ranks share the GPUs: rank with local rank r trains on
// cuda:<r mod visible GPUs> (so every rank on cuda:0 with one GPU). That is what `auto` picks; `mpi` forces
// the staged path (also with a GPU per rank, e.g. to compare with NCCL), `nccl` forbids it (an error, not a
// silent fallback, where a rank has no GPU of its own). Like torch's `backend=` of init_process_group, it is
// one value for the whole job.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"

namespace zerofit::comm {

enum class DeviceComm { kAuto, kNccl, kMpi };

// "auto", "nccl", "mpi" (InvalidArgument naming the accepted values otherwise).
absl::StatusOr<DeviceComm> ParseDeviceComm(std::string_view text);
const char* DeviceCommName(DeviceComm c);

struct DeviceCommChoice {
  bool staged_mpi = false;  // true: MPI staged through pinned memory; false: NCCL
  int cuda_device = 0;      // the GPU this rank trains on
};

// `local_rank`: this rank's index on its node; `visible_gpus` (> 0): the GPUs this process sees;
// `some_rank_lacks_gpu`: whether any rank of the job has local_rank >= its visible GPUs (the same answer on
// every rank: the caller reduces it over the job, so that all ranks pick the same communicator).
absl::StatusOr<DeviceCommChoice> ChooseDeviceComm(DeviceComm requested, int local_rank, int visible_gpus,
                                                  bool some_rank_lacks_gpu);

}  // namespace zerofit::comm
