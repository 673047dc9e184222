// The offload pipeline (ZeRO-Offload): the fp32 master weights, AdamW moments and the fp32 gradient shard of
// this rank live in pinned host memory, and the update runs on the CPU with SIMD AdamW.
//
//   ReceiveGradient: device -> pinned host copy of a reduced gradient shard in the parameter dtype (bf16
//     over the bus, not fp32) on the D2H copy stream, then fp32 accumulation on the host in stream order;
//   Update: CPU AdamW over a list of spans by tile (N threads), each finished tile's parameters (parameter
//     dtype) queued at once for their host -> device copy on the H2D stream, so copies start while other
//     tiles still update; the caller orders its all-gather after h2d_stream().
//
// Offsets and counts are ELEMENTS of the shard. Not thread-safe: one engine thread calls it (Update's tile
// callbacks enqueue on the H2D stream under a lock).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "core/dtype.h"
#include "device/device.h"
#include "optim/cpu_adamw.h"

namespace zerofit::offload {

struct OffloadPipelineOptions {
  size_t shard_numel = 0;
  core::DType param_dtype = core::DType::kFloat32;
  int threads = 1;
  optim::SimdLevel simd = optim::DetectSimdLevel();
  int gradient_buffers = 1;  // 2 with a delayed update: the next step accumulates into the other one
};

class OffloadPipeline {
 public:
  // One span of the shard updated with one set of hyper-parameters (e.g. with or without weight decay).
  struct Span {
    size_t offset = 0;
    size_t numel = 0;
    optim::AdamWHyper hyper;
  };

  static absl::StatusOr<std::unique_ptr<OffloadPipeline>> Create(device::Device* device,
                                                                 const OffloadPipelineOptions& options);
  ~OffloadPipeline();

  // The stream the D2H copies run on: order it after the producer of `device_src` before calling
  // ReceiveGradient (e.g. Work::OrderBefore(d2h_stream())).
  device::Stream& d2h_stream() { return *d2h_; }
  // Elements [offset, offset + n) of gradient buffer `grads` += device_src (param dtype, device memory).
  absl::Status ReceiveGradient(int grads, size_t offset, size_t n, const void* device_src);
  // Host-side gradient accumulation is complete (all ReceiveGradient calls so far).
  absl::Status WaitGradients(absl::Duration timeout);

  // master[offset, offset + n) = fp32(device_src) (parameter dtype, device memory), through the host
  // parameter copy on the D2H stream (order that stream after the producer first; WaitGradients waits).
  absl::Status ReceiveParams(size_t offset, size_t n, const void* device_src);

  // AdamW on the spans with gradient buffer `grads`, writing the updated parameters (param dtype) to the
  // pinned host copy; when `device_out` is given, every finished tile is also queued for its copy on the
  // H2D stream: shard element k goes to device_out + (k - out_origin) elements.
  void Update(const std::vector<Span>& spans, int grads, int64_t step, float grad_scale, char* device_out,
              size_t out_origin);
  // Copies shard elements [offset, offset + n) of the host parameter copy to device_out (H2D stream).
  absl::Status CopyParamsToDevice(size_t offset, size_t n, char* device_out);
  // The pinned host copy of the parameters (param dtype, shard_numel elements).
  char* host_params() { return param_lowp_.as<char>(); }
  device::Stream& h2d_stream() { return *h2d_; }

  float* master() { return master_.as<float>(); }
  float* exp_avg() { return exp_avg_.as<float>(); }
  float* exp_avg_sq() { return exp_avg_sq_.as<float>(); }
  float* gradients(int i) { return grads_[i].as<float>(); }
  // Host memset; call only when no ReceiveGradient into buffer i is pending (after WaitGradients).
  void ZeroGradients(int i);
  // Why host memory is not pinned, if it is not.
  absl::Status pin_status() const;
  size_t pinned_bytes() const;
  size_t host_bytes() const;
  size_t gradient_bytes() const { return grads_.size() * options_.shard_numel * sizeof(float); }
  int threads() const { return adamw_->threads(); }

 private:
  OffloadPipeline(device::Device* device, const OffloadPipelineOptions& options);
  absl::Status Allocate();
  size_t elem_bytes() const { return core::DTypeSize(options_.param_dtype); }

  device::Device* device_;
  OffloadPipelineOptions options_;
  std::unique_ptr<device::Stream> d2h_;
  std::unique_ptr<device::Stream> h2d_;
  std::mutex h2d_mu_;  // tile callbacks of several CPU threads enqueue on h2d_
  device::Buffer master_, exp_avg_, exp_avg_sq_;
  std::vector<device::Buffer> grads_;  // fp32 shard accumulators
  device::Buffer grad_lowp_;           // shard gradients after D2H (param dtype)
  device::Buffer param_lowp_;          // updated parameters before H2D (param dtype)
  std::unique_ptr<optim::CpuAdamW> adamw_;
};

}  // namespace zerofit::offload
