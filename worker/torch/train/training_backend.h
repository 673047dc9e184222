// Where a rank trains: its device (device/: host, CUDA on cuda:<local rank>, or the test device), the
// matching LibTorch device, and the communicators: ZeRO-2's data communicator (NCCL on CUDA, else the host
// communicator itself) and the host communicator for the per-step scalars and metrics.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "device/device.h"
#include "device/device_factory.h"

namespace zerofit::worker {

// Creates the NCCL communicator for CUDA device `cuda_device` (through MPI or the coordinator's rendezvous).
using NcclFactory = std::function<absl::StatusOr<std::unique_ptr<comm::Communicator>>(int cuda_device)>;

struct TrainingBackend {
  std::unique_ptr<device::Device> device;
  std::unique_ptr<comm::Communicator> nccl;  // CUDA only
  comm::Communicator* host = nullptr;        // not owned
  torch::Device torch_device{torch::kCPU};

  comm::Communicator* data() const { return nccl ? nccl.get() : host; }
};

// `local_rank` picks the GPU (cuda:<local_rank>). On CUDA, `nccl` makes the data communicator; without one,
// NCCL is bootstrapped over `host` (rank 0's unique id broadcast). kAuto uses CUDA only where this build
// has it and the GPU is visible, and LibTorch can use it too.
absl::StatusOr<TrainingBackend> MakeTrainingBackend(device::DeviceChoice choice, int local_rank,
                                                    comm::Communicator* host,
                                                    const NcclFactory& nccl = nullptr);

// Peak memory of this process: the CUDA caching allocator's peak allocated and reserved bytes on `device`
// (0 without a CUDA LibTorch) and the host's peak resident set.
struct PeakMemory {
  size_t device_allocated = 0;
  size_t device_reserved = 0;
  size_t host_rss = 0;
};
PeakMemory ReadPeakMemory(const torch::Device& device);

}  // namespace zerofit::worker
