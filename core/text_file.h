// Whole-file text I/O for small files (specs, manifests, tokens, addresses).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zerofit::core {

// NotFound naming `path` when it cannot be opened; DataLoss on a read error.
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

// The same for a file a person names on a command line (a job spec), which may be a pipe (`<(envsubst <
// job.yaml)`) or, by mistake, a device: read up to `max_bytes`, and InvalidArgument naming the limit past it
// (/dev/zero would otherwise fill the memory).
absl::StatusOr<std::string> ReadTextFile(const std::string& path, uint64_t max_bytes);

// Writes `text` to `path` atomically: a temporary file next to it, fsync, rename, fsync of the directory. A
// crash leaves either the old or the new contents.
absl::Status WriteTextFileAtomic(const std::string& path, const std::string& text);

// fsync of a file or (directory = true) of a directory entry list.
absl::Status FsyncPath(const std::string& path, bool directory);

}  // namespace zerofit::core
