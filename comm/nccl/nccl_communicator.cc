#include "comm/nccl/nccl_communicator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "comm/nccl/nccl_error.h"
#include "core/status_macros.h"

namespace zerofit::comm {
namespace {

absl::StatusOr<ncclDataType_t> NcclType(DType t) {
  switch (t) {
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kBFloat16:
      return ncclBfloat16;
    case DType::kFloat16:
      return ncclFloat16;
    case DType::kFloat64:
      return ncclFloat64;
  }
  return absl::InvalidArgumentError("nccl: unknown dtype");
}

ncclRedOp_t NcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
  }
  return ncclSum;
}

// RAII CUDA event; destroyed without synchronising.
class CudaEvent {
 public:
  static absl::StatusOr<std::unique_ptr<CudaEvent>> Create() {
    cudaEvent_t e = nullptr;
    ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaEventCreateWithFlags(&e, cudaEventDisableTiming)));
    return std::unique_ptr<CudaEvent>(new CudaEvent(e));
  }
  ~CudaEvent() {
    if (event_ != nullptr) cudaEventDestroy(event_);
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  explicit CudaEvent(cudaEvent_t e) : event_(e) {}
  cudaEvent_t event_;
};

void Backoff(int* polls) {
  if (++*polls < 200) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace

// An idle communicator finalizes in milliseconds; one that takes longer is stuck on a peer, and the
// destructor aborts it instead of waiting out a long collective deadline.
constexpr absl::Duration kFinalizeTimeout = absl::Seconds(30);

struct NcclCommunicator::Impl {
  CommOptions options;
  int rank = 0;
  int world = 1;
  int device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  void* barrier_scratch = nullptr;  // one float on the device
  std::atomic<bool> broken{false};
  std::atomic<bool> aborted{false};

  ~Impl() {
    cudaSetDevice(device);  // teardown errors have nowhere to go; the calls below need this GPU current
    if (comm != nullptr) {
      // A pending collective would make finalize wait on peers: abort straight away when unsure. Otherwise
      // finalize (flushes NCCL's own pending work, may talk to peers) with a deadline, then destroy; a
      // finalize that does not finish in time aborts instead, so the destructor never hangs.
      const bool idle = stream != nullptr && cudaStreamQuery(stream) == cudaSuccess;
      if (idle && !broken && Finalize(absl::Now() + std::min(options.timeout, kFinalizeTimeout)).ok()) {
        ncclCommDestroy(comm);
      } else {
        ncclCommAbort(comm);
      }
      comm = nullptr;
    }
    if (barrier_scratch != nullptr) cudaFree(barrier_scratch);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  // ncclCommFinalize, polled to completion (non-blocking communicators return ncclInProgress).
  absl::Status Finalize(absl::Time deadline) {
    ZF_RETURN_IF_ERROR(ZF_NCCL_CALL(ncclCommFinalize(comm)));
    return WaitReady(deadline, "ncclCommFinalize");
  }

  // Every CUDA and NCCL call runs with this rank's GPU current: ranks may drive their GPUs from any thread.
  absl::Status SetDevice() const { return ZF_CUDA_CALL(cudaSetDevice(device)); }

  // Aborts the NCCL communicator (never waits on peers) the first time anything goes wrong.
  void MarkBroken() {
    if (!broken.exchange(true) && comm != nullptr) {
      cudaSetDevice(device);
      ncclCommAbort(comm);  // does not wait for peers
      comm = nullptr;
    }
  }

  // Waits for the communicator's asynchronous state to leave ncclInProgress.
  absl::Status WaitReady(absl::Time deadline, const char* what) {
    int polls = 0;
    while (true) {
      ncclResult_t state = ncclSuccess;
      ZF_RETURN_IF_ERROR(ZF_NCCL_CALL(ncclCommGetAsyncError(comm, &state)));
      if (state == ncclSuccess) return absl::OkStatus();
      if (state != ncclInProgress) return ZF_NCCL_CALL(state);
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat("nccl ", what, " on rank ", rank, " of ", world,
                                                        " did not complete before its deadline"));
      }
      Backoff(&polls);
    }
  }

  absl::Status Usable() const {
    if (aborted) return absl::AbortedError("nccl communicator was aborted");
    if (broken)
      return absl::FailedPreconditionError("nccl communicator is unusable after an earlier failure");
    return absl::OkStatus();
  }
};

