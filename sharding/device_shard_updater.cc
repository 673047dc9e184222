#include "sharding/device_shard_updater.h"

#include <vector>

#include "core/status_macros.h"

namespace zerofit::sharding {

using device::MemoryKind;

DeviceShardUpdater::~DeviceShardUpdater() {
  if (stream_) (void)stream_->Synchronize(timeout_);
}

absl::StatusOr<std::unique_ptr<DeviceShardUpdater>> DeviceShardUpdater::Create(
    const BucketPlan* plan, core::DType param_dtype, device::Device* device, absl::Duration timeout,
    bool single_micro_batch, optim::MomentOptions moments) {
  std::unique_ptr<DeviceShardUpdater> u(
      new DeviceShardUpdater(plan, param_dtype, device, timeout, single_micro_batch, moments));
  ZF_RETURN_IF_ERROR(u->Allocate());
  return u;
}

absl::Status DeviceShardUpdater::Allocate() {
  bucket_segments_ = BucketSegmentRanges(*plan_);
  ZF_ASSIGN_OR_RETURN(stream_, device_->CreateStream());
  ZF_ASSIGN_OR_RETURN(received_, device_->CreateEvent());
  ZF_ASSIGN_OR_RETURN(master_, device_->Allocate(state_bytes(), MemoryKind::kDevice));
  if (moments_.quantized()) {
    ZF_ASSIGN_OR_RETURN(quantized_, QuantizedMoments::Create(plan_, device_, stream_.get(),
                                                             moments_.min_8bit_size, timeout_));
  } else {
    for (device::Buffer* b : {&exp_avg_, &exp_avg_sq_}) {
      ZF_ASSIGN_OR_RETURN(*b, device_->Allocate(state_bytes(), MemoryKind::kDevice));
    }
  }
  if (!single_micro_batch_) {
    ZF_ASSIGN_OR_RETURN(grads_, device_->Allocate(state_bytes(), MemoryKind::kDevice));
  }
  ZF_ASSIGN_OR_RETURN(sum_, device_->Allocate(sizeof(double), MemoryKind::kDevice));
  ZF_ASSIGN_OR_RETURN(sum_host_, device_->Allocate(sizeof(double), MemoryKind::kPinned));
  return absl::OkStatus();
}

absl::Status DeviceShardUpdater::Receive(size_t bucket, const void* landing, comm::Work& work,
                                         bool last_of_step) {
  ZF_RETURN_IF_ERROR(work.OrderBefore(*stream_, timeout_));
  if (landing == nullptr) return absl::OkStatus();  // reduced straight into the accumulator
  const Bucket& b = plan_->buckets()[bucket];
  // More micro-batches in a step than declared: keep an accumulator from now on (memory the plan did not
  // count, but the step is right). The step's first micro-batch gets here before any bucket of it landed.
  if (single_micro_batch_ && !last_of_step) ZF_RETURN_IF_ERROR(StartAccumulating());
  if (single_micro_batch_) {
    const char* base = static_cast<const char*>(landing) - b.shard_offset * elem_bytes();
    if (landing_ != nullptr && landing_ != base) {
      return absl::InternalError(
          "DeviceShardUpdater: the buckets' landing buffers are not one shard-sized buffer");
    }
    landing_ = base;
    return absl::OkStatus();
  }
  return stream_->Accumulate(landing, param_dtype_, grads_.as<float>() + b.shard_offset, b.layout.shard_numel,
                             1.0f);
}

absl::Status DeviceShardUpdater::StartAccumulating() {
  ZF_ASSIGN_OR_RETURN(grads_, device_->Allocate(state_bytes(), MemoryKind::kDevice));
  single_micro_batch_ = false;
  landing_ = nullptr;
  return stream_->Fill(grads_.data(), 0, grads_.bytes());
}

float* DeviceShardUpdater::direct_landing(size_t bucket) {
  if (param_dtype_ != core::DType::kFloat32 || single_micro_batch_) return nullptr;
  return grads_.as<float>() + plan_->buckets()[bucket].shard_offset;
}

const void* DeviceShardUpdater::GradientAt(size_t offset) const {
  if (!single_micro_batch_) return grads_.as<float>() + offset;
  return landing_ + offset * elem_bytes();
}

absl::Status DeviceShardUpdater::OrderAfterReceives(device::Stream& stream) {
  ZF_RETURN_IF_ERROR(received_->Record(*stream_));
  return received_->Wait(stream);
}

absl::StatusOr<double> DeviceShardUpdater::SumOfSquares() {
  if (plan_->shard_numel() == 0) return 0.0;
  if (single_micro_batch_ && landing_ == nullptr)
    return absl::FailedPreconditionError(
        "DeviceShardUpdater::SumOfSquares: no gradient was received this step");
  ZF_RETURN_IF_ERROR(
      stream_->SumOfSquares(GradientAt(0), gradient_dtype(), plan_->shard_numel(), sum_.as<double>()));
  ZF_RETURN_IF_ERROR(stream_->Copy(sum_host_.data(), sum_.data(), sizeof(double)));
  ZF_RETURN_IF_ERROR(stream_->Synchronize(timeout_));
  return *sum_host_.as<double>();
}

absl::Status DeviceShardUpdater::ZeroGradients() {
  if (single_micro_batch_) return absl::OkStatus();  // each step's reduce-scatters overwrite the landing
  return stream_->Fill(grads_.data(), 0, grads_.bytes());
}

absl::Status DeviceShardUpdater::InitializeMaster(const char* flat_params, device::Stream& after) {
  ZF_RETURN_IF_ERROR(received_->Record(after));
  ZF_RETURN_IF_ERROR(received_->Wait(*stream_));
  // Padding stays zero in the master copy; real elements come from the parameters.
  ZF_RETURN_IF_ERROR(stream_->Fill(master_.data(), 0, master_.bytes()));
  for (const ShardSegment& s : plan_->segments()) {
    ZF_RETURN_IF_ERROR(stream_->Convert(flat_params + s.flat_offset * elem_bytes(), param_dtype_,
                                        master() + s.shard_offset, core::DType::kFloat32, s.numel));
  }
  return absl::OkStatus();
}

absl::StatusOr<device::Stream*> DeviceShardUpdater::PublishMaster(char* flat_params) {
  for (const ShardSegment& s : plan_->segments()) {
    ZF_RETURN_IF_ERROR(stream_->Convert(master() + s.shard_offset, core::DType::kFloat32,
                                        flat_params + s.flat_offset * elem_bytes(), param_dtype_, s.numel));
  }
  return stream_.get();
}

absl::StatusOr<device::Stream*> DeviceShardUpdater::Update(size_t bucket, const optim::AdamWHyper& hyper,
                                                           int64_t step, float grad_scale,
                                                           char* owned_params) {
  const Bucket& b = plan_->buckets()[bucket];
  for (size_t k = bucket_segments_[bucket].first; k < bucket_segments_[bucket].second; ++k) {
    const ShardSegment& s = plan_->segments()[k];
    device::AdamWArgs a;
    a.spans.param = master() + s.shard_offset;
    a.spans.grad = GradientAt(s.shard_offset);
    a.spans.grad_dtype = gradient_dtype();
    a.spans.n = s.numel;
    a.spans.param_out = owned_params + (s.shard_offset - b.shard_offset) * elem_bytes();
    a.spans.out_dtype = param_dtype_;
    a.hyper = SegmentHyper(hyper, s);
    a.step = step;
    a.grad_scale = grad_scale;
    if (quantized_) {
      ZF_RETURN_IF_ERROR(quantized_->Update(k, a));
      continue;
    }
    a.spans.m = exp_avg() + s.shard_offset;
    a.spans.v = exp_avg_sq() + s.shard_offset;
    ZF_RETURN_IF_ERROR(stream_->AdamW(a));
  }
  return stream_.get();
}

absl::Status DeviceShardUpdater::CopyStateToHost(float* master, float* m, float* v) {
  ZF_RETURN_IF_ERROR(stream_->Copy(master, master_.data(), state_bytes()));
  if (quantized_) {
    std::vector<float> m_absmax(moment_scales()), v_absmax(moment_scales());
    return quantized_->CopyToHost(m, v, m_absmax.data(), v_absmax.data());  // synchronises
  }
  ZF_RETURN_IF_ERROR(stream_->Copy(m, exp_avg_.data(), state_bytes()));
  ZF_RETURN_IF_ERROR(stream_->Copy(v, exp_avg_sq_.data(), state_bytes()));
  return stream_->Synchronize(timeout_);
}

absl::Status DeviceShardUpdater::CopyMomentScalesToHost(float* m_absmax, float* v_absmax) {
  if (!quantized_) return ShardUpdater::CopyMomentScalesToHost(m_absmax, v_absmax);
  return quantized_->CopyScalesToHost(m_absmax, v_absmax);
}

absl::Status DeviceShardUpdater::CopyStateFromHostWithScales(const float* master, const float* m,
                                                             const float* v, const float* m_absmax,
                                                             const float* v_absmax) {
  if (!quantized_) return CopyStateFromHost(master, m, v);
  ZF_RETURN_IF_ERROR(stream_->Copy(master_.data(), master, state_bytes()));
  return quantized_->CopyFromHost(m, v, m_absmax, v_absmax);  // synchronises
}

absl::Status DeviceShardUpdater::CopyStateFromHost(const float* master, const float* m, const float* v) {
  if (quantized_) return CopyStateFromHostWithScales(master, m, v, nullptr, nullptr);
  ZF_RETURN_IF_ERROR(stream_->Copy(master_.data(), master, state_bytes()));
  ZF_RETURN_IF_ERROR(stream_->Copy(exp_avg_.data(), m, state_bytes()));
  ZF_RETURN_IF_ERROR(stream_->Copy(exp_avg_sq_.data(), v, state_bytes()));
  return stream_->Synchronize(timeout_);
}

ShardMemory DeviceShardUpdater::memory() const {
  ShardMemory m;
  m.state_bytes =
      master_.bytes() + exp_avg_.bytes() + exp_avg_sq_.bytes() + (quantized_ ? quantized_->bytes() : 0);
  m.master_bytes = master_.bytes();
  m.shard_grad_bytes = grads_.bytes();
  return m;
}

}  // namespace zerofit::sharding
