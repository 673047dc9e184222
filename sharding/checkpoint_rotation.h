// What a save may delete in a checkpoint.dir: only folders zerofit wrote for the same owner. Every checkpoint
// folder (`step-N`, and `step-N.tmp` while it is written) carries core/dir_owner.h's marker from its
// creation on; a folder without it, or with another job's, is never removed, whatever its name. Neither
// function follows a symbolic link (a link named step-N is left alone, and so is what it points to).
// Not collective: rank 0 calls them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/dir_owner.h"

namespace zerofit::sharding {

// Removes the `step-*.tmp` folders of `root` that a killed or failed save of `owner` left behind (marked
// with `owner`), and empty ones (a save killed before it wrote its marker: nothing in them to lose).
// Returns their paths, sorted, for the caller to report. A missing `root` holds none.
absl::StatusOr<std::vector<std::string>> RemoveStaleCheckpointWrites(const std::string& root,
                                                                     const core::DirOwner& owner);

// Rotation after `latest` names the checkpoint of `newest_step`: of `owner`'s complete checkpoints up to
// that step (marked `step-N` folders), keeps the newest `keep` (>= 1) and removes the others; returns the
// removed paths. A later step's checkpoint is not this run's past and stays.
absl::StatusOr<std::vector<std::string>> RotateCheckpoints(const std::string& root,
                                                           const core::DirOwner& owner, int64_t newest_step,
                                                           int keep);

// A new job that may replace the checkpoints earlier zerofit jobs left in `root` (spec
// `checkpoint.overwrite`, `zerofit run --overwrite-checkpoints`; Hugging Face's overwrite_output_dir):
// removes every `step-*` folder marked by another owner than `owner` (never a folder without a marker: the
// user's), `latest` when no folder it could name is left, and marks `root` as `owner`'s. Returns the removed
// folders, sorted. A missing `root` holds none. FailedPrecondition, removing nothing, when `root` itself
// carries no marker and is not empty (a directory zerofit did not create). Not collective: rank 0 (or the
// launcher) calls it before any rank reads or writes a checkpoint.
absl::StatusOr<std::vector<std::string>> RetireOtherJobsCheckpoints(const std::string& root,
                                                                    const core::DirOwner& owner);

// A new job that continues from the checkpoint an earlier zerofit job left in `root` (spec
// `checkpoint.resume`, `zerofit run --resume`; TRL's resume_from_checkpoint): every `step-*` folder marked
// by the owner of the folder `latest` names (its checkpoints, and its stale `.tmp` writes) is re-marked as
// `owner`'s, and so is `root`, so that the new job's rotation and clean-up treat them as its own. Returns the
// re-marked folders, sorted; none when `root` holds no `latest`, or its folder carries no marker or already
// `owner`'s. FailedPrecondition, changing nothing, when `root` is not empty and carries no marker (a
// directory zerofit did not create). Not collective: rank 0 calls it before any rank reads the checkpoint.
absl::StatusOr<std::vector<std::string>> AdoptCheckpoints(const std::string& root,
                                                          const core::DirOwner& owner);

}  // namespace zerofit::sharding
