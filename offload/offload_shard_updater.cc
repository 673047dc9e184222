#include "offload/offload_shard_updater.h"

#include <cstring>

#include "core/status_macros.h"

namespace zerofit::offload {

using sharding::Bucket;
using sharding::ScopedStage;
using sharding::SegmentHyper;
using sharding::ShardSegment;
using sharding::Stage;

absl::StatusOr<std::unique_ptr<sharding::OffloadUpdater>> OffloadShardUpdater::Create(
    const sharding::OffloadUpdaterArgs& a) {
  OffloadPipelineOptions o;
  o.shard_numel = a.plan->shard_numel();
  o.param_dtype = a.param_dtype;
  o.threads = a.options.threads;
  o.simd = a.options.simd;
  o.gradient_buffers = a.options.delayed() ? 2 : 1;
  o.wait_timeout = a.timeout;
  o.own_moments = !a.moments.quantized();
  if (a.profile != nullptr) {
    o.on_host_job = [profile = a.profile](absl::Time begin, absl::Time end) {
      profile->Record(Stage::kHostAccumulate, begin, end);
    };
  }
  std::unique_ptr<OffloadShardUpdater> u(
      new OffloadShardUpdater(a.plan, a.param_dtype, a.timeout, a.profile));
  u->bucket_segments_ = sharding::BucketSegmentRanges(*a.plan);
  if (a.moments.quantized()) {
    ZF_ASSIGN_OR_RETURN(u->q8_, HostQuantizedMoments::Create(a.plan, a.moments.min_8bit_size));
  }
  ZF_ASSIGN_OR_RETURN(u->pipeline_, OffloadPipeline::Create(a.device, o));
  ZF_ASSIGN_OR_RETURN(u->received_, a.device->CreateEvent());
  return u;
}

absl::Status OffloadShardUpdater::Receive(size_t bucket, const void* landing, comm::Work& work,
                                          bool last_of_step) {
  const Bucket& b = plan_->buckets()[bucket];
  ZF_RETURN_IF_ERROR(work.OrderBefore(pipeline_->d2h_stream(), timeout_));
  return pipeline_->ReceiveGradient(cur_, b.shard_offset, b.layout.shard_numel, landing, last_of_step);
}

absl::Status OffloadShardUpdater::OrderAfterReceives(device::Stream& stream) {
  ZF_RETURN_IF_ERROR(received_->Record(pipeline_->d2h_stream()));
  return received_->Wait(stream);
}

absl::Status OffloadShardUpdater::WaitGradients() {
  ScopedStage wait(profile_, Stage::kWait);
  return pipeline_->WaitGradients(timeout_);
}

absl::StatusOr<double> OffloadShardUpdater::SumOfSquares() {
  ZF_RETURN_IF_ERROR(WaitGradients());
  return pipeline_->SumOfSquares(cur_);
}

absl::Status OffloadShardUpdater::ZeroGradients() {
  ZF_RETURN_IF_ERROR(WaitGradients());
  pipeline_->ZeroGradients(cur_);
  return absl::OkStatus();
}

absl::Status OffloadShardUpdater::InitializeMaster(const char* flat_params, device::Stream& after) {
  ZF_RETURN_IF_ERROR(received_->Record(after));
  ZF_RETURN_IF_ERROR(received_->Wait(pipeline_->d2h_stream()));
  std::memset(master(), 0, plan_->shard_numel() * sizeof(float));  // padding stays zero
  for (const ShardSegment& s : plan_->segments()) {
    ZF_RETURN_IF_ERROR(
        pipeline_->ReceiveParams(s.shard_offset, s.numel, flat_params + s.flat_offset * elem_bytes()));
  }
  return pipeline_->WaitGradients(timeout_);
}

absl::StatusOr<device::Stream*> OffloadShardUpdater::PublishMaster(char* flat_params) {
  for (const ShardSegment& s : plan_->segments()) {
    core::ConvertElements(master() + s.shard_offset, core::DType::kFloat32,
                          pipeline_->host_params() + s.shard_offset * elem_bytes(), param_dtype_, s.numel);
    ZF_RETURN_IF_ERROR(
        pipeline_->CopyParamsToDevice(s.shard_offset, s.numel, flat_params + s.flat_offset * elem_bytes()));
  }
  return &pipeline_->h2d_stream();
}

std::vector<OffloadPipeline::Span> OffloadShardUpdater::Spans(size_t bucket,
                                                              const optim::AdamWHyper& hyper) const {
  std::vector<OffloadPipeline::Span> spans;
  for (size_t k = bucket_segments_[bucket].first; k < bucket_segments_[bucket].second; ++k) {
    const ShardSegment& s = plan_->segments()[k];
    OffloadPipeline::Span span;
    span.offset = s.shard_offset;
    span.numel = s.numel;
    span.hyper = SegmentHyper(hyper, s);
    if (q8_ != nullptr) q8_->Place(k, &span);
    spans.push_back(span);
  }
  return spans;
}

absl::StatusOr<device::Stream*> OffloadShardUpdater::Update(size_t bucket, const optim::AdamWHyper& hyper,
                                                            int64_t step, float grad_scale,
                                                            char* owned_params) {
  pipeline_->Update(Spans(bucket, hyper), cur_, step, grad_scale, owned_params,
                    plan_->buckets()[bucket].shard_offset);
  return &pipeline_->h2d_stream();
}

int OffloadShardUpdater::FlipGradients() {
  const int used = cur_;
  cur_ ^= 1;
  return used;
}

void OffloadShardUpdater::UpdateOnHost(int grads, const optim::AdamWHyper& hyper, int64_t step,
                                       float grad_scale) {
  for (size_t b = 0; b < plan_->buckets().size(); ++b) {
    pipeline_->Update(Spans(b, hyper), grads, step, grad_scale, nullptr, 0);
  }
  pipeline_->ZeroGradients(grads);
}

absl::StatusOr<device::Stream*> OffloadShardUpdater::CopyBucketToDevice(size_t bucket, char* owned_params) {
  const Bucket& b = plan_->buckets()[bucket];
  ZF_RETURN_IF_ERROR(pipeline_->CopyParamsToDevice(b.shard_offset, b.layout.shard_numel, owned_params));
  return &pipeline_->h2d_stream();
}

absl::Status OffloadShardUpdater::CopyStateToHost(float* master, float* m, float* v) {
  const size_t bytes = plan_->shard_numel() * sizeof(float);
  if (bytes == 0) return absl::OkStatus();
  std::memcpy(master, this->master(), bytes);
  if (q8_ != nullptr) {
    q8_->CopyToHost(m, v, nullptr, nullptr);  // the scales: CopyMomentScalesToHost
    return absl::OkStatus();
  }
  std::memcpy(m, exp_avg(), bytes);
  std::memcpy(v, exp_avg_sq(), bytes);
  return absl::OkStatus();
}

absl::Status OffloadShardUpdater::CopyMomentScalesToHost(float* m_absmax, float* v_absmax) {
  if (q8_ == nullptr) return ShardUpdater::CopyMomentScalesToHost(m_absmax, v_absmax);
  q8_->CopyScalesToHost(m_absmax, v_absmax);
  return absl::OkStatus();
}

absl::Status OffloadShardUpdater::CopyStateFromHostWithScales(const float* master, const float* m,
                                                              const float* v, const float* m_absmax,
                                                              const float* v_absmax) {
  if (q8_ == nullptr) return CopyStateFromHost(master, m, v);
  std::memcpy(this->master(), master, plan_->shard_numel() * sizeof(float));
  q8_->CopyFromHost(m, v, m_absmax, v_absmax);
  return absl::OkStatus();
}

absl::Status OffloadShardUpdater::CopyStateFromHost(const float* master, const float* m, const float* v) {
  if (q8_ != nullptr) return CopyStateFromHostWithScales(master, m, v, nullptr, nullptr);
  const size_t bytes = plan_->shard_numel() * sizeof(float);
  if (bytes == 0) return absl::OkStatus();
  std::memcpy(this->master(), master, bytes);
  std::memcpy(exp_avg(), m, bytes);
  std::memcpy(exp_avg_sq(), v, bytes);
  return absl::OkStatus();
}

absl::Status OffloadShardUpdater::Synchronize(absl::Duration timeout) {
  ZF_RETURN_IF_ERROR(pipeline_->WaitGradients(timeout));
  return pipeline_->h2d_stream().Synchronize(timeout);
}

sharding::ShardMemory OffloadShardUpdater::memory() const {
  sharding::ShardMemory m;
  const size_t shard = plan_->shard_numel() * sizeof(float);
  const size_t moments = q8_ != nullptr ? q8_->bytes() : 2 * shard;
  m.state_bytes = shard + moments;
  m.master_bytes = shard;
  m.shard_grad_bytes = pipeline_->gradient_bytes();
  m.pinned_bytes = pipeline_->pinned_bytes();
  m.host_bytes = pipeline_->host_bytes() + (q8_ != nullptr ? q8_->bytes() : 0);
  return m;
}

}  // namespace zerofit::offload
