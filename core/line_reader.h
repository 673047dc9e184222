// std::getline with a bound on the line's length: a file that is not JSONL (a JSON array on one line, a
// binary or compressed file, /dev/zero) is refused at its first overlong line instead of being read into
// memory whole.
#pragma once

#include <cstddef>
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

}  // namespace zerofit::core
