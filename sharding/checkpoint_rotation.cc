#include "sharding/checkpoint_rotation.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/text_file.h"

namespace zerofit::sharding {
namespace {

namespace fs = std::filesystem;

// A real directory (not a link to one) directly under the listed root.
bool IsPlainDirectory(const fs::directory_entry& e) {
  std::error_code ec;
  return e.symlink_status(ec).type() == fs::file_type::directory && !ec;
}

bool OwnedBy(const fs::path& dir, const core::DirOwner& owner) {
  const auto marked = core::ReadDirOwner(dir.string());
  return marked.ok() && *marked == owner;
}

absl::Status RemoveAll(const fs::path& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("remove ", dir.string(), ": ", ec.message()));
  return absl::OkStatus();
}

// The folders of `root`, or none when it does not exist.
absl::StatusOr<std::vector<fs::directory_entry>> List(const std::string& root) {
  std::vector<fs::directory_entry> entries;
  std::error_code ec;
  fs::directory_iterator it(root, ec);
  if (ec == std::errc::no_such_file_or_directory) return entries;
  if (ec) return absl::InternalError(absl::StrCat("list ", root, ": ", ec.message()));
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return absl::InternalError(absl::StrCat("list ", root, ": ", ec.message()));
    if (IsPlainDirectory(*it)) entries.push_back(*it);
  }
  return entries;
}

// Removes `root/latest` when the folder it names is gone (or it names none); a `latest` naming a folder that
// is still there (the new owner's, or the user's) stays.
absl::Status RemoveDanglingLatest(const std::string& root) {
  const fs::path latest = fs::path(root) / "latest";
  const auto name = core::ReadTextFile(latest.string());
  if (!name.ok()) return absl::OkStatus();
  const std::string folder(absl::StripAsciiWhitespace(*name));
  std::error_code ec;
  if (!folder.empty() && folder.find('/') == std::string::npos && fs::exists(fs::path(root) / folder, ec)) {
    return absl::OkStatus();
  }
  fs::remove(latest, ec);
  if (ec) return absl::InternalError(absl::StrCat("remove ", latest.string(), ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> RetireOtherJobsCheckpoints(const std::string& root,
                                                                    const core::DirOwner& owner) {
  std::error_code ec;
  if (!fs::exists(root, ec) || fs::is_empty(root, ec)) return std::vector<std::string>{};
  auto entries = List(root);
  if (!entries.ok()) return entries.status();
  const auto root_owner = core::ReadDirOwner(root);
  if (absl::IsNotFound(root_owner.status())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint.dir ", root, " is not empty and zerofit did not create it (no ", core::kDirOwnerFile,
        "): zerofit replaces only what it wrote; give this job an empty or new directory"));
  }
  if (!root_owner.ok()) return root_owner.status();
  std::vector<std::string> removed;
  for (const fs::directory_entry& e : *entries) {
    if (!absl::StartsWith(e.path().filename().string(), "step-")) continue;
    const auto marked = core::ReadDirOwner(e.path().string());
    if (!marked.ok() || *marked == owner) continue;
    if (absl::Status s = RemoveAll(e.path()); !s.ok()) return s;
    removed.push_back(e.path().string());
  }
  std::sort(removed.begin(), removed.end());
  if (absl::Status s = RemoveDanglingLatest(root); !s.ok()) return s;
  if (*root_owner != owner) {
    if (absl::Status s = core::WriteDirOwner(root, owner); !s.ok()) return s;
  }
  return removed;
}

absl::StatusOr<std::vector<std::string>> AdoptCheckpoints(const std::string& root,
                                                          const core::DirOwner& owner) {
  std::error_code ec;
  if (!fs::exists(root, ec) || fs::is_empty(root, ec)) return std::vector<std::string>{};
  const auto root_owner = core::ReadDirOwner(root);
  if (absl::IsNotFound(root_owner.status())) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint.dir ", root, " is not empty and zerofit did not create it (no ",
                     core::kDirOwnerFile, "): zerofit continues only from checkpoints it wrote"));
  }
  if (!root_owner.ok()) return root_owner.status();
  std::vector<std::string> adopted;
  const auto name = core::ReadTextFile((fs::path(root) / "latest").string());
  const std::string folder = name.ok() ? std::string(absl::StripAsciiWhitespace(*name)) : "";
  const auto from = folder.empty() || folder.find('/') != std::string::npos
                        ? absl::NotFoundError("no latest checkpoint")
                        : core::ReadDirOwner((fs::path(root) / folder).string());
  if (from.ok() && *from != owner) {
    auto entries = List(root);
    if (!entries.ok()) return entries.status();
    for (const fs::directory_entry& e : *entries) {
      if (!absl::StartsWith(e.path().filename().string(), "step-") || !OwnedBy(e.path(), *from)) continue;
      if (absl::Status s = core::WriteDirOwner(e.path().string(), owner); !s.ok()) return s;
      adopted.push_back(e.path().string());
    }
  }
  std::sort(adopted.begin(), adopted.end());
  if (*root_owner != owner) {
    if (absl::Status s = core::WriteDirOwner(root, owner); !s.ok()) return s;
  }
  return adopted;
}

absl::StatusOr<std::vector<std::string>> RemoveStaleCheckpointWrites(const std::string& root,
                                                                     const core::DirOwner& owner) {
  auto entries = List(root);
  if (!entries.ok()) return entries.status();
  std::vector<std::string> removed;
  for (const fs::directory_entry& e : *entries) {
    const std::string name = e.path().filename().string();
    if (!absl::StartsWith(name, "step-") || !absl::EndsWith(name, ".tmp")) continue;
    std::error_code ec;
    const bool empty = fs::is_empty(e.path(), ec) && !ec;
    if (!empty && !OwnedBy(e.path(), owner)) continue;
    if (absl::Status s = RemoveAll(e.path()); !s.ok()) return s;
    removed.push_back(e.path().string());
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

absl::StatusOr<std::vector<std::string>> RotateCheckpoints(const std::string& root,
                                                           const core::DirOwner& owner, int64_t newest_step,
                                                           int keep) {
  if (keep < 1) return absl::InvalidArgumentError("RotateCheckpoints: keep must be >= 1");
  auto entries = List(root);
  if (!entries.ok()) return entries.status();
  std::vector<std::pair<int64_t, fs::path>> ours;  // (step, folder)
  for (const fs::directory_entry& e : *entries) {
    const std::string name = e.path().filename().string();
    int64_t step = 0;
    if (absl::StartsWith(name, "step-") && absl::SimpleAtoi(name.substr(5), &step) && step <= newest_step &&
        OwnedBy(e.path(), owner)) {
      ours.emplace_back(step, e.path());
    }
  }
  std::sort(ours.begin(), ours.end());
  std::vector<std::string> removed;
  for (size_t i = 0; i + static_cast<size_t>(keep) < ours.size(); ++i) {
    if (absl::Status s = RemoveAll(ours[i].second); !s.ok()) return s;
    removed.push_back(ours[i].second.string());
  }
  return removed;
}

}  // namespace zerofit::sharding
