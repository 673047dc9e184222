#include "sharding/parameter_publisher.h"

#include <algorithm>

#include "core/status_macros.h"

namespace zerofit::sharding {

ParameterPublisher::ParameterPublisher(const BucketPlan* plan, core::DType param_dtype,
                                       comm::Communicator* comm, device::Device* device, char* flat_params,
                                       StepProfile* profile)
    : plan_(plan),
      param_dtype_(param_dtype),
      comm_(comm),
      device_(device),
      flat_params_(flat_params),
      profile_(profile) {}

ParameterPublisher::~ParameterPublisher() {
  // Pending gathers write the flat buffer: let them finish (bounded by the communicator's deadline).
  for (auto& w : pending_) (void)w->Wait(comm_->options().timeout);
}

char* ParameterPublisher::owned_block(size_t b) {
  const Bucket& bucket = plan_->buckets()[b];
  return flat_params_ + (bucket.flat_offset + bucket.layout.shard_offset) * core::DTypeSize(param_dtype_);
}

comm::Buffer ParameterPublisher::BucketBuffer(size_t b) {
  const Bucket& bucket = plan_->buckets()[b];
  return comm::Buffer{flat_params_ + bucket.flat_offset * core::DTypeSize(param_dtype_),
                      bucket.layout.padded_numel, param_dtype_, comm::DeviceOf(*device_)};
}

absl::Status ParameterPublisher::Gather(size_t b, device::Stream* after) {
  comm::Buffer out = BucketBuffer(b);
  comm::Buffer in{owned_block(b), plan_->buckets()[b].layout.shard_numel, param_dtype_, out.device};
  first_launch_ = std::min(first_launch_, absl::Now());
  ZF_ASSIGN_OR_RETURN(auto work, comm_->AllGather(in, out, after));
  pending_.push_back(std::move(work));
  return absl::OkStatus();
}

absl::Status ParameterPublisher::Broadcast(device::Stream* after) {
  if (comm_->world_size() == 1) return absl::OkStatus();
  for (size_t b = 0; b < plan_->buckets().size(); ++b) {
    ZF_ASSIGN_OR_RETURN(auto work, comm_->Broadcast(BucketBuffer(b), 0, after));
    pending_.push_back(std::move(work));
  }
  return absl::OkStatus();
}

absl::Status ParameterPublisher::Finish() {
  std::vector<std::unique_ptr<comm::Work>> pending;
  pending.swap(pending_);
  for (auto& w : pending) {
    ZF_RETURN_IF_ERROR(w->OrderBefore(device_->compute_stream(), comm_->options().timeout));
  }
  if (!pending.empty() && first_launch_ != absl::InfiniteFuture()) {
    profile_->Record(Stage::kAllGather, first_launch_, absl::Now());
  }
  first_launch_ = absl::InfiniteFuture();
  return absl::OkStatus();
}

}  // namespace zerofit::sharding
