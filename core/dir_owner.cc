#include "core/dir_owner.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "core/text_file.h"
#include "nlohmann/json.hpp"

namespace zerofit::core {
namespace {

constexpr const char* kFormat = "zerofit-owner";
constexpr size_t kMaxMarkerBytes = 4096;

// Closes the descriptor on every path out of ReadDirOwner.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::string DirOwner::Describe() const {
  std::string s;
  if (!job.empty()) s = absl::StrCat("job ", job);
  if (!request.empty()) absl::StrAppend(&s, s.empty() ? "" : ", ", "request ", request);
  return s.empty() ? "no job named" : s;
}

DirOwner DirOwnerFromJson(const std::string& json_text) {
  DirOwner owner;
  const nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return owner;
  if (j.contains("job") && j["job"].is_string()) owner.job = j["job"].get<std::string>();
  if (j.contains("request") && j["request"].is_string()) owner.request = j["request"].get<std::string>();
  return owner;
}

absl::Status WriteDirOwner(const std::string& dir, const DirOwner& owner) {
  nlohmann::json j;
  j["format"] = kFormat;
  j["job"] = owner.job;
  j["request"] = owner.request;
  return WriteTextFileAtomic((std::filesystem::path(dir) / kDirOwnerFile).string(), j.dump() + "\n");
}

absl::StatusOr<DirOwner> ReadDirOwner(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / kDirOwnerFile).string();
  // O_NOFOLLOW: a link is not a marker zerofit wrote; O_NONBLOCK: opening a FIFO must not wait for a writer.
  const Fd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      return absl::NotFoundError(absl::StrCat(path, ": no owner marker"));
    return absl::DataLossError(
        absl::StrCat(path, ": not a zerofit owner marker (", std::strerror(errno), ")"));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_size > static_cast<off_t>(kMaxMarkerBytes)) {
    return absl::DataLossError(
        absl::StrCat(path, ": not a zerofit owner marker (not a regular file of at most 4 KiB)"));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::DataLossError(absl::StrCat(path, ": read failed"));
    got += static_cast<size_t>(n);
  }
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("format", "") != kFormat) {
    return absl::DataLossError(absl::StrCat(path, ": field 'format' is not '", kFormat, "'"));
  }
  return DirOwnerFromJson(text);
}

}  // namespace zerofit::core
