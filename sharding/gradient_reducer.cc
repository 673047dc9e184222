#include "sharding/gradient_reducer.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace zerofit::sharding {

using comm::Buffer;
using device::MemoryKind;

const char* AccumulationModeName(AccumulationMode mode) {
  switch (mode) {
    case AccumulationMode::kReduceScatterEveryMicroBatch:
      return "reduce-scatter-every-micro-batch";
    case AccumulationMode::kReduceOncePerStep:
      return "reduce-once-per-step";
  }
  return "unknown";
}

GradientReducer::GradientReducer(const BucketPlan* plan, const ReducerOptions& options,
                                 comm::Communicator* comm, device::Device* device, ShardUpdater* sink,
                                 StepProfile* profile)
    : plan_(plan),
      options_(options),
      comm_(comm),
      device_(device),
      compute_(&device->compute_stream()),
      sink_(sink),
      profile_(profile) {}

GradientReducer::~GradientReducer() {
  // Collectives still in flight read our buffers: let them finish (bounded by the communicator's deadline).
  for (auto& f : in_flight_) (void)f.work->Wait(comm_->options().timeout);
}

absl::StatusOr<std::unique_ptr<GradientReducer>> GradientReducer::Create(
    const BucketPlan* plan, const ReducerOptions& options, comm::Communicator* comm, device::Device* device,
    ShardUpdater* sink, StepProfile* profile) {
  std::unique_ptr<GradientReducer> r(new GradientReducer(plan, options, comm, device, sink, profile));
  ZF_RETURN_IF_ERROR(r->Allocate());
  return r;
}

absl::Status GradientReducer::Allocate() {
  const size_t nb = plan_->buckets().size();
  const bool once = options_.accumulation_mode == AccumulationMode::kReduceOncePerStep;
  if (once) {
    ZF_ASSIGN_OR_RETURN(flat_grads_,
                        device_->Allocate(plan_->flat_numel() * elem_bytes(), MemoryKind::kDevice));
  }
  // An fp32 reduce-scatter once per step may land in the updater's accumulator itself: no landing buffer.
  // Otherwise one the size of the shard where the updater reads the landed shards at the step, else a few
  // slots as large as the largest buckets' shards.
  const bool direct = once && nb > 0 && sink_->direct_landing(0) != nullptr;
  if (direct) {
    // nothing to allocate
  } else if (sink_->KeepsLanding()) {
    ZF_ASSIGN_OR_RETURN(recv_, device_->Allocate(plan_->shard_numel() * elem_bytes(), MemoryKind::kDevice));
  } else {
    ZF_ASSIGN_OR_RETURN(landing_pool_,
                        LandingPool::Create(device_, LargestFirst(&GradientReducer::shard_bytes)));
  }
  arrived_.assign(nb, 0);
  bucket_staging_.assign(nb, -1);
  param_seen_.assign(plan_->params().size(), false);
  // The staging pool is allocated up front, min(buckets, max_staging_buffers) buffers sized as that many
  // largest buckets: memory is known before the first backward (the planner predicts it) and the hooks never
  // allocate, except in the deadlock case of AcquireStaging. One buffer of the largest bucket, not all: that
  // one is often the embedding, 20x a layer's buckets (Qwen2.5-0.5B: 136M elements against 4.4M), and a
  // bucket takes the smallest free buffer that holds it.
  if (!once) {
    for (size_t bytes : LargestFirst(&GradientReducer::bucket_bytes)) ZF_RETURN_IF_ERROR(AddStaging(bytes));
  }
  return absl::OkStatus();
}

std::vector<size_t> GradientReducer::LargestFirst(size_t (GradientReducer::*bytes_of)(size_t) const) const {
  const size_t nb = plan_->buckets().size();
  const size_t pool = std::min(nb, static_cast<size_t>(std::max(1, options_.max_staging_buffers)));
  std::vector<size_t> sizes;
  for (size_t b = 0; b < nb; ++b) sizes.push_back((this->*bytes_of)(b));
  std::partial_sort(sizes.begin(), sizes.begin() + pool, sizes.end(), std::greater<size_t>());
  sizes.resize(pool);
  return sizes;
}

// A pool slot for bucket b, as AcquireStaging finds a staging buffer: a free one that holds the shard; else
// the oldest in-flight bucket is completed, which frees its slot; with nothing in flight a slot of this size
// is added.
absl::StatusOr<std::pair<void*, int>> GradientReducer::Landing(size_t b) {
  if (!landing_pool_) {
    float* direct = recv_.empty() ? sink_->direct_landing(b) : nullptr;
    if (direct != nullptr) return std::make_pair(static_cast<void*>(direct), -1);
    return std::make_pair(recv_.at(plan_->buckets()[b].shard_offset * elem_bytes()), -1);
  }
  for (;;) {
    ZF_ASSIGN_OR_RETURN(const int slot, landing_pool_->TryAcquire(shard_bytes(b), *compute_));
    if (slot >= 0) return std::make_pair(landing_pool_->data(slot), slot);
    if (in_flight_.empty()) {
      ZF_RETURN_IF_ERROR(landing_pool_->Add(shard_bytes(b)));
    } else {
      ZF_RETURN_IF_ERROR(CompleteOldest());
    }
  }
}

