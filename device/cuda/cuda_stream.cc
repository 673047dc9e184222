#include "device/cuda/cuda_stream.h"

#include <chrono>
#include <thread>
#include <utility>

#include "core/status_macros.h"
#include "device/cuda/cuda_error.h"
#include "device/cuda/cuda_event.h"
#include "device/cuda/cuda_kernels.h"
#include "optim/adamw_math.h"

namespace zerofit::device {
namespace {

// A host function on the heap: CUDA's callback thread owns (and deletes) it once it has run.
struct HostCall {
  std::function<absl::Status()> fn;
  std::shared_ptr<StickyStatus> status;
};

void CUDART_CB RunHostCall(void* data) {
  std::unique_ptr<HostCall> call(static_cast<HostCall*>(data));
  absl::Status s;
  try {
    s = call->fn();
  } catch (const std::exception& e) {  // a throwing closure must not unwind into the driver
    s = absl::InternalError(absl::StrCat("host function threw: ", e.what()));
  }
  call->status->Update(s);
}

absl::Status CheckFloatType(core::DType t, const char* what) {
  if (t == core::DType::kFloat32 || t == core::DType::kBFloat16 || t == core::DType::kFloat16 ||
      t == core::DType::kFloat64) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("cuda stream: unsupported ", what, " dtype ", static_cast<int>(t)));
}

}  // namespace

void StickyStatus::Update(const absl::Status& s) {
  if (s.ok()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (status_.ok()) status_ = s;
}

absl::Status StickyStatus::Get() {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

absl::Status PollCuda(const std::function<cudaError_t()>& query, absl::Duration timeout, const char* what) {
  const absl::Time deadline = absl::Now() + timeout;
  for (int polls = 0;; ++polls) {
    const cudaError_t rc = query();
    if (rc != cudaErrorNotReady) return ZF_CUDA_CALL(rc);
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(what, " did not finish within ", absl::FormatDuration(timeout)));
    }
    if (polls < 200) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

CudaStream::CudaStream(int device, cudaStream_t stream, bool owned)
    : device_(device), stream_(stream), owned_(owned) {}

absl::StatusOr<std::unique_ptr<CudaStream>> CudaStream::Create(int device) {
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaSetDevice(device)));
  cudaStream_t s = nullptr;
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)));
  std::unique_ptr<CudaStream> stream(new CudaStream(device, s, /*owned=*/true));
  ZF_RETURN_IF_ERROR(stream->AllocateScratch());
  return stream;
}

absl::StatusOr<std::unique_ptr<CudaStream>> CudaStream::WrapLegacy(int device) {
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaSetDevice(device)));
  std::unique_ptr<CudaStream> stream(new CudaStream(device, cudaStreamLegacy, /*owned=*/false));
  ZF_RETURN_IF_ERROR(stream->AllocateScratch());
  return stream;
}

absl::Status CudaStream::AllocateScratch() {
  const size_t bytes = cuda::kSumOfSquaresMaxBlocks * sizeof(double);
  // Stream-ordered when the GPU has memory pools: the destructor's cudaFreeAsync then never waits, where
  // cudaFree would synchronise the whole device.
  int pools = 0;
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device_)));
  void* p = nullptr;
  if (pools != 0) {
    ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaMallocAsync(&p, bytes, stream_)));
    scratch_async_ = true;
  } else {
    ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaMalloc(&p, bytes)));
  }
  scratch_ = static_cast<double*>(p);
  return absl::OkStatus();
}

CudaStream::~CudaStream() {
  // Teardown errors have nowhere to go (a destructor); nothing here waits for the stream's work.
  cudaSetDevice(device_);
  if (scratch_ != nullptr) {
    if (scratch_async_) {
      cudaFreeAsync(scratch_, stream_);
    } else {
      cudaFree(scratch_);
    }
  }
  if (owned_) cudaStreamDestroy(stream_);
}

absl::Status CudaStream::Copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaSetDevice(device_)));
  return ZF_CUDA_CALL(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
}

absl::Status CudaStream::Fill(void* dst, uint8_t value, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaSetDevice(device_)));
  return ZF_CUDA_CALL(cudaMemsetAsync(dst, value, bytes, stream_));
}

absl::Status CudaStream::Accumulate(const void* src, core::DType src_type, float* acc, size_t n,
                                    float scale) {
  ZF_RETURN_IF_ERROR(CheckFloatType(src_type, "Accumulate source"));
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaSetDevice(device_)));
  return ZF_CUDA_CALL(cuda::LaunchAccumulate(src, src_type, acc, n, scale, stream_));
}

absl::Status CudaStream::SumOfSquares(const void* src, core::DType dtype, size_t n, double* out) {
  ZF_RETURN_IF_ERROR(CheckFloatType(dtype, "SumOfSquares source"));
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaSetDevice(device_)));
  return ZF_CUDA_CALL(cuda::LaunchSumOfSquares(src, dtype, n, out, scratch_, stream_));
}

