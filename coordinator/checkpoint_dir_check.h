// The submit-time check of a job's checkpoint.dir: zerofit never deletes or overwrites what it did not
// write, so a new job gets a directory that is missing, empty, or marked as this job's own
// (core/dir_owner.h: the marker the first checkpoint save leaves in checkpoint.dir, naming the request id,
// which a resubmitted or requeued job keeps). A non-empty directory without that marker (the user's own
// files) is refused before any worker starts, and so is one marked by another job unless the spec says
// `checkpoint.overwrite: true` (its rank 0 then removes that job's checkpoints before the first step) or
// `checkpoint.resume: true` (its rank 0 takes them over, and the job continues from the latest).
//
// The coordinator may run where checkpoint.dir is not mounted: a path it cannot see passes here and the
// workers check it when they start (sharding/checkpoint_owner.h). The check reads the directory listing and
// the marker only: it opens no other file and follows no link inside the directory, and a marker that is a
// FIFO or a link is not read (so it cannot block).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "jobspec/job_spec.h"

namespace zerofit::coordinator {

// `source` names the spec in errors (its file), `line` the line of checkpoint.dir in it (0: unknown; see
// jobspec::FieldLine). FailedPrecondition for a directory zerofit may not use, with what it holds and what
// to do.
absl::Status CheckCheckpointDirAtSubmit(const jobspec::CheckpointSpec& checkpoint,
                                        const std::string& request_id, const std::string& source, int line);

}  // namespace zerofit::coordinator