absl::Status GradientReducer::AddStaging(size_t bytes) {
  ZF_ASSIGN_OR_RETURN(device::Buffer buf, device_->Allocate(bytes, MemoryKind::kDevice));
  staging_.push_back(std::move(buf));
  free_staging_.push_back(static_cast<int>(staging_.size()) - 1);
  return absl::OkStatus();
}

size_t GradientReducer::staging_bytes() const {
  size_t total = 0;
  for (const auto& s : staging_) total += s.bytes();
  return total;
}

void* GradientReducer::grad_data(size_t i) {
  if (options_.accumulation_mode != AccumulationMode::kReduceOncePerStep) return nullptr;
  return flat_grads_.at(plan_->placement(i).flat_offset * elem_bytes());
}

bool GradientReducer::reducing_this_micro_batch() const {
  return options_.accumulation_mode == AccumulationMode::kReduceScatterEveryMicroBatch || last_of_step_;
}

absl::Status GradientReducer::BeginMicroBatch(bool last_of_step) {
  if (in_micro_batch_)
    return absl::FailedPreconditionError("BeginMicroBatch: the previous micro-batch has not ended");
  in_micro_batch_ = true;
  last_of_step_ = last_of_step;
  std::fill(arrived_.begin(), arrived_.end(), 0);
  std::fill(param_seen_.begin(), param_seen_.end(), false);
  deferred_.clear();
  released_.clear();
  next_launch_ = 0;
  // This micro-batch's reduce-scatters (ordered after the compute stream) reuse the shard-sized landing
  // buffer or the accumulator: the previous micro-batch's consumers must be done with it first (a pool slot
  // orders itself).
  if (landing_pool_) return absl::OkStatus();
  return sink_->OrderAfterReceives(*compute_);
}

// The smallest free buffer that holds bucket `b`, so that the pool's largest-bucket buffers stay free for the
// large buckets. None fits: wait for the oldest reduce-scatter to free one. If nothing is in flight, every
// buffer belongs to a bucket that is still filling or that waits for an earlier bucket to launch (buckets
// launch in one order on every rank, and the order gradients arrive in need not be it: a bucket of small
// parameters used far apart in the forward, say a layer's two norms, completes late): waiting would deadlock,
// so a buffer of exactly this bucket's size is added (and kept for the next micro-batches). Sizing it to the
// largest bucket instead cost 4 x 272 MB on a Qwen2.5-0.5B shape, whose largest bucket is the embedding.
// Offered gradients (OfferGradient) never get here for a waiting bucket: they wait themselves. Then only the
// bucket next in launch order comes here, and the reserved buffer, which fits any bucket and which only such
// buckets take, is free or held by a launched bucket: no buffer is ever added.
absl::Status GradientReducer::AcquireStaging(size_t b) {
  for (;;) {
    const int idx = FreeStagingFor(b, /*spare_reserved=*/false);
    if (idx >= 0) return TakeStaging(b, idx);
    if (static_cast<int>(staging_.size()) < options_.max_staging_buffers || in_flight_.empty()) {
      ZF_RETURN_IF_ERROR(AddStaging(bucket_bytes(b)));
      continue;
    }
    ZF_RETURN_IF_ERROR(CompleteOldest());  // frees the oldest in-flight bucket's staging buffer
  }
}

int GradientReducer::FreeStagingFor(size_t b, bool spare_reserved) const {
  const size_t bytes = bucket_bytes(b);
  int best = -1;
  for (int idx : free_staging_) {
    if (spare_reserved && idx == kReservedStaging) continue;
    const size_t have = staging_[idx].bytes();
    if (have >= bytes && (best < 0 || have < staging_[best].bytes())) best = idx;
  }
  return best;
}

absl::Status GradientReducer::TakeStaging(size_t b, int idx) {
  free_staging_.erase(std::find(free_staging_.begin(), free_staging_.end(), idx));
  bucket_staging_[b] = idx;
  // Parameters that never report, and padding, reduce as zeros.
  return compute_->Fill(staging_[idx].data(), 0, bucket_bytes(b));
}

