#include "core/line_reader.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace zerofit::core {

absl::StatusOr<bool> ReadLine(std::istream& in, std::string* line, size_t max_bytes) {
  line->clear();
  // istream::getline scans the stream's buffer for the newline a piece at a time (as fast as std::getline);
  // a full piece without one sets failbit, which here only means "the line goes on".
  char piece[16384];
  for (;;) {
    in.getline(piece, sizeof piece);
    const auto got = static_cast<size_t>(in.gcount());
    const bool full = in.fail() && !in.eof() && got == sizeof piece - 1;
    const bool ended = !in.fail() && !in.eof();  // the newline was extracted (and counted in `got`)
    const size_t stored = ended ? got - 1 : got;
    if (line->size() + stored > max_bytes) {
      return absl::OutOfRangeError(
          absl::StrCat("longer than ", max_bytes,
                       " bytes: a JSONL file holds one JSON object per line (is this a JSON "
                       "array, or a binary or compressed file?)"));
    }
    line->append(piece, stored);
    if (full) {
      in.clear(in.rdstate() & ~std::ios::failbit);
      continue;
    }
    if (ended) return true;
    // The stream ended (or failed) before a newline: a line when anything was read, as std::getline.
    if (in.bad()) return false;
    if (!line->empty() || got > 0) {
      in.clear(std::ios::eofbit);
      return true;
    }
    return false;
  }
}

absl::Status OpenLineInput(const std::string& path, std::ifstream* in) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": a directory, not a JSONL file"));
  }
  in->open(path, std::ios::binary);
  if (!*in) {
    const int err = errno;
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(err)));
  }
  return absl::OkStatus();
}

}  // namespace zerofit::core
