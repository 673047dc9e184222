#include "sharding/zero2_optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/serial_executor.h"
#include "core/status_macros.h"

namespace zerofit::sharding {

using comm::Buffer;
using comm::ReduceOp;
using core::DType;

const char* AccumulationModeName(AccumulationMode mode) {
  switch (mode) {
    case AccumulationMode::kReduceScatterEveryMicroBatch:
      return "reduce-scatter-every-micro-batch";
    case AccumulationMode::kReduceOncePerStep:
      return "reduce-once-per-step";
  }
  return "unknown";
}

Zero2Optimizer::Zero2Optimizer(BucketPlan plan, const Zero2Options& options, comm::Communicator* comm)
    : plan_(std::move(plan)), options_(options), comm_(comm), scaler_(options.loss_scaling) {}

Zero2Optimizer::~Zero2Optimizer() {
  // Background jobs use this object's buffers: let them finish before the members go away.
  if (update_thread_) (void)update_thread_->Drain(comm_->options().timeout);
  if (copy_engine_) (void)copy_engine_->Drain(comm_->options().timeout);
  std::lock_guard<std::mutex> lock(publish_mu_);
  for (auto& w : gathers_) (void)w->Wait(comm_->options().timeout);
}

absl::StatusOr<std::unique_ptr<Zero2Optimizer>> Zero2Optimizer::Create(std::vector<ParamSpec> params,
                                                                       const Zero2Options& options,
                                                                       comm::Communicator* comm) {
  if (comm == nullptr) return absl::InvalidArgumentError("Zero2Optimizer: communicator is null");
  if (options.param_dtype == DType::kFloat64) {
    return absl::InvalidArgumentError("Zero2Optimizer: param_dtype must be fp32, bf16 or fp16");
  }
  if (options.max_staging_buffers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Zero2Optimizer: max_staging_buffers ", options.max_staging_buffers, " < 1"));
  }
  if (options.offload.delayed_update && !options.offload.enabled) {
    return absl::InvalidArgumentError("Zero2Optimizer: offload.delayed_update needs offload.enabled");
  }
  const size_t elem = core::DTypeSize(options.param_dtype);
  if (options.alignment_bytes == 0 || options.alignment_bytes % elem != 0) {
    return absl::InvalidArgumentError(absl::StrCat("Zero2Optimizer: alignment_bytes ",
                                                   options.alignment_bytes,
                                                   " is not a positive multiple of the element size ", elem));
  }
  BucketPlanOptions po;
  po.bucket_bytes = options.bucket_bytes;
  po.element_bytes = elem;
  po.alignment = options.alignment_bytes / elem;
  po.world = comm->world_size();
  po.rank = comm->rank();
  ZF_ASSIGN_OR_RETURN(BucketPlan plan, BucketPlan::Make(params, po));
  std::unique_ptr<Zero2Optimizer> opt(new Zero2Optimizer(std::move(plan), options, comm));
  ZF_RETURN_IF_ERROR(opt->Allocate());
  return opt;
}

absl::Status Zero2Optimizer::Allocate() {
  const size_t shard = plan_.shard_numel();
  const bool host = options_.offload.enabled;
  ZF_ASSIGN_OR_RETURN(flat_params_, core::AlignedBuffer::Allocate(plan_.flat_numel() * elem_bytes()));
  if (options_.accumulation == AccumulationMode::kReduceOncePerStep) {
    ZF_ASSIGN_OR_RETURN(flat_grads_, core::AlignedBuffer::Allocate(plan_.flat_numel() * elem_bytes()));
  }
  // Optimizer state exists for this rank's shard only: it is never materialised for the full model.
  ZF_ASSIGN_OR_RETURN(master_, StateBuffer::Allocate(shard * sizeof(float), host));
  ZF_ASSIGN_OR_RETURN(exp_avg_, StateBuffer::Allocate(shard * sizeof(float), host));
  ZF_ASSIGN_OR_RETURN(exp_avg_sq_, StateBuffer::Allocate(shard * sizeof(float), host));
  ZF_ASSIGN_OR_RETURN(shard_grads_[0], StateBuffer::Allocate(shard * sizeof(float), host));
  if (options_.offload.delayed_update) {
    ZF_ASSIGN_OR_RETURN(shard_grads_[1], StateBuffer::Allocate(shard * sizeof(float), host));
  }
  if (host) {
    ZF_ASSIGN_OR_RETURN(host_grad_lowp_, StateBuffer::Allocate(shard * elem_bytes(), true));
    ZF_ASSIGN_OR_RETURN(host_param_lowp_, StateBuffer::Allocate(shard * elem_bytes(), true));
    copy_engine_ = std::make_unique<core::SerialExecutor>();
    if (options_.offload.delayed_update) update_thread_ = std::make_unique<core::SerialExecutor>();
  }
  if (!reduce_into_shard()) {
    ZF_ASSIGN_OR_RETURN(recv_, core::AlignedBuffer::Allocate(shard * elem_bytes()));
  }
  // Without offload the update stands in for the on-device optimizer: one thread.
  ZF_ASSIGN_OR_RETURN(adamw_,
                      offload::CpuAdamW::Create(host ? options_.offload.threads : 1,
                                                host ? options_.offload.simd : offload::DetectSimdLevel()));
  const size_t nb = plan_.buckets().size();
  bucket_segments_.assign(nb, {0, 0});
  const auto& segs = plan_.segments();
  for (size_t b = 0, k = 0; b < nb; ++b) {
    const Bucket& bucket = plan_.buckets()[b];
    bucket_segments_[b].first = k;
    while (k < segs.size() && segs[k].shard_offset < bucket.shard_offset + bucket.layout.shard_numel) ++k;
    bucket_segments_[b].second = k;
  }
  arrived_.assign(nb, 0);
  bucket_staging_.assign(nb, -1);
  // The staging pool is allocated up front (min(buckets, max_staging_buffers) buffers): memory is known
  // before the first backward (the planner predicts it) and the autograd hooks never allocate. It grows past
  // the limit only in the deadlock case of AcquireStaging.
  if (options_.accumulation == AccumulationMode::kReduceScatterEveryMicroBatch) {
    const size_t pool = std::min(nb, static_cast<size_t>(std::max(1, options_.max_staging_buffers)));
    for (size_t k = 0; k < pool; ++k) {
      ZF_ASSIGN_OR_RETURN(core::AlignedBuffer buf,
                          core::AlignedBuffer::Allocate(plan_.max_bucket_numel() * elem_bytes()));
      staging_.push_back(std::move(buf));
      free_staging_.push_back(static_cast<int>(staging_.size()) - 1);
    }
  }
  param_seen_.assign(plan_.params().size(), false);
  profile_.BeginStep();
  return absl::OkStatus();
}

void* Zero2Optimizer::param_data(size_t i) { return flat_param_at(plan_.placement(i).flat_offset); }

void* Zero2Optimizer::grad_data(size_t i) {
  if (options_.accumulation != AccumulationMode::kReduceOncePerStep) return nullptr;
  return flat_grads_.as<char>() + plan_.placement(i).flat_offset * elem_bytes();
}

absl::Status Zero2Optimizer::pin_status() const {
  for (const StateBuffer* b : {&master_, &exp_avg_, &exp_avg_sq_, &host_grad_lowp_, &host_param_lowp_}) {
    if (!b->pinned_buffer().pin_status().ok()) return b->pinned_buffer().pin_status();
  }
  return absl::OkStatus();
}

absl::Status Zero2Optimizer::InitializeFromParameters(bool broadcast) {
  ZF_RETURN_IF_ERROR(Flush());
  if (broadcast && comm_->world_size() > 1) {
    std::vector<std::unique_ptr<comm::Work>> works;
    for (const Bucket& b : plan_.buckets()) {
      Buffer buf{flat_param_at(b.flat_offset), b.layout.padded_numel, options_.param_dtype};
      ZF_ASSIGN_OR_RETURN(auto w, comm_->Broadcast(buf, 0));
      works.push_back(std::move(w));
    }
    for (auto& w : works) ZF_RETURN_IF_ERROR(w->Wait(comm_->options().timeout));
  }
  // Padding stays zero in the master copy; real elements come from the (now identical) parameters.
  master_.Zero();
  for (const ShardSegment& s : plan_.segments()) {
    core::ConvertElements(flat_param_at(s.flat_offset), options_.param_dtype,
                          master_.as<float>() + s.shard_offset, DType::kFloat32, s.numel);
  }
  return absl::OkStatus();
}

absl::Status Zero2Optimizer::RestoreFromShards(int64_t step, const LossScalerState& scaler) {
  ZF_RETURN_IF_ERROR(Flush());
  if (step < 0) return absl::InvalidArgumentError(absl::StrCat("RestoreFromShards: step ", step, " < 0"));
  step_ = step;
  scaler_.Restore(scaler);
  for (const ShardSegment& s : plan_.segments()) {
    core::ConvertElements(master_.as<float>() + s.shard_offset, DType::kFloat32, flat_param_at(s.flat_offset),
                          options_.param_dtype, s.numel);
  }
  std::vector<std::unique_ptr<comm::Work>> works;
  for (size_t b = 0; b < plan_.buckets().size(); ++b) {
    const Bucket& bucket = plan_.buckets()[b];
    Buffer out{flat_param_at(bucket.flat_offset), bucket.layout.padded_numel, options_.param_dtype};
    Buffer in{owned_params(b), bucket.layout.shard_numel, options_.param_dtype};
    ZF_ASSIGN_OR_RETURN(auto w, comm_->AllGather(in, out));
    works.push_back(std::move(w));
  }
  for (auto& w : works) ZF_RETURN_IF_ERROR(w->Wait(comm_->options().timeout));
  return absl::OkStatus();
}

bool Zero2Optimizer::reducing_this_micro_batch() const {
  return options_.accumulation == AccumulationMode::kReduceScatterEveryMicroBatch || last_of_step_;
}

absl::Status Zero2Optimizer::BeginMicroBatch(bool last_of_step) {
  if (in_micro_batch_)
    return absl::FailedPreconditionError("BeginMicroBatch: the previous micro-batch has not ended");
  in_micro_batch_ = true;
  last_of_step_ = last_of_step;
  std::fill(arrived_.begin(), arrived_.end(), 0);
  std::fill(param_seen_.begin(), param_seen_.end(), false);
  next_launch_ = 0;
  return absl::OkStatus();
}

absl::StatusOr<int> Zero2Optimizer::AcquireStaging() {
  while (free_staging_.empty()) {
    // Grow up to the limit; past it, wait for the oldest reduce-scatter to free its buffer. If every buffer
    // belongs to a bucket that is still filling (nothing in flight), waiting would deadlock: grow instead.
    if (static_cast<int>(staging_.size()) < options_.max_staging_buffers || in_flight_.empty()) {
      ZF_ASSIGN_OR_RETURN(core::AlignedBuffer buf,
                          core::AlignedBuffer::Allocate(plan_.max_bucket_numel() * elem_bytes()));
      staging_.push_back(std::move(buf));
      free_staging_.push_back(static_cast<int>(staging_.size()) - 1);
      break;
    }
    ZF_RETURN_IF_ERROR(CompleteOldest());  // frees the oldest in-flight bucket's staging buffer
  }
  const int idx = free_staging_.back();
  free_staging_.pop_back();
  staging_[idx].Zero();  // parameters that never report, and padding, reduce as zeros
  return idx;
}

absl::Status Zero2Optimizer::OnGradientReady(size_t i, const void* grad) {
  if (!in_micro_batch_)
    return absl::FailedPreconditionError("OnGradientReady outside BeginMicroBatch/EndMicroBatch");
  if (i >= plan_.params().size()) {
    return absl::OutOfRangeError(
        absl::StrCat("OnGradientReady: parameter index ", i, " >= ", plan_.params().size()));
  }
  if (param_seen_[i]) {
    return absl::FailedPreconditionError(absl::StrCat("OnGradientReady: gradient of parameter ", i, " ('",
                                                      plan_.params()[i].name,
                                                      "') reported twice in one micro-batch"));
  }
  param_seen_[i] = true;
  const ParamPlacement& p = plan_.placement(i);
  const size_t numel = plan_.params()[i].numel;
  if (options_.accumulation == AccumulationMode::kReduceOncePerStep) {
    void* dst = grad_data(i);
    if (grad != nullptr && grad != dst) {
      // Accumulate a gradient that autograd produced elsewhere into the flat buffer.
      if (options_.param_dtype == DType::kFloat32) {
        core::AccumulateToFloat(grad, DType::kFloat32, static_cast<float*>(dst), numel);
      } else {
        for (size_t k = 0; k < numel; ++k) {
          core::StoreFromFloat(dst, options_.param_dtype, k,
                               core::LoadAsFloat(dst, options_.param_dtype, k) +
                                   core::LoadAsFloat(grad, options_.param_dtype, k));
        }
      }
    }
  } else {
    if (grad == nullptr) {
      return absl::InvalidArgumentError("OnGradientReady: a gradient is required in reduce-scatter mode");
    }
    if (bucket_staging_[p.bucket] < 0) {
      ZF_ASSIGN_OR_RETURN(bucket_staging_[p.bucket], AcquireStaging());
    }
    std::memcpy(staging_[bucket_staging_[p.bucket]].as<char>() + p.offset_in_bucket * elem_bytes(), grad,
                numel * elem_bytes());
  }
  ++arrived_[p.bucket];
  if (!reducing_this_micro_batch()) return absl::OkStatus();
  ZF_RETURN_IF_ERROR(LaunchReadyBuckets(/*from_backward=*/true));
  // Reduce-scatters that already finished are consumed now (D2H, accumulation), still during backward.
  return CompleteFinished();
}

absl::Status Zero2Optimizer::LaunchReadyBuckets(bool from_backward) {
  const auto& buckets = plan_.buckets();
  while (next_launch_ < buckets.size() && arrived_[next_launch_] == buckets[next_launch_].params.size()) {
    const size_t b = next_launch_++;
    const Bucket& bucket = buckets[b];
    const char* src;
    int staging = -1;
    if (options_.accumulation == AccumulationMode::kReduceOncePerStep) {
      src = flat_grads_.as<char>() + bucket.flat_offset * elem_bytes();
    } else {
      if (bucket_staging_[b] < 0) {
        ZF_ASSIGN_OR_RETURN(bucket_staging_[b], AcquireStaging());
      }
      staging = bucket_staging_[b];
      src = staging_[staging].as<char>();
    }
    Buffer in{const_cast<char*>(src), bucket.layout.padded_numel, options_.param_dtype};
    char* landing = reduce_into_shard() ? reinterpret_cast<char*>(shard_grads() + bucket.shard_offset)
                                        : recv_.as<char>() + bucket.shard_offset * elem_bytes();
    Buffer out{landing, bucket.layout.shard_numel, options_.param_dtype};
    const absl::Time launched = absl::Now();
    ZF_ASSIGN_OR_RETURN(auto work, comm_->ReduceScatter(in, out, ReduceOp::kSum));
    in_flight_.push_back(InFlight{b, std::move(work), staging, launched});
    ++stats_.buckets_launched;
    if (from_backward) ++stats_.buckets_launched_before_end;
  }
  return absl::OkStatus();
}

absl::Status Zero2Optimizer::CompleteOldest() {
  InFlight f = std::move(in_flight_.front());
  in_flight_.pop_front();
  ZF_RETURN_IF_ERROR(f.work->Wait(comm_->options().timeout));
  profile_.Record(Stage::kReduceScatter, f.launched, absl::Now());
  const Bucket& bucket = plan_.buckets()[f.bucket];
  if (!reduce_into_shard()) {
    const char* src = recv_.as<char>() + bucket.shard_offset * elem_bytes();
    ScopedStage d2h(options_.offload.enabled ? &profile_ : nullptr, Stage::kD2H);
    if (options_.offload.enabled) {
      // Device -> pinned host in the parameter dtype (bf16 over the bus), then fp32 accumulation on the host.
      char* host = host_grad_lowp_.as<char>() + bucket.shard_offset * elem_bytes();
      std::memcpy(host, src, bucket.layout.shard_numel * elem_bytes());
      src = host;
    }
    core::AccumulateToFloat(src, options_.param_dtype, shard_grads() + bucket.shard_offset,
                            bucket.layout.shard_numel);
  }
  if (f.staging >= 0) {
    free_staging_.push_back(f.staging);
    bucket_staging_[f.bucket] = -1;
  }
  return absl::OkStatus();
}

absl::Status Zero2Optimizer::CompleteFinished() {
  while (!in_flight_.empty() && in_flight_.front().work->IsCompleted()) ZF_RETURN_IF_ERROR(CompleteOldest());
  return absl::OkStatus();
}

absl::Status Zero2Optimizer::Drain() {
  while (!in_flight_.empty()) ZF_RETURN_IF_ERROR(CompleteOldest());
  return absl::OkStatus();
}

absl::Status Zero2Optimizer::EndMicroBatch(double units) {
  if (!in_micro_batch_) return absl::FailedPreconditionError("EndMicroBatch without BeginMicroBatch");
  if (!(units >= 0.0))
    return absl::InvalidArgumentError(absl::StrCat("EndMicroBatch: units ", units, " < 0"));
  in_micro_batch_ = false;
  local_units_ += units;
  if (!reducing_this_micro_batch()) return absl::OkStatus();
  // Parameters that did not take part in this backward contribute zero gradients.
  const auto& buckets = plan_.buckets();
  for (size_t b = 0; b < buckets.size(); ++b) arrived_[b] = static_cast<uint32_t>(buckets[b].params.size());
  ZF_RETURN_IF_ERROR(LaunchReadyBuckets(/*from_backward=*/false));
  return Drain();
}

void Zero2Optimizer::UpdateBucket(size_t b, const float* grads, char* out, int64_t step, float grad_scale,
                                  bool copy_tiles) {
  ScopedStage stage(&profile_, Stage::kCpuAdamW);
  const Bucket& bucket = plan_.buckets()[b];
  std::vector<offload::CpuAdamW::Task> tasks;
  for (size_t k = bucket_segments_[b].first; k < bucket_segments_[b].second; ++k) {
    const ShardSegment& s = plan_.segments()[k];
    offload::CpuAdamW::Task t;
    t.hyper = options_.adamw;
    if (!s.weight_decay) t.hyper.weight_decay = 0.0f;
    t.spans.param = master_.as<float>() + s.shard_offset;
    t.spans.grad = grads + s.shard_offset;
    t.spans.grad_dtype = DType::kFloat32;
    t.spans.m = exp_avg_.as<float>() + s.shard_offset;
    t.spans.v = exp_avg_sq_.as<float>() + s.shard_offset;
    t.spans.n = s.numel;
    t.spans.param_out = out + (s.shard_offset - bucket.shard_offset) * elem_bytes();
    t.spans.out_dtype = options_.param_dtype;
    tasks.push_back(t);
  }
  if (!copy_tiles) return adamw_->Step(tasks, step, grad_scale);
  adamw_->Step(tasks, step, grad_scale, [&](size_t task, size_t begin, size_t end) {
    const size_t offset =
        (plan_.segments()[bucket_segments_[b].first + task].shard_offset - bucket.shard_offset + begin) *
        elem_bytes();
    const size_t bytes = (end - begin) * elem_bytes();
    const char* src = out + offset;
    char* dst = owned_params(b) + offset;
    copy_engine_->Submit([this, src, dst, bytes] {
      ScopedStage h2d(&profile_, Stage::kH2D);
      std::memcpy(dst, src, bytes);
    });
  });
}

void Zero2Optimizer::PublishBucket(size_t b, bool copy) {
  const Bucket& bucket = plan_.buckets()[b];
  copy_engine_->Submit([this, b, &bucket, copy] {
    if (copy) {
      ScopedStage h2d(&profile_, Stage::kH2D);
      std::memcpy(owned_params(b), host_param_lowp_.as<char>() + bucket.shard_offset * elem_bytes(),
                  bucket.layout.shard_numel * elem_bytes());
    }
    Buffer out{flat_param_at(bucket.flat_offset), bucket.layout.padded_numel, options_.param_dtype};
    Buffer in{owned_params(b), bucket.layout.shard_numel, options_.param_dtype};
    auto work = comm_->AllGather(in, out);
    std::lock_guard<std::mutex> lock(publish_mu_);
    if (work.ok()) {
      gathers_.push_back(std::move(*work));
    } else if (publish_status_.ok()) {
      publish_status_ = work.status();
    }
  });
}

absl::Status Zero2Optimizer::WaitPublished() {
  const absl::Time start = absl::Now();
  if (copy_engine_) ZF_RETURN_IF_ERROR(copy_engine_->Drain(comm_->options().timeout));
  std::vector<std::unique_ptr<comm::Work>> gathers;
  {
    std::lock_guard<std::mutex> lock(publish_mu_);
    ZF_RETURN_IF_ERROR(publish_status_);
    gathers.swap(gathers_);
  }
  for (auto& w : gathers) ZF_RETURN_IF_ERROR(w->Wait(comm_->options().timeout));
  profile_.Record(Stage::kAllGather, start, absl::Now());
  return absl::OkStatus();
}

absl::Status Zero2Optimizer::UpdateAndGather(float grad_scale) {
  const size_t nb = plan_.buckets().size();
  if (!options_.offload.enabled) {
    // On-device update: write the new parameters straight into the flat buffer; bucket b's all-gather runs
    // while bucket b+1 is being updated.
    std::vector<std::unique_ptr<comm::Work>> works;
    const absl::Time start = absl::Now();
    for (size_t b = 0; b < nb; ++b) {
      const Bucket& bucket = plan_.buckets()[b];
      UpdateBucket(b, shard_grads(), owned_params(b), step_, grad_scale, /*copy_tiles=*/false);
      Buffer out{flat_param_at(bucket.flat_offset), bucket.layout.padded_numel, options_.param_dtype};
      Buffer in{owned_params(b), bucket.layout.shard_numel, options_.param_dtype};
      ZF_ASSIGN_OR_RETURN(auto w, comm_->AllGather(in, out));
      works.push_back(std::move(w));
    }
    for (auto& w : works) ZF_RETURN_IF_ERROR(w->Wait(comm_->options().timeout));
    profile_.Record(Stage::kAllGather, start, absl::Now());
    return absl::OkStatus();
  }
  // Offload: CPU AdamW(b) || H2D of b's finished tiles and all-gather(b-1) on the copy engine || earlier
  // all-gathers in MPI.
  for (size_t b = 0; b < nb; ++b) {
    UpdateBucket(b, shard_grads(),
                 host_param_lowp_.as<char>() + plan_.buckets()[b].shard_offset * elem_bytes(), step_,
                 grad_scale, /*copy_tiles=*/true);
    PublishBucket(b, /*copy=*/false);
  }
  return WaitPublished();
}

absl::Status Zero2Optimizer::Flush() {
  if (!update_pending_) return absl::OkStatus();
  update_pending_ = false;
  ZF_RETURN_IF_ERROR(update_thread_->Drain(comm_->options().timeout));
  for (size_t b = 0; b < plan_.buckets().size(); ++b) PublishBucket(b, /*copy=*/true);
  return WaitPublished();
}

absl::StatusOr<StepResult> Zero2Optimizer::Step() {
  if (in_micro_batch_)
    return absl::FailedPreconditionError("Step inside a micro-batch: call EndMicroBatch first");
  ZF_RETURN_IF_ERROR(Drain());
  const size_t shard = plan_.shard_numel();
  float* g = shard_grads();
  // One all-reduce carries both the squared norm and the unit count.
  double* sums = norm_sums_;
  sums[0] = 0.0;
  sums[1] = local_units_;
  for (size_t k = 0; k < shard; ++k) sums[0] += static_cast<double>(g[k]) * g[k];
  ZF_RETURN_IF_ERROR(comm::WaitFor(comm_->AllReduce(Buffer{sums, 2, DType::kFloat64}, ReduceOp::kSum),
                                   comm_->options().timeout));
  local_units_ = 0.0;
  StepResult r;
  r.loss_scale = scaler_.scale();
  r.units = sums[1];
  auto reset_grads = [&] {
    shard_grads_[cur_grads_].Zero();
    flat_grads_.Zero();
  };
  if (!(r.units > 0.0)) {
    reset_grads();
    return absl::FailedPreconditionError(
        "Step: no rank reported any samples/tokens since the last step (EndMicroBatch units sum to 0); "
        "the gradient cannot be normalised");
  }
  // A delayed update from the previous step is published first: its parameters become visible now, one step
  // late by design.
  ZF_RETURN_IF_ERROR(Flush());
  // Non-finite sums mean some rank overflowed: every rank sees the same all-reduced value and skips.
  const bool overflow = !std::isfinite(sums[0]);
  r.applied = scaler_.Update(overflow);
  if (r.applied) {
    const double denom = static_cast<double>(r.loss_scale) * r.units;
    const double norm = std::sqrt(sums[0]) / denom;
    double clip = 1.0;
    if (options_.max_grad_norm > 0.0f) clip = std::min(1.0, options_.max_grad_norm / (norm + 1e-6));
    r.grad_norm = static_cast<float>(norm);
    r.clip_coef = static_cast<float>(clip);
    const float grad_scale = static_cast<float>(clip / denom);
    const bool delay = options_.offload.delayed_update && step_ >= options_.offload.delayed_update_start_step;
    ++step_;
    if (delay) {
      // Run this step's CPU update in the background; the next Step() (or Flush) publishes it. The next
      // micro-batches reduce into the other gradient accumulator meanwhile.
      const int used = cur_grads_;
      const int64_t step = step_;
      cur_grads_ ^= 1;
      update_pending_ = true;
      update_thread_->Submit([this, used, step, grad_scale] {
        for (size_t b = 0; b < plan_.buckets().size(); ++b) {
          UpdateBucket(b, shard_grads_[used].as<float>(),
                       host_param_lowp_.as<char>() + plan_.buckets()[b].shard_offset * elem_bytes(), step,
                       grad_scale, /*copy_tiles=*/false);
        }
        shard_grads_[used].Zero();
      });
      flat_grads_.Zero();
      r.step = step_;
      r.breakdown = profile_.EndStep();
      return r;
    }
    ZF_RETURN_IF_ERROR(UpdateAndGather(grad_scale));
  }
  r.step = step_;
  reset_grads();
  r.breakdown = profile_.EndStep();
  return r;
}

Zero2MemoryStats Zero2Optimizer::memory() const {
  Zero2MemoryStats m;
  m.master_bytes = master_.bytes();
  m.exp_avg_bytes = exp_avg_.bytes();
  m.exp_avg_sq_bytes = exp_avg_sq_.bytes();
  m.shard_grad_bytes = shard_grads_[0].bytes() + shard_grads_[1].bytes();
  m.flat_param_bytes = flat_params_.bytes();
  m.flat_grad_bytes = flat_grads_.bytes();
  for (const auto& s : staging_) m.staging_bytes_peak += s.bytes();
  m.recv_bytes = recv_.bytes();
  for (const StateBuffer* b : {&master_, &exp_avg_, &exp_avg_sq_, &shard_grads_[0], &shard_grads_[1],
                               &host_grad_lowp_, &host_param_lowp_}) {
    m.pinned_bytes += b->pinned_bytes();
    if (options_.offload.enabled) m.host_state_bytes += b->bytes();
  }
  return m;
}

}  // namespace zerofit::sharding
