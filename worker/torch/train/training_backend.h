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

// Peak memory of a rank over a window (a training step: ResetPeakMemory at its start, ReadPeakMemory at its
// end), in bytes.
//  - device_allocated / device_reserved: the rank's device peak. On CUDA, the CUDA caching allocator's peak
//    allocated (tensors) and reserved (what it holds from the driver) bytes on the rank's GPU, each plus
//    device_seam; on the test device (which stands for a device; LibTorch computes on the CPU), device_seam
//    alone; 0 on the host, whose "device" memory is host memory (host_rss counts it).
//  - device_seam: the peak of what zerofit's device seam (device::Device::Allocate: ZeRO-2's flat parameter
//    and gradient buffers, the reduce-scatter landing and staging buffers, the optimizer state when not
//    offloaded) holds on the device. It allocates with cudaMalloc outside the caching allocator, so the
//    allocator's figures miss it; the sum is what `zerofit plan` predicts as the device peak (its probe adds
//    the same two parts). The seam allocates its buffers before the first step and does not free them during
//    one, so the sum is the step's peak; were the seam to allocate inside a step, the sum would be an upper
//    bound that exceeds the true peak by at most that allocation.
//  - host_rss: the process's peak resident set since it started (getrusage; it cannot be reset).
struct PeakMemory {
  size_t device_allocated = 0;
  size_t device_reserved = 0;
  size_t device_seam = 0;
  size_t host_rss = 0;
};

// Starts a window: resets the peak statistics of the CUDA caching allocator on backend.torch_device (when it
// is a CUDA device of a CUDA LibTorch) and of the device seam. May throw c10::Error (a CUDA LibTorch whose
// allocator has not been initialised on that device).
void ResetPeakMemory(const TrainingBackend& backend);
// The peaks since the last ResetPeakMemory (see PeakMemory).
PeakMemory ReadPeakMemory(const TrainingBackend& backend);
// Without a backend: the caching allocator's peaks on `device` since its last reset (0 unless `device` is a
// CUDA device of a CUDA LibTorch; no seam bytes) and the host's peak resident set.
PeakMemory ReadPeakMemory(const torch::Device& device);

}  // namespace zerofit::worker
