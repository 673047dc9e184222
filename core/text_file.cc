#include "core/text_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace zerofit::core {

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read failed"));
  return ss.str();
}

absl::StatusOr<std::string> ReadTextFile(const std::string& path, uint64_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::string text;
  char piece[65536];
  while (in.read(piece, sizeof piece) || in.gcount() > 0) {
    text.append(piece, static_cast<size_t>(in.gcount()));
    if (text.size() > max_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": more than ", max_bytes, " bytes, the limit"));
    }
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read failed"));
  return text;
}

absl::Status FsyncPath(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat(path, ": open for fsync"));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return absl::ErrnoToStatus(err, absl::StrCat(path, ": fsync"));
  return absl::OkStatus();
}

absl::Status WriteTextFileAtomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  // A failed write removes what it wrote: the temporary file goes on every early return.
  auto fail = [&tmp](absl::Status why) {
    ::unlink(tmp.c_str());
    return why;
  };
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return absl::PermissionDeniedError(absl::StrCat(tmp, ": cannot open for writing"));
    out << text;
    out.close();
    if (!out) return fail(absl::DataLossError(absl::StrCat(tmp, ": write failed (disk full?)")));
  }
  if (absl::Status synced = FsyncPath(tmp, false); !synced.ok()) return fail(synced);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return fail(absl::ErrnoToStatus(errno, absl::StrCat("rename ", tmp, " -> ", path)));
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  return FsyncPath(dir.empty() ? "." : dir, true);
}

}  // namespace zerofit::core