namespace {

class NcclWork final : public Work {
 public:
  NcclWork(NcclCommunicator::Impl* impl, std::unique_ptr<CudaEvent> event, absl::Time deadline)
      : impl_(impl), event_(std::move(event)), deadline_(deadline) {}

  absl::Status Wait(absl::Duration timeout) override {
    const absl::Time until = std::min(deadline_, absl::Now() + timeout);
    ZF_RETURN_IF_ERROR(impl_->SetDevice());
    int polls = 0;
    while (true) {
      if (impl_->aborted) return absl::AbortedError("nccl communicator was aborted");
      const cudaError_t q = cudaEventQuery(event_->get());
      if (q == cudaSuccess) return absl::OkStatus();
      if (q != cudaErrorNotReady) {
        impl_->MarkBroken();
        return ZF_CUDA_CALL(q);
      }
      ncclResult_t async = ncclSuccess;
      if (impl_->comm != nullptr) ncclCommGetAsyncError(impl_->comm, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        impl_->MarkBroken();
        return ZF_NCCL_CALL(async);
      }
      const absl::Time now = absl::Now();
      if (now >= until) {
        if (now >= deadline_) {
          impl_->MarkBroken();
          return absl::DeadlineExceededError(
              absl::StrCat("nccl collective on rank ", impl_->rank, " of ", impl_->world,
                           " did not complete before its deadline: a peer rank has not arrived; the "
                           "communicator was aborted"));
        }
        return absl::DeadlineExceededError("nccl collective still running");
      }
      Backoff(&polls);
    }
  }

  bool IsCompleted() override {
    if (impl_->aborted) return true;
    cudaSetDevice(impl_->device);
    return cudaEventQuery(event_->get()) != cudaErrorNotReady;
  }

  // On the device: the consumer's stream waits on our completion event; the host does not block.
  absl::Status OrderBefore(device::Stream& consumer, absl::Duration timeout) override {
    auto* stream = static_cast<cudaStream_t>(consumer.native_handle());
    if (stream == nullptr) return Wait(timeout);  // a host stream: only a host wait orders it
    ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaSetDevice(impl_->device)));
    return ZF_CUDA_CALL(cudaStreamWaitEvent(stream, event_->get(), 0));
  }

 private:
  NcclCommunicator::Impl* impl_;
  std::unique_ptr<CudaEvent> event_;
  absl::Time deadline_;
};

absl::Status CheckDevice(const Buffer& b) {
  if (b.device != Device::kCuda) return absl::InvalidArgumentError("nccl communicator: CUDA buffers only");
  return absl::OkStatus();
}

}  // namespace

NcclCommunicator::NcclCommunicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NcclCommunicator::~NcclCommunicator() = default;

