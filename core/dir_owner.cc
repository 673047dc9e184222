#include "core/dir_owner.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "core/regular_file.h"
#include "core/text_file.h"
#include "nlohmann/json.hpp"

namespace zerofit::core {
namespace {

constexpr const char* kFormat = "zerofit-owner";
constexpr size_t kMaxMarkerBytes = 4096;

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
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 && (errno == ENOENT || errno == ENOTDIR)) {
    return absl::NotFoundError(absl::StrCat(path, ": no owner marker"));
  }
  // Not following links (a link is not a marker zerofit wrote), never blocking on a FIFO, bounded.
  auto read = ReadRegularFile(path, kMaxMarkerBytes, /*follow_links=*/false);
  if (!read.ok()) {
    return absl::DataLossError(absl::StrCat("not a zerofit owner marker: ", read.status().message()));
  }
  const std::string& text = *read;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("format", "") != kFormat) {
    return absl::DataLossError(absl::StrCat(path, ": field 'format' is not '", kFormat, "'"));
  }
  return DirOwnerFromJson(text);
}

}  // namespace zerofit::core
