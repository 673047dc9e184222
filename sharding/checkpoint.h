// World-size-independent sharded checkpoints of the ZeRO-2 optimizer (the model is its fp32 master copy).
//
// Layout under `root`:
//   step-00000120/manifest.json          format, world size, step, loss scaler, parameter names and sizes,
//   and for
//                                        every rank file the (parameter, offset, count) runs it holds, plus
//                                        the caller's `extra` JSON (e.g. the data sampler's position)
//   step-00000120/rank-00003.safetensors master, exp_avg, exp_avg_sq: rank 3's real elements (no padding),
//   runs
//                                        in manifest order
//   latest                               the name of the newest complete checkpoint
// A save writes into `step-N.tmp`, fsyncs every file, then (rank 0, after all ranks finished) renames the
// directory and replaces `latest` atomically; the previous checkpoint is deleted only after that, so a crash
// at any point leaves the last complete checkpoint readable. Loading on a different number of ranks
// re-slices: each rank reads the runs that overlap its new shard from whichever files hold them.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "sharding/zero2_optimizer.h"

namespace zerofit::sharding {

struct CheckpointInfo {
  std::string dir;     // the checkpoint directory that was written or read
  int64_t step = 0;    // optimizer steps applied
  int world_size = 0;  // of the run that wrote it
  std::string extra;   // the caller's JSON, verbatim
};

// Collective over the optimizer's communicator. `extra` must be JSON (an object) or empty. Keeps `keep`
// complete checkpoints (>= 1) besides the new one's predecessor being removed only after `latest` moved.
absl::StatusOr<CheckpointInfo> SaveCheckpoint(Zero2Optimizer& optimizer, const std::string& root,
                                              const std::string& extra = "", int keep = 1);

// Collective. Reads `root/latest` (or `root` itself when it is a checkpoint directory), checks that the
// parameters match (names and sizes, in order; the error names the first mismatch and the file), loads this
// rank's slice and rebuilds the parameters on every rank. NotFound when there is no checkpoint yet.
absl::StatusOr<CheckpointInfo> LoadCheckpoint(Zero2Optimizer& optimizer, const std::string& root);

// Not collective, reads no tensors: what `root/latest` (or the checkpoint directory `root`) holds. NotFound
// when there is no checkpoint; DataLoss for a manifest that is not one of ours.
absl::StatusOr<CheckpointInfo> ReadLatestCheckpoint(const std::string& root);

}  // namespace zerofit::sharding
