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
#include <torch/version.h>
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

#ifdef ZEROFIT_TORCH_CUDA
namespace {

namespace cuda_alloc = c10::cuda::CUDACachingAllocator;
// The namespace that declares the caching allocator's StatType (AGGREGATE, SMALL_POOL, LARGE_POOL), where
// LibTorch versions differ:
//  - 1.13 and the 2.x before the move: c10::cuda::CUDACachingAllocator. (Debian 12's 1.13 is a CPU build, so
//    no build here compiles this branch; its CUDA headers accept it: g++ -fsyntax-only with
//    -DZEROFIT_TORCH_CUDA and a stand-in for the generated c10/cuda/impl/cuda_cmake_macros.h, 2026-11-26.)
//  - 2.6 (Debian 13's CUDA build, compiled by the torch 2.x CUDA compile tier: scripts/
//    torch_cuda_compile_check.sh): c10/core/CachingDeviceAllocator.h declares Stat, StatType and DeviceStats
//    in c10::CachingDeviceAllocator; CUDACachingAllocator keeps only `using ...::DeviceStats`, so its
//    StatType is gone (issue 28: "StatType has not been declared" against pip's 2.11).
//  - 2.11 (pip's; not downloadable here, so read in pytorch's source with the code-search tools: pytorch/
//    pytorch's c10/core/CachingDeviceAllocator.h at 017943b7, a 2.9+ tree with c10::DeviceAllocator, and a
//    line-by-line copy of a recent c10/cuda/CUDACachingAllocator.h, the one with OomRejectionObserver; the
//    stored copy of that file in pytorch/pytorch itself was a 2.2-era one): Stat and StatType moved on to
//    c10::CachingAllocator (c10/core/Allocator.h) and CachingDeviceAllocator.h says `using namespace
//    c10::CachingAllocator;`, so the qualified name c10::CachingDeviceAllocator::StatType still finds it
//    (qualified lookup follows using-directives); getDeviceStats and resetPeakStats stay inline functions of
//    c10::cuda::CUDACachingAllocator taking a c10::DeviceIndex (1.13: int; device.index() converts to both),
//    and CUDACachingAllocator keeps `using c10::CachingDeviceAllocator::DeviceStats` "for BC reasons".
// The test is the header's presence (it came with the move, in a 2.5/2.6 refactoring of the device
// allocators) rather than a version number, so that versions in between pick the layout they have.
#if TORCH_VERSION_MAJOR >= 2 && __has_include(<c10/core/CachingDeviceAllocator.h>)
namespace stat_ns = c10::CachingDeviceAllocator;
#else
namespace stat_ns = c10::cuda::CUDACachingAllocator;
#endif
constexpr size_t kAggregate = static_cast<size_t>(stat_ns::StatType::AGGREGATE);

}  // namespace
#endif

void ResetPeakMemory(const TrainingBackend& backend) {
#ifdef ZEROFIT_TORCH_CUDA
  if (backend.torch_device.is_cuda()) cuda_alloc::resetPeakStats(backend.torch_device.index());
#endif
  if (backend.device) backend.device->ResetPeakMemoryStats();
}

PeakMemory ReadPeakMemory(const torch::Device& device) {
  PeakMemory m;
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) == 0) m.host_rss = static_cast<size_t>(usage.ru_maxrss) * 1024;
#ifdef ZEROFIT_TORCH_CUDA
  if (device.is_cuda()) {
    const auto stats = cuda_alloc::getDeviceStats(device.index());
    m.device_allocated = static_cast<size_t>(stats.allocated_bytes[kAggregate].peak);
    m.device_reserved = static_cast<size_t>(stats.reserved_bytes[kAggregate].peak);
  }
#endif
  return m;
}

PeakMemory ReadPeakMemory(const TrainingBackend& backend) {
  PeakMemory m = ReadPeakMemory(backend.torch_device);
  if (backend.device && backend.device->kind() != device::DeviceKind::kHost) {
    m.device_seam = backend.device->memory_stats().peak_allocated_bytes;
    m.device_allocated += m.device_seam;
    m.device_reserved += m.device_seam;
  }
  return m;
}

}  // namespace zerofit::worker
