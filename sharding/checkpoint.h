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
//   step-00000120/zerofit-owner.json     the owner marker (core/dir_owner.h): which job wrote the folder
//   latest                               the name of the newest complete checkpoint
//   zerofit-owner.json                   the marker of the job that first saved here
// A save writes into `step-N.tmp`, fsyncs every file, then (rank 0, after all ranks finished) renames the
// directory and replaces `latest` atomically; the previous checkpoint is deleted only after that, so a crash
// at any point leaves the last complete checkpoint readable. Loading on a different number of ranks
// re-slices: each rank reads the runs that overlap its new shard from whichever files hold them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sharding/zero2_optimizer.h"

namespace zerofit::sharding {

struct CheckpointInfo {
  std::string dir;     // the checkpoint directory that was written or read
  int64_t step = 0;    // optimizer steps applied
  int world_size = 0;  // of the run that wrote it
  std::string extra;   // the caller's JSON, verbatim
  // SaveCheckpoint on rank 0: the stale `step-N.tmp` folders of this owner (a killed or failed earlier save)
  // it removed before writing, for the caller to report. Empty on other ranks and after a load.
  std::vector<std::string> removed_stale;
};

// Collective over the optimizer's communicator. `extra` must be JSON (an object) or empty; its "job" and
// "request" strings (sharding/checkpoint_owner.h) name the owner: every folder the save writes carries that
// owner's marker (core/dir_owner.h), and so does `root` when it had none. Before writing, removes this
// owner's stale `step-N.tmp` folders (CheckpointInfo::removed_stale). After `latest` moved, keeps the newest
// `keep` (>= 1) of this owner's checkpoints up to the new one and removes its older ones; folders without
// the owner's marker (the user's own `step-*`, another job's) are never removed
// (sharding/checkpoint_rotation.h): FailedPrecondition, naming the folder, when `step-N` or `step-N.tmp` of
// the new step is such a folder.
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
