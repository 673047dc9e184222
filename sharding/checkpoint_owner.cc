#include "sharding/checkpoint_owner.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "sharding/checkpoint.h"

namespace zerofit::sharding {

std::string CheckpointOwnerExtra(const std::string& job_id, const std::string& request_id, int64_t step) {
  nlohmann::json j;
  j["job"] = job_id;
  j["request"] = request_id;
  j["step"] = step;
  return j.dump();
}

absl::Status CheckCheckpointDirIsOurs(const std::string& dir, const std::string& request_id) {
  const auto info = ReadLatestCheckpoint(dir);
  if (absl::IsNotFound(info.status())) return absl::OkStatus();
  constexpr const char* kWhat =
      "; a new job would replace it: give this job an empty checkpoint.dir, move the old checkpoint away, or "
      "continue from it with 'checkpoint.resume: true'";
  if (!info.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("checkpoint.dir ", dir,
                                                      " holds something that is not a readable checkpoint (",
                                                      info.status().message(), ")", kWhat));
  }
  const nlohmann::json extra = nlohmann::json::parse(info->extra, nullptr, /*allow_exceptions=*/false);
  std::string owner, job = "?";
  if (extra.is_object()) {
    if (extra.contains("request") && extra["request"].is_string())
      owner = extra["request"].get<std::string>();
    if (extra.contains("job") && extra["job"].is_string()) job = extra["job"].get<std::string>();
  }
  if (!owner.empty() && owner == request_id) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("checkpoint.dir ", dir, " already holds another job's checkpoint (step ", info->step,
                   ", job ", job, owner.empty() ? "" : absl::StrCat(", request ", owner), ")", kWhat));
}

}  // namespace zerofit::sharding
