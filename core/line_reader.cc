#include "core/line_reader.h"

#include "absl/strings/str_cat.h"

namespace zerofit::core {

absl::StatusOr<bool> ReadLine(std::istream& in, std::string* line, size_t max_bytes) {
  line->clear();
  const std::istream::sentry ok(in, /*noskipws=*/true);
  if (!ok) return false;
  std::streambuf* buffer = in.rdbuf();
  for (;;) {
    const int c = buffer->sbumpc();
    if (c == std::char_traits<char>::eof()) {
      in.setstate(line->empty() ? std::ios::eofbit | std::ios::failbit : std::ios::eofbit);
      return !line->empty();
    }
    if (c == '\n') return true;
    if (line->size() >= max_bytes) {
      return absl::OutOfRangeError(
          absl::StrCat("longer than ", max_bytes,
                       " bytes: a JSONL file holds one JSON object per line (is this a JSON "
                       "array, or a binary or compressed file?)"));
    }
    line->push_back(static_cast<char>(c));
  }
}

}  // namespace zerofit::core
