#include "worker/torch/train/training_backend.h"

#include <sys/resource.h>

#include "absl/strings/str_cat.h"
#include "comm/staged_communicator.h"
#include "core/status_macros.h"
#ifdef ZEROFIT_HAVE_NCCL
#include "comm/nccl/nccl_communicator.h"
#endif
#ifdef ZEROFIT_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace zerofit::worker {

absl::StatusOr<TrainingBackend> MakeTrainingBackend(device::DeviceChoice choice, int local_rank,
                                                    comm::Communicator* host, const NcclFactory& nccl,
                                                    comm::DeviceComm device_comm) {
  TrainingBackend b;
  b.host = host;
  int index = std::max(0, local_rank);
  if (choice == device::DeviceChoice::kAuto && !torch::cuda::is_available())
    choice = device::DeviceChoice::kCpu;
  if (choice == device::DeviceChoice::kCuda && !torch::cuda::is_available()) {
    return absl::FailedPreconditionError(
        "device cuda: LibTorch sees no CUDA device (a CPU-only LibTorch, or no GPU visible to this process)");
  }
  comm::DeviceCommChoice comm_choice;
  if (choice != device::DeviceChoice::kCpu && choice != device::DeviceChoice::kTest) {
    // NCCL or MPI staged through pinned memory, the same on every rank: whether any rank lacks a GPU of its
    // own is reduced over the job (comm/device_comm.h).
    const int visible = static_cast<int>(torch::cuda::device_count());
    double lacks = index >= visible ? 1.0 : 0.0;
    ZF_RETURN_IF_ERROR(
        comm::WaitFor(host->AllReduce(comm::Buffer{&lacks, 1, core::DType::kFloat64}, comm::ReduceOp::kMax),
                      host->options().timeout));
    ZF_ASSIGN_OR_RETURN(comm_choice, comm::ChooseDeviceComm(device_comm, index, visible, lacks > 0));
    index = comm_choice.cuda_device;
  }
  device::DeviceOptions o;
  o.choice = choice;
  o.index = index;
  ZF_ASSIGN_OR_RETURN(b.device, device::CreateDevice(o));
  if (b.device->kind() != device::DeviceKind::kCuda) return b;
  b.torch_device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
  if (comm_choice.staged_mpi) {
    // Ranks share GPUs: device buffers travel over the host communicator (MPI), staged through pinned
    // memory. It borrows `host` and the device (declared before device_comm in TrainingBackend: it outlives).
    ZF_ASSIGN_OR_RETURN(auto staged, comm::StagedCommunicator::Create(host, b.device.get()));
    b.device_comm = std::move(staged);
    return b;
  }
  if (nccl) {
    ZF_ASSIGN_OR_RETURN(b.device_comm, nccl(index));
    return b;
  }
#ifdef ZEROFIT_HAVE_NCCL
  ZF_ASSIGN_OR_RETURN(auto created,
                      comm::NcclCommunicator::CreateWithBootstrap(*host, index, host->options()));
  b.device_comm = std::move(created);
  return b;
#else
  return absl::FailedPreconditionError(
      "device cuda: this zerofit was built without NCCL (device communicator mpi works without it)");
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
