#include "coordinator/checkpoint_dir_check.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/dir_owner.h"

namespace zerofit::coordinator {
namespace {

namespace fs = std::filesystem;

constexpr size_t kNamesShown = 4;

// What the directory holds, for the message: up to kNamesShown names (sorted) and the count.
struct Listing {
  std::vector<std::string> names;
  size_t count = 0;
};

// NotFound when `dir` cannot be listed from here (missing, or not visible to the coordinator).
absl::StatusOr<Listing> List(const std::string& dir) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return absl::NotFoundError(absl::StrCat(dir, ": ", ec.message()));
  Listing l;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return absl::NotFoundError(absl::StrCat(dir, ": ", ec.message()));
    ++l.count;
    l.names.push_back(it->path().filename().string());
  }
  std::sort(l.names.begin(), l.names.end());
  if (l.names.size() > kNamesShown) l.names.resize(kNamesShown);
  return l;
}

std::string Describe(const Listing& l) {
  return absl::StrCat(absl::StrJoin(l.names, ", "), l.count > l.names.size() ? ", ..." : "", ": ", l.count,
                      l.count == 1 ? " entry" : " entries");
}

}  // namespace

absl::Status CheckCheckpointDirAtSubmit(const jobspec::CheckpointSpec& checkpoint,
                                        const std::string& request_id, const std::string& source, int line) {
  const std::string& dir = checkpoint.dir;
  if (dir.empty()) return absl::OkStatus();
  const std::string where =
      absl::StrCat(source, line > 0 ? absl::StrCat(":", line) : "", ": field 'checkpoint.dir': ", dir);
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (ec || st.type() == fs::file_type::not_found) {
    return absl::OkStatus();  // created by the first save, or not visible here: the workers check it
  }
  if (st.type() != fs::file_type::directory) {
    return absl::FailedPreconditionError(absl::StrCat(where, " is not a directory; give a directory path"));
  }
  const auto listing = List(dir);
  if (!listing.ok() || listing->count == 0) return absl::OkStatus();
  constexpr const char* kWhat =
      "; zerofit never deletes or overwrites what it did not write: give this job an empty or new directory";
  const auto owner = core::ReadDirOwner(dir);
  if (owner.ok() && owner->request == request_id && !request_id.empty()) return absl::OkStatus();
  // Replaced, or taken over, by the job's rank 0 before its first step (sharding/checkpoint_rotation.h).
  if (owner.ok() && (checkpoint.overwrite || checkpoint.resume)) return absl::OkStatus();
  if (owner.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        where, " already holds another job's checkpoints (", owner->Describe(), "; ", Describe(*listing),
        "): give this job an empty or new directory, continue from them with 'checkpoint.resume: true' "
        "(zerofit run --resume), or replace them with 'checkpoint.overwrite: true' "
        "(zerofit run --overwrite-checkpoints)"));
  }
  return absl::FailedPreconditionError(absl::StrCat(where, " is not empty (", Describe(*listing),
                                                    ") and zerofit did not create it (no ",
                                                    core::kDirOwnerFile, ")", kWhat));
}

}  // namespace zerofit::coordinator
