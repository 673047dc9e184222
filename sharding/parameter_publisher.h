// ParameterPublisher: after the update, every rank's updated block of each bucket is all-gathered into the
// full flat parameter buffer, bucket by bucket, each gather ordered after the stream that wrote its block;
// Finish() orders the compute stream (the next forward) after all of them.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "comm/communicator.h"
#include "device/device.h"
#include "sharding/bucket_plan.h"
#include "sharding/step_profile.h"

namespace zerofit::sharding {

class ParameterPublisher {
 public:
  // `flat_params`: the flat parameter buffer (device, param_dtype); everything must outlive the publisher.
  ParameterPublisher(const BucketPlan* plan, core::DType param_dtype, comm::Communicator* comm,
                     device::Device* device, char* flat_params, StepProfile* profile);
  ~ParameterPublisher();

  // This rank's block of bucket b inside the flat buffer.
  char* owned_block(size_t b);
  // All-gather of bucket b, reading this rank's block once the work enqueued on `after` so far has run.
  absl::Status Gather(size_t b, device::Stream* after);
  // Every rank ends with rank 0's parameters (buckets broadcast after the work on `after`).
  absl::Status Broadcast(device::Stream* after);
  // The compute stream waits for every pending gather or broadcast.
  absl::Status Finish();

 private:
  comm::Buffer BucketBuffer(size_t b);

  const BucketPlan* plan_;
  core::DType param_dtype_;
  comm::Communicator* comm_;
  device::Device* device_;
  char* flat_params_;
  StepProfile* profile_;
  std::vector<std::unique_ptr<comm::Work>> pending_;
  absl::Time first_launch_ = absl::InfiniteFuture();
};

}  // namespace zerofit::sharding
