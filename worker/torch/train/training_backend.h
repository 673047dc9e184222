// Where a rank trains: its device (device/: host, CUDA on cuda:<local rank>, or the test device), the
// matching LibTorch device, and the communicators: ZeRO-2's data communicator (on CUDA: NCCL, or MPI staged
// through pinned memory when ranks share GPUs, comm/device_comm.h; else the host communicator itself) and
// the host communicator for the per-step scalars and metrics.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "comm/device_comm.h"
#include "device/device.h"
#include "device/device_factory.h"

namespace zerofit::worker {

// Creates the NCCL communicator for CUDA device `cuda_device` (through MPI or the coordinator's rendezvous).
using NcclFactory = std::function<absl::StatusOr<std::unique_ptr<comm::Communicator>>(int cuda_device)>;

struct TrainingBackend {
  std::unique_ptr<device::Device> device;
  // CUDA only: NCCL, or the staged MPI communicator (which borrows `device` and `host`: declared after it).
  std::unique_ptr<comm::Communicator> device_comm;
  comm::Communicator* host = nullptr;  // not owned
  torch::Device torch_device{torch::kCPU};

  comm::Communicator* data() const { return device_comm ? device_comm.get() : host; }
};

// `local_rank` picks the GPU (cuda:<local_rank>). On CUDA, `device_comm` picks NCCL or MPI staged through
// pinned memory (auto: staged, with every rank on cuda:<local_rank mod visible GPUs>, when some rank of the
// job has no GPU of its own; a collective over `host`, so every rank calls this). For NCCL, `nccl` makes the
// communicator; without one, NCCL is bootstrapped over `host` (rank 0's unique id broadcast). kAuto uses
// CUDA only where this build has it and the GPU is visible, and LibTorch can use it too.
absl::StatusOr<TrainingBackend> MakeTrainingBackend(device::DeviceChoice choice, int local_rank,
                                                    comm::Communicator* host,
                                                    const NcclFactory& nccl = nullptr,
                                                    comm::DeviceComm device_comm = comm::DeviceComm::kAuto);

// Peak memory of this process: the CUDA caching allocator's peak allocated and reserved bytes on `device`
// (0 without a CUDA LibTorch) and the host's peak resident set.
struct PeakMemory {
  size_t device_allocated = 0;
  size_t device_reserved = 0;
  size_t host_rss = 0;
};
PeakMemory ReadPeakMemory(const torch::Device& device);

}  // namespace zerofit::worker
