// The state directory (job store, token, address, job spec, sbatch script) is private to the user who runs
// zerofit: specs, paths and logs are nobody else's business, the token is a password, and a directory other
// users can write lets them replace the address a client sends its token to, or the token file itself.
// The directory is 0700, each file in it 0600; a directory or token file other users could write (or, for
// the token, read) is refused with an error that names the path and the chmod that fixes it.
#pragma once

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"

namespace zerofit::cli {

// Creates `dir` with mode 0700 (missing parents with the usual mode), or checks the existing one with
// CheckPrivateDir.
absl::Status MakePrivateDir(const std::string& dir);

// Refuses a directory another user owns or that its group or other users can write.
absl::Status CheckPrivateDir(const std::string& dir);

// Refuses a token file another user owns or that its group or other users can read or write.
absl::Status CheckTokenFile(const std::string& path);

// Writes `text` to `path` atomically (a temporary file of mode `mode`, fsync, rename over `path`).
absl::Status WritePrivateFileAtomic(const std::string& path, const std::string& text, mode_t mode = 0600);

}  // namespace zerofit::cli
