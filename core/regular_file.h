// Reading a file whose path someone else chose (a job spec's `deepspeed:` config, a model's config.json, read
// by the coordinator on a client's behalf) without trusting what the path names: a FIFO or a device would
// block the reading thread forever (open(2) of a FIFO waits for a writer; a read of /dev/zero never ends),
// and a huge file would exhaust memory.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace zerofit::core {

// The whole contents of `path` when it is a regular file (symbolic links followed) of at most `max_bytes`.
// Never blocks on what the path names: it is opened O_NONBLOCK and checked with fstat before any read.
// Errors name the path: NotFound (cannot open), InvalidArgument ("not a regular file (a FIFO)", "N bytes,
// more than the limit of M"), DataLoss (a read error).
// `follow_links` false: a symbolic link is refused too (O_NOFOLLOW), for files zerofit wrote itself.
absl::StatusOr<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes,
                                            bool follow_links = true);

}  // namespace zerofit::core