absl::Status GradientReducer::StoreGradient(size_t i, const void* grad) {
  const ParamPlacement& p = plan_->placement(i);
  const size_t numel = plan_->params()[i].numel;
  if (options_.accumulation_mode == AccumulationMode::kReduceScatterEveryMicroBatch) {
    if (grad == nullptr) {
      return absl::InvalidArgumentError("OnGradientReady: a gradient is required in reduce-scatter mode");
    }
    if (bucket_staging_[p.bucket] < 0) ZF_RETURN_IF_ERROR(AcquireStaging(p.bucket));
    return compute_->Copy(staging_[bucket_staging_[p.bucket]].at(p.offset_in_bucket * elem_bytes()), grad,
                          numel * elem_bytes());
  }
  void* dst = grad_data(i);
  if (grad == nullptr || grad == dst) return absl::OkStatus();  // accumulated in place already
  // A gradient that autograd produced elsewhere: add it into the flat buffer.
  if (options_.param_dtype == core::DType::kFloat32) {
    return compute_->Accumulate(grad, core::DType::kFloat32, static_cast<float*>(dst), numel, 1.0f);
  }
  if (!device_->device_memory_is_host()) {
    return absl::UnimplementedError(
        "OnGradientReady: a 16-bit gradient outside the flat gradient buffer in reduce-once mode needs a "
        "host "
        "device; let autograd accumulate into grad_data(i)");
  }
  const core::DType dtype = options_.param_dtype;
  return compute_->HostFunc([dst, grad, dtype, numel] {
    for (size_t k = 0; k < numel; ++k) {
      core::StoreFromFloat(dst, dtype, k,
                           core::LoadAsFloat(dst, dtype, k) + core::LoadAsFloat(grad, dtype, k));
    }
    return absl::OkStatus();
  });
}

absl::Status GradientReducer::Arrive(size_t i, const void* grad, bool may_defer) {
  if (!in_micro_batch_)
    return absl::FailedPreconditionError("OnGradientReady outside BeginMicroBatch/EndMicroBatch");
  if (i >= plan_->params().size()) {
    return absl::OutOfRangeError(
        absl::StrCat("OnGradientReady: parameter index ", i, " >= ", plan_->params().size()));
  }
  if (param_seen_[i]) {
    return absl::FailedPreconditionError(absl::StrCat("OnGradientReady: gradient of parameter ", i, " ('",
                                                      plan_->params()[i].name,
                                                      "') reported twice in one micro-batch"));
  }
  param_seen_[i] = true;
  const size_t b = plan_->placement(i).bucket;
  const bool staged = options_.accumulation_mode == AccumulationMode::kReduceScatterEveryMicroBatch;
  if (may_defer && staged && grad != nullptr && bucket_staging_[b] < 0 && b != next_launch_) {
    const int idx = deferred_.count(b) ? -1 : FreeStagingFor(b, /*spare_reserved=*/true);
    if (idx < 0) {
      deferred_[b].emplace_back(i, grad);
      return absl::OkStatus();
    }
    ZF_RETURN_IF_ERROR(TakeStaging(b, idx));
  }
  ZF_RETURN_IF_ERROR(Store(i, grad));
  if (!reducing_this_micro_batch()) return absl::OkStatus();
  ZF_RETURN_IF_ERROR(LaunchReadyBuckets(/*from_backward=*/true));
  // Reduce-scatters that already finished are handed on now, still during backward.
  ZF_RETURN_IF_ERROR(CompleteFinished());
  return ServeDeferred(/*ending=*/false);
}

absl::Status GradientReducer::Store(size_t i, const void* grad) {
  ZF_RETURN_IF_ERROR(StoreGradient(i, grad));
  ++arrived_[plan_->placement(i).bucket];
  released_.push_back(i);
  return absl::OkStatus();
}

std::vector<size_t> GradientReducer::TakeReleasedGradients() {
  std::vector<size_t> out;
  out.swap(released_);
  return out;
}

// Deferred buckets never launched (their gradients are not counted yet), so the lowest one is at or after
// the next to launch. That one always gets a buffer; the others only a spare one, else they keep waiting.
// Once backward has ended, the buckets before the lowest one are launched as they are (what has not come
// counts as zero), which makes it the next to launch.
absl::Status GradientReducer::ServeDeferred(bool ending) {
  while (!deferred_.empty()) {
    auto it = deferred_.begin();
    const size_t b = it->first;
    if (ending) {
      const auto& buckets = plan_->buckets();
      for (size_t k = next_launch_; k < b; ++k) arrived_[k] = static_cast<uint32_t>(buckets[k].params.size());
      ZF_RETURN_IF_ERROR(LaunchReadyBuckets(/*from_backward=*/false));
    }
    if (bucket_staging_[b] < 0) {
      if (b == next_launch_) {
        ZF_RETURN_IF_ERROR(AcquireStaging(b));
      } else {
        const int idx = FreeStagingFor(b, /*spare_reserved=*/true);
        if (idx < 0) return absl::OkStatus();
        ZF_RETURN_IF_ERROR(TakeStaging(b, idx));
      }
    }
    const std::vector<std::pair<size_t, const void*>> grads = std::move(it->second);
    deferred_.erase(it);
    for (const auto& [i, grad] : grads) ZF_RETURN_IF_ERROR(Store(i, grad));
    ZF_RETURN_IF_ERROR(LaunchReadyBuckets(/*from_backward=*/!ending));
    ZF_RETURN_IF_ERROR(CompleteFinished());
  }
  return absl::OkStatus();
}