absl::Status CudaStream::Convert(const void* src, core::DType src_type, void* dst, core::DType dst_type,
                                 size_t n) {
  ZF_RETURN_IF_ERROR(CheckFloatType(src_type, "Convert source"));
  ZF_RETURN_IF_ERROR(CheckFloatType(dst_type, "Convert destination"));
  if (n == 0) return absl::OkStatus();
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaSetDevice(device_)));
  if (src_type == dst_type) {
    if (src == dst) return absl::OkStatus();
    return ZF_CUDA_CALL(cudaMemcpyAsync(dst, src, n * core::DTypeSize(src_type), cudaMemcpyDefault, stream_));
  }
  return ZF_CUDA_CALL(cuda::LaunchConvert(src, src_type, dst, dst_type, n, stream_));
}

absl::Status CudaStream::AdamW(const AdamWArgs& a) {
  const optim::AdamWSpans& s = a.spans;
  ZF_RETURN_IF_ERROR(CheckFloatType(s.grad_dtype, "AdamW gradient"));
  if (s.param_out != nullptr) ZF_RETURN_IF_ERROR(CheckFloatType(s.out_dtype, "AdamW output"));
  if (a.step < 1) return absl::InvalidArgumentError(absl::StrCat("AdamW step ", a.step, " (counts from 1)"));
  // The host computes the step's scalars exactly as the CPU oracle does (in double, rounded once).
  const optim::internal::AdamWConstants h = optim::internal::MakeConstants(a.hyper, a.step, a.grad_scale);
  const cuda::AdamWKernelConstants c{
      h.decay, h.b1, h.b2, h.one_minus_b1, h.one_minus_b2, h.sqrt_bc2, h.neg_step_size, h.eps, h.grad_scale};
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaSetDevice(device_)));
  return ZF_CUDA_CALL(
      cuda::LaunchAdamW(s.param, s.grad, s.grad_dtype, s.m, s.v, s.n, s.param_out, s.out_dtype, c, stream_));
}

absl::Status CudaStream::AdamW8bit(const AdamW8bitArgs& a) {
  const optim::AdamW8bitSpans& s = a.spans;
  ZF_RETURN_IF_ERROR(CheckFloatType(s.grad_dtype, "AdamW8bit gradient"));
  if (s.param_out != nullptr) ZF_RETURN_IF_ERROR(CheckFloatType(s.out_dtype, "AdamW8bit output"));
  if (a.step < 1)
    return absl::InvalidArgumentError(absl::StrCat("AdamW8bit step ", a.step, " (counts from 1)"));
  const optim::internal::AdamWConstants h = optim::internal::MakeConstants(a.hyper, a.step, a.grad_scale);
  const cuda::AdamWKernelConstants c{
      h.decay, h.b1, h.b2, h.one_minus_b1, h.one_minus_b2, h.sqrt_bc2, h.neg_step_size, h.eps, h.grad_scale};
  const cuda::AdamW8bitState state{s.m, s.v, s.m_absmax, s.v_absmax, a.maps.m, a.maps.v};
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaSetDevice(device_)));
  return ZF_CUDA_CALL(
      cuda::LaunchAdamW8bit(s.param, s.grad, s.grad_dtype, state, s.n, s.param_out, s.out_dtype, c, stream_));
}

absl::Status CudaStream::HostFunc(std::function<absl::Status()> fn) {
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaSetDevice(device_)));
  auto call = std::make_unique<HostCall>(HostCall{std::move(fn), status_});
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaLaunchHostFunc(stream_, &RunHostCall, call.get())));
  call.release();  // RunHostCall deletes it
  return absl::OkStatus();
}

absl::Status CudaStream::Synchronize(absl::Duration timeout) {
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaSetDevice(device_)));
  const absl::Status drained =
      PollCuda([s = stream_] { return cudaStreamQuery(s); }, timeout, "cuda stream synchronize");
  if (absl::IsDeadlineExceeded(drained)) return drained;  // still running: not a stream error
  status_->Update(drained);
  return status_->Get();
}

absl::Status CudaStream::status() {
  ZF_RETURN_IF_ERROR(ZF_CUDA_CALL(cudaSetDevice(device_)));
  const cudaError_t rc = cudaStreamQuery(stream_);
  if (rc != cudaErrorNotReady) status_->Update(ZF_CUDA_CALL(rc));
  return status_->Get();
}

absl::StatusOr<std::unique_ptr<Event>> CudaStream::CreateEvent() {
  ZF_ASSIGN_OR_RETURN(std::unique_ptr<CudaEvent> e, CudaEvent::Create(device_));
  return std::unique_ptr<Event>(std::move(e));
}

}  // namespace zerofit::device
