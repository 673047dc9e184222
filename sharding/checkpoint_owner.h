// Which job a checkpoint directory belongs to. A job's checkpoints carry its request id (the submit's
// idempotency key, unique per job and kept by a requeued Slurm job) in their `extra` JSON; a job starting
// from step 0 refuses a checkpoint.dir that holds another job's checkpoint, since its first save would
// replace that checkpoint.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace zerofit::sharding {

// The `extra` JSON of a job's checkpoint at `step`: {"job": ..., "request": ..., "step": ...}.
std::string CheckpointOwnerExtra(const std::string& job_id, const std::string& request_id, int64_t step);

// OK when `dir` holds no checkpoint or its latest checkpoint is `request_id`'s; FailedPrecondition naming
// the directory, the checkpoint's step and owner (and what to do) otherwise, also for a directory whose
// `latest` names something that is not a zerofit checkpoint.
absl::Status CheckCheckpointDirIsOurs(const std::string& dir, const std::string& request_id);

}  // namespace zerofit::sharding