absl::StatusOr<NcclUniqueIdBytes> NcclCommunicator::NewUniqueId() {
  ncclUniqueId id;
  ZF_RETURN_IF_ERROR(ZF_NCCL_CALL(ncclGetUniqueId(&id)));
  NcclUniqueIdBytes out;
  static_assert(sizeof(id) == sizeof(NcclUniqueIdBytes), "ncclUniqueId size changed");
  std::memcpy(out.data(), &id, sizeof(id));
  return out;
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(const NcclUniqueIdBytes& id_bytes,
                                                                           int rank, int world_size,
                                                                           int cuda_device,
                                                                           CommOptions options) {
  if (rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(absl::StrCat("nccl: rank ", rank, " outside [0, ", world_size, ")"));
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->rank = rank;
  impl->world = world_size;
  impl->device = cuda_device;
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaSetDevice(cuda_device)));
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking)));
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaMalloc(&impl->barrier_scratch, sizeof(float))));
  ncclUniqueId id;
  std::memcpy(&id, id_bytes.data(), sizeof(id));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const absl::Time deadline = absl::Now() + options.timeout;
  ZF_RETURN_IF_ERROR(ZF_NCCL_CALL(ncclCommInitRankConfig(&impl->comm, world_size, id, rank, &config)));
  absl::Status ready = impl->WaitReady(deadline, "ncclCommInitRankConfig");
  if (!ready.ok()) {
    impl->MarkBroken();
    return ready;
  }
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::CreateWithBootstrap(
    Communicator& bootstrap, int cuda_device, CommOptions options) {
  NcclUniqueIdBytes id{};
  if (bootstrap.rank() == 0) {
    ZF_ASSIGN_OR_RETURN(id, NewUniqueId());
  }
  // 128 opaque bytes move as 32 fp32 words: a broadcast copies bits verbatim.
  Buffer buf{id.data(), id.size() / sizeof(float), DType::kFloat32, Device::kCpu};
  ZF_RETURN_IF_ERROR(WaitFor(bootstrap.Broadcast(buf, 0), bootstrap.options().timeout));
  return Create(id, bootstrap.rank(), bootstrap.world_size(), cuda_device, options);
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::CreateWithRendezvous(
    Rendezvous& rendezvous, const std::string& key, int rank, int world_size, int cuda_device,
    CommOptions options) {
  ZF_ASSIGN_OR_RETURN(const std::string bytes, ShareFromRankZero(
                                                   rendezvous, rank, key,
                                                   []() -> absl::StatusOr<std::string> {
                                                     ZF_ASSIGN_OR_RETURN(NcclUniqueIdBytes id, NewUniqueId());
                                                     return std::string(id.data(), id.size());
                                                   },
                                                   options.timeout));
  NcclUniqueIdBytes id{};
  if (bytes.size() != id.size()) {
    return absl::DataLossError(absl::StrCat("rendezvous '", key, "': NCCL unique id of ", bytes.size(),
                                            " bytes, expected ", id.size()));
  }
  std::memcpy(id.data(), bytes.data(), id.size());
  return Create(id, rank, world_size, cuda_device, options);
}

int NcclCommunicator::rank() const { return impl_->rank; }
int NcclCommunicator::world_size() const { return impl_->world; }
const CommOptions& NcclCommunicator::options() const { return impl_->options; }
void* NcclCommunicator::stream() const { return impl_->stream; }

namespace {

// Orders the communicator's stream after the work enqueued on `after` so far (a CUDA stream of ours or
// LibTorch's), on the device, without blocking the host.
absl::Status OrderAfter(NcclCommunicator::Impl* impl, device::Stream* after) {
  if (after == nullptr) return absl::OkStatus();
  auto* producer = static_cast<cudaStream_t>(after->native_handle());
  if (producer == nullptr) return after->Synchronize(impl->options.timeout);  // host work: wait for it here
  ZF_ASSIGN_OR_RETURN(std::unique_ptr<CudaEvent> ready, CudaEvent::Create());
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaEventRecord(ready->get(), producer)));
  return ZF_CUDA_CALL(cudaStreamWaitEvent(impl->stream, ready->get(), 0));
}

