// std::getline with a bound on the line's length: a file that is not JSONL (a JSON array on one line, a
// binary or compressed file, /dev/zero) is refused at its first overlong line instead of being read into
// memory whole.
#pragma once

#include <cstddef>
#include <fstream>
#include <istream>
#include <string>

#include "absl/status/statusor.h"

namespace zerofit::core {

// Longer than any JSONL record zerofit reads (a preference pair, a prompt, a text to tokenize).
inline constexpr size_t kMaxLineBytes = size_t{64} << 20;

// Reads the next line of `in` into `line`, without its newline, setting the stream's state as std::getline
// does (eofbit when the stream ended before a newline; failbit too when no character was left). Returns
// false when no line was left; OutOfRange, naming the limit, when the line holds more than `max_bytes`
// bytes (the stream is then left inside that line).
absl::StatusOr<bool> ReadLine(std::istream& in, std::string* line, size_t max_bytes = kMaxLineBytes);

// Opens `path` (binary) into `in` for ReadLine. NotFound naming the path and the system's reason when it
// cannot be opened; InvalidArgument for a directory, which opens but fails its first read ("read failed
// after line 0" told nobody what was wrong). FIFOs, pipes and devices are opened as they are: a JSONL
// input may be streamed, and ReadLine bounds what a line may hold.
absl::Status OpenLineInput(const std::string& path, std::ifstream* in);

}  // namespace zerofit::core
