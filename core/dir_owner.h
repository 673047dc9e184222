// zerofit's owner marker on the directories it writes (checkpoint directories and the checkpoint.dir that
// holds them): a small JSON file, `zerofit-owner.json`, naming the job and its request id (the submit's
// idempotency key, unique per job and kept by a requeued Slurm job). zerofit deletes or reuses a directory
// only when the marker says the job at hand wrote it: a folder without the marker is the user's, whatever
// its name.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zerofit::core {

inline constexpr char kDirOwnerFile[] = "zerofit-owner.json";

struct DirOwner {
  std::string job;      // e.g. job-000001; empty when the writer had none (a standalone trainer)
  std::string request;  // the submit's request id; empty likewise

  bool operator==(const DirOwner& o) const { return job == o.job && request == o.request; }
  bool operator!=(const DirOwner& o) const { return !(*this == o); }
  // "job job-000001, request run-7" (the parts that are set), for messages.
  std::string Describe() const;
};

// The owner named by a checkpoint's `extra` JSON ({"job": ..., "request": ...}, sharding/checkpoint_owner.h);
// fields that are missing or not strings stay empty, and so does everything for text that is not an object.
DirOwner DirOwnerFromJson(const std::string& json_text);

// Writes `dir/zerofit-owner.json` atomically (temporary file, fsync, rename); `dir` must exist.
absl::Status WriteDirOwner(const std::string& dir, const DirOwner& owner);

// Reads `dir/zerofit-owner.json` without following a symbolic link and without blocking on a special file
// (FIFO, device): NotFound when there is no marker; DataLoss naming the file when it is not a regular file,
// is larger than 4 KiB or is not a marker zerofit wrote.
absl::StatusOr<DirOwner> ReadDirOwner(const std::string& dir);

}  // namespace zerofit::core
