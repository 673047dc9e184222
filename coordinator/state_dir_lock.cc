#include "coordinator/state_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace zerofit::coordinator {
namespace {

// The holder's "pid P, address A" from the lock file's contents; what is missing says so.
std::string DescribeHolder(const std::string& path) {
  std::string pid = "unknown", address = "not listening yet";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd >= 0) {
    char buf[1024];
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    ::close(fd);
    for (absl::string_view line : absl::StrSplit(absl::string_view(buf, n > 0 ? n : 0), '\n')) {
      if (absl::ConsumePrefix(&line, "pid ")) pid = std::string(absl::StripAsciiWhitespace(line));
      if (absl::ConsumePrefix(&line, "address ")) address = std::string(absl::StripAsciiWhitespace(line));
    }
  }
  return absl::StrCat("pid ", pid, ", address ", address);
}

}  // namespace

absl::StatusOr<StateDirLock> StateDirLock::Acquire(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "lock").string();
  // 0600 like every file of a state directory (the umask may only narrow it; fchmod below tightens a lock
  // file of an older zerofit).
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("--state-dir ", dir, ": cannot open ", path));
  StateDirLock lock(fd, path);  // closes fd on every return below
  int rc;
  do {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno == EWOULDBLOCK) {
    return absl::FailedPreconditionError(absl::StrCat(
        "state directory ", dir, " is in use by another zerofit serve or run (", DescribeHolder(path),
        "): one coordinator per state directory; stop that one or pass another --state-dir (lock: ", path,
        ")"));
  }
  if (rc != 0) return absl::ErrnoToStatus(errno, absl::StrCat(path, ": flock"));
  if (::fchmod(fd, 0600) != 0) return absl::ErrnoToStatus(errno, absl::StrCat(path, ": fchmod"));
  if (absl::Status s = lock.WriteHolder(""); !s.ok()) return s;
  return lock;
}

absl::Status StateDirLock::SetAddress(const std::string& address) { return WriteHolder(address); }

absl::Status StateDirLock::WriteHolder(const std::string& address) {
  std::string text = absl::StrCat("pid ", ::getpid(), "\n");
  if (!address.empty()) absl::StrAppend(&text, "address ", address, "\n");
  // Written in place (a rename would replace the locked inode): new bytes first, then the length, so a
  // reader sees the old or the new holder, never an empty file.
  if (::pwrite(fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()) ||
      ::ftruncate(fd_, static_cast<off_t>(text.size())) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat(path_, ": write"));
  }
  return absl::OkStatus();
}

StateDirLock::StateDirLock(StateDirLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

StateDirLock& StateDirLock::operator=(StateDirLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

StateDirLock::~StateDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

}  // namespace zerofit::coordinator