// After a collective call: a non-blocking communicator may return ncclInProgress before the collective's
// kernel is on the stream, and an event recorded then would complete too early. So first poll
// ncclCommGetAsyncError until the call has left ncclInProgress (against the communicator's deadline), then
// record the completion event and wrap it in a Work. Any failure aborts the communicator.
absl::StatusOr<std::unique_ptr<Work>> Finish(NcclCommunicator::Impl* impl, absl::Status launched,
                                             const char* what) {
  const absl::Time deadline = absl::Now() + impl->options.timeout;
  absl::Status s = launched;
  if (s.ok()) s = impl->WaitReady(deadline, what);
  absl::StatusOr<std::unique_ptr<CudaEvent>> event;
  if (s.ok()) event = CudaEvent::Create();
  if (s.ok()) s = event.status();
  if (s.ok()) s = ZF_CUDA_CALL(cudaEventRecord((*event)->get(), impl->stream));
  if (!s.ok()) {
    impl->MarkBroken();
    return s;
  }
  return std::unique_ptr<Work>(std::make_unique<NcclWork>(impl, std::move(*event), deadline));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Work>> NcclCommunicator::ReduceScatter(Buffer in, Buffer out, ReduceOp op,
                                                                      device::Stream* after) {
  ZF_RETURN_IF_ERROR(impl_->Usable());
  ZF_RETURN_IF_ERROR(impl_->SetDevice());
  ZF_RETURN_IF_ERROR(ValidateReduceScatter(*this, in, out));
  ZF_RETURN_IF_ERROR(CheckDevice(in));
  ZF_ASSIGN_OR_RETURN(ncclDataType_t type, NcclType(in.dtype));
  ZF_RETURN_IF_ERROR(OrderAfter(impl_.get(), after));
  return Finish(impl_.get(),
                ZF_NCCL_CALL(ncclReduceScatter(in.data, out.data, out.count, type, NcclOp(op), impl_->comm,
                                               impl_->stream)),
                "ncclReduceScatter");
}

absl::StatusOr<std::unique_ptr<Work>> NcclCommunicator::AllGather(Buffer in, Buffer out,
                                                                  device::Stream* after) {
  ZF_RETURN_IF_ERROR(impl_->Usable());
  ZF_RETURN_IF_ERROR(impl_->SetDevice());
  ZF_RETURN_IF_ERROR(ValidateAllGather(*this, in, out));
  ZF_RETURN_IF_ERROR(CheckDevice(in));
  ZF_ASSIGN_OR_RETURN(ncclDataType_t type, NcclType(in.dtype));
  ZF_RETURN_IF_ERROR(OrderAfter(impl_.get(), after));
  return Finish(impl_.get(),
                ZF_NCCL_CALL(ncclAllGather(in.data, out.data, in.count, type, impl_->comm, impl_->stream)),
                "ncclAllGather");
}

absl::StatusOr<std::unique_ptr<Work>> NcclCommunicator::AllReduce(Buffer buf, ReduceOp op,
                                                                  device::Stream* after) {
  ZF_RETURN_IF_ERROR(impl_->Usable());
  ZF_RETURN_IF_ERROR(impl_->SetDevice());
  ZF_RETURN_IF_ERROR(ValidateBuffer("AllReduce", buf));
  ZF_RETURN_IF_ERROR(CheckDevice(buf));
  ZF_ASSIGN_OR_RETURN(ncclDataType_t type, NcclType(buf.dtype));
  ZF_RETURN_IF_ERROR(OrderAfter(impl_.get(), after));
  return Finish(impl_.get(),
                ZF_NCCL_CALL(ncclAllReduce(buf.data, buf.data, buf.count, type, NcclOp(op), impl_->comm,
                                           impl_->stream)),
                "ncclAllReduce");
}

absl::StatusOr<std::unique_ptr<Work>> NcclCommunicator::Broadcast(Buffer buf, int root,
                                                                  device::Stream* after) {
  ZF_RETURN_IF_ERROR(impl_->Usable());
  ZF_RETURN_IF_ERROR(impl_->SetDevice());
  ZF_RETURN_IF_ERROR(ValidateBuffer("Broadcast", buf));
  ZF_RETURN_IF_ERROR(ValidateRoot(*this, root));
  ZF_RETURN_IF_ERROR(CheckDevice(buf));
  ZF_ASSIGN_OR_RETURN(ncclDataType_t type, NcclType(buf.dtype));
  ZF_RETURN_IF_ERROR(OrderAfter(impl_.get(), after));
  return Finish(
      impl_.get(),
      ZF_NCCL_CALL(ncclBroadcast(buf.data, buf.data, buf.count, type, root, impl_->comm, impl_->stream)),
      "ncclBroadcast");
}

absl::Status NcclCommunicator::Barrier(absl::Duration timeout) {
  Buffer scratch{impl_->barrier_scratch, 1, DType::kFloat32, Device::kCuda};
  ZF_ASSIGN_OR_RETURN(std::unique_ptr<Work> work, AllReduce(scratch, ReduceOp::kSum));
  return work->Wait(timeout);
}

void NcclCommunicator::Abort() {
  impl_->aborted = true;
  impl_->MarkBroken();
}

}  // namespace zerofit::comm