absl::Status GradientReducer::LaunchReadyBuckets(bool from_backward) {
  const auto& buckets = plan_->buckets();
  const comm::Device where = comm::DeviceOf(*device_);
  while (next_launch_ < buckets.size() && arrived_[next_launch_] == buckets[next_launch_].params.size()) {
    const size_t b = next_launch_++;
    const Bucket& bucket = buckets[b];
    int staging = -1;
    void* src;
    if (options_.accumulation_mode == AccumulationMode::kReduceOncePerStep) {
      src = flat_grads_.at(bucket.flat_offset * elem_bytes());
    } else {
      if (bucket_staging_[b] < 0) ZF_RETURN_IF_ERROR(AcquireStaging(b));
      staging = bucket_staging_[b];
      src = staging_[staging].data();
    }
    ZF_ASSIGN_OR_RETURN(const auto landing, Landing(b));
    Buffer in{src, bucket.layout.padded_numel, options_.param_dtype, where};
    Buffer out{landing.first, bucket.layout.shard_numel, options_.param_dtype, where};
    const absl::Time launched = absl::Now();
    ZF_ASSIGN_OR_RETURN(auto work, comm_->ReduceScatter(in, out, comm::ReduceOp::kSum, compute_));
    in_flight_.push_back(InFlight{b, std::move(work), staging, landing.second, launched, last_of_step_});
    ++stats_.buckets_launched;
    if (from_backward) ++stats_.buckets_launched_before_end;
  }
  return absl::OkStatus();
}

absl::Status GradientReducer::CompleteOldest() {
  InFlight f = std::move(in_flight_.front());
  in_flight_.pop_front();
  const Bucket& bucket = plan_->buckets()[f.bucket];
  const void* landing = f.landing >= 0  ? landing_pool_->data(f.landing)
                        : recv_.empty() ? nullptr
                                        : recv_.at(bucket.shard_offset * elem_bytes());
  {
    ScopedStage d2h(profile_, Stage::kD2H);
    ZF_RETURN_IF_ERROR(sink_->Receive(f.bucket, landing, *f.work, f.last_of_step));
  }
  if (f.landing >= 0) ZF_RETURN_IF_ERROR(landing_pool_->Release(f.landing, *sink_));
  profile_->Record(Stage::kReduceScatter, f.launched, absl::Now());
  if (f.staging >= 0) {
    // The staging buffer is refilled on the compute stream: order it after the collective that read it.
    ZF_RETURN_IF_ERROR(f.work->OrderBefore(*compute_, comm_->options().timeout));
    free_staging_.push_back(f.staging);
    bucket_staging_[f.bucket] = -1;
  }
  return absl::OkStatus();
}

absl::Status GradientReducer::CompleteFinished() {
  while (!in_flight_.empty() && in_flight_.front().work->IsCompleted()) ZF_RETURN_IF_ERROR(CompleteOldest());
  return absl::OkStatus();
}

absl::Status GradientReducer::Drain() {
  while (!in_flight_.empty()) ZF_RETURN_IF_ERROR(CompleteOldest());
  return absl::OkStatus();
}

absl::Status GradientReducer::EndMicroBatch() {
  if (!in_micro_batch_) return absl::FailedPreconditionError("EndMicroBatch without BeginMicroBatch");
  in_micro_batch_ = false;
  if (!reducing_this_micro_batch()) return absl::OkStatus();
  ZF_RETURN_IF_ERROR(ServeDeferred(/*ending=*/true));
  const auto& buckets = plan_->buckets();
  for (size_t b = 0; b < buckets.size(); ++b) arrived_[b] = static_cast<uint32_t>(buckets[b].params.size());
  ZF_RETURN_IF_ERROR(LaunchReadyBuckets(/*from_backward=*/false));
  return Drain();
}

absl::Status GradientReducer::ResetAfterStep() {
  if (flat_grads_.empty()) return absl::OkStatus();
  // The reduce-scatters read the flat buffer; the updater's stream has waited for each of them.
  ZF_RETURN_IF_ERROR(sink_->OrderAfterReceives(*compute_));
  return compute_->Fill(flat_grads_.data(), 0, flat_grads_.bytes());
}

}  // namespace zerofit::sharding
