#include "worker/torch/train/training_backend.h"

#include <sys/resource.h>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#ifdef ZEROFIT_HAVE_NCCL
#include "comm/nccl/nccl_communicator.h"
#endif
#ifdef ZEROFIT_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace zerofit::worker {

absl::StatusOr<TrainingBackend> MakeTrainingBackend(device::DeviceChoice choice, int local_rank,
                                                    comm::Communicator* host, const NcclFactory& nccl) {
  TrainingBackend b;
  b.host = host;
  const int index = std::max(0, local_rank);
  if (choice == device::DeviceChoice::kAuto && !torch::cuda::is_available())
    choice = device::DeviceChoice::kCpu;
  if (choice == device::DeviceChoice::kCuda && !torch::cuda::is_available()) {
    return absl::FailedPreconditionError(
        "device cuda: LibTorch sees no CUDA device (a CPU-only LibTorch, or no GPU visible to this process)");
  }
  device::DeviceOptions o;
  o.choice = choice;
  o.index = index;
  ZF_ASSIGN_OR_RETURN(b.device, device::CreateDevice(o));
  if (b.device->kind() != device::DeviceKind::kCuda) return b;
  b.torch_device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
  if (nccl) {
    ZF_ASSIGN_OR_RETURN(b.nccl, nccl(index));
    return b;
  }
#ifdef ZEROFIT_HAVE_NCCL
  ZF_ASSIGN_OR_RETURN(auto created,
                      comm::NcclCommunicator::CreateWithBootstrap(*host, index, host->options()));
  b.nccl = std::move(created);
  return b;
#else
  return absl::FailedPreconditionError("device cuda: this zerofit was built without NCCL");
#endif
}

PeakMemory ReadPeakMemory(const torch::Device& device) {
  PeakMemory m;
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) == 0) m.host_rss = static_cast<size_t>(usage.ru_maxrss) * 1024;
#ifdef ZEROFIT_TORCH_CUDA
  if (device.is_cuda()) {
    namespace alloc = c10::cuda::CUDACachingAllocator;
    const auto stats = alloc::getDeviceStats(device.index());
    const size_t all = static_cast<size_t>(c10::cuda::CUDACachingAllocator::StatType::AGGREGATE);
    m.device_allocated = static_cast<size_t>(stats.allocated_bytes[all].peak);
    m.device_reserved = static_cast<size_t>(stats.reserved_bytes[all].peak);
  }
#endif
  return m;
}

}  // namespace zerofit::worker
