#include "cli/private_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace zerofit::cli {
namespace {

std::string Mode(mode_t m) { return absl::StrFormat("%03o", m & 0777); }

}  // namespace

absl::Status MakePrivateDir(const std::string& dir) {
  const std::filesystem::path path(dir);
  std::error_code ec;
  if (path.has_parent_path() && !path.parent_path().empty()) {
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) return absl::PermissionDeniedError(absl::StrCat(path.parent_path().string(), ": ", ec.message()));
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, absl::StrCat("state directory ", dir, ": mkdir"));
  }
  return CheckPrivateDir(dir);
}

absl::Status CheckPrivateDir(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("state directory ", dir));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("state directory ", dir, " is not a directory"));
  }
  if (st.st_uid != ::geteuid()) {
    return absl::PermissionDeniedError(absl::StrCat("state directory ", dir, " belongs to user ", st.st_uid,
                                                    ", not to you (", ::geteuid(),
                                                    "): its owner can replace the token and the address; use "
                                                    "a directory of your own (mode 700)"));
  }
  if ((st.st_mode & 022) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        "state directory ", dir, " is writable by other users (mode ", Mode(st.st_mode),
        "): they could replace its token or address; chmod 700 ", dir, " (or pass another --state-dir)"));
  }
  return absl::OkStatus();
}

absl::Status CheckTokenFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("token file ", path));
  if (st.st_uid != ::geteuid()) {
    return absl::PermissionDeniedError(absl::StrCat("token file ", path, " belongs to user ", st.st_uid,
                                                    ", not to you (", ::geteuid(), "): remove it"));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("token file ", path, " is ", (st.st_mode & 022) != 0 ? "writable" : "readable",
                     " by other users (mode ", Mode(st.st_mode), "): chmod 600 ", path,
                     " (and make a new token if others could read it)"));
  }
  return absl::OkStatus();
}

absl::Status WritePrivateFileAtomic(const std::string& path, const std::string& text, mode_t mode) {
  const std::string tmp = path + ".tmp";
  ::unlink(tmp.c_str());  // a leftover of a crash, perhaps of another mode: O_EXCL below creates it afresh
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat(tmp, ": create"));
  size_t done = 0;
  bool ok = ::fchmod(fd, mode) == 0;  // the umask may have taken bits `mode` asks for
  while (ok && done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  ok = ok && ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) {
    ::unlink(tmp.c_str());
    return absl::ErrnoToStatus(err, absl::StrCat(tmp, ": write"));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int rename_errno = errno;
    ::unlink(tmp.c_str());  // a failed write removes what it wrote
    return absl::ErrnoToStatus(rename_errno, absl::StrCat("rename ", tmp, " -> ", path));
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

}  // namespace zerofit::cli
