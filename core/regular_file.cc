#include "core/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace zerofit::core {
namespace {

class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a plain file";
}

}  // namespace

absl::StatusOr<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes, bool follow_links) {
  // O_NONBLOCK: open(2) of a FIFO returns at once instead of waiting for a writer (no effect on a regular
  // file). O_NOCTTY: a terminal named here does not become our controlling terminal.
  ScopedFd fd(
      ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (follow_links ? 0 : O_NOFOLLOW)));
  if (fd.get() < 0) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) {
    return absl::DataLossError(absl::StrCat(path, ": fstat: ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file (", KindOf(st.st_mode), ")"));
  }
  auto too_large = [&](uint64_t bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", bytes, " bytes, more than the limit of ", max_bytes, " bytes"));
  };
  if (static_cast<uint64_t>(st.st_size) > max_bytes) return too_large(static_cast<uint64_t>(st.st_size));
  std::string text;
  text.resize(static_cast<size_t>(st.st_size));
  size_t have = 0;
  char probe = 0;  // a file that grew since fstat: read one byte past its size to notice
  while (true) {
    char* into = have < text.size() ? text.data() + have : &probe;
    const size_t want = have < text.size() ? text.size() - have : 1;
    const ssize_t n = ::read(fd.get(), into, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::DataLossError(absl::StrCat(path, ": read: ", std::strerror(errno)));
    if (n == 0) break;
    if (have >= text.size()) {
      if (text.size() + 1 > max_bytes) return too_large(text.size() + 1);
      text.push_back(probe);  // grew: keep reading, still bounded by max_bytes
      have = text.size();
      continue;
    }
    have += static_cast<size_t>(n);
  }
  text.resize(have);
  return text;
}

}  // namespace zerofit::core
