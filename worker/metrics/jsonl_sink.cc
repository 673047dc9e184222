#include "worker/metrics/jsonl_sink.h"

#include <cerrno>
#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace zerofit::worker::metrics {

absl::StatusOr<std::unique_ptr<JsonlSink>> JsonlSink::Create(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec)
      return absl::PermissionDeniedError(absl::StrCat("metrics jsonl: cannot create ", parent.string()));
  }
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "a"));
  if (!file) return absl::ErrnoToStatus(errno, absl::StrCat("metrics jsonl: cannot open ", path));
  return std::unique_ptr<JsonlSink>(new JsonlSink(std::move(file), path));
}

std::string JsonlSink::FormatLine(const StepMetrics& m) {
  std::string line =
      absl::StrFormat("{\"step\": %d, \"rank\": %d, \"wall_time\": %.6f", m.step, m.rank, m.wall_time);
  for (const NamedValue& v : m.values) {
    if (!IsValidMetricName(v.name)) continue;  // unreachable for zerofit's own names; never break the JSON
    if (std::isfinite(v.value)) {
      absl::StrAppendFormat(&line, ", \"%s\": %.9g", v.name, v.value);
    } else {
      absl::StrAppend(&line, ", \"", v.name, "\": null");
    }
  }
  line += "}";
  return line;
}

absl::Status JsonlSink::Write(const StepMetrics& metrics) {
  const std::string line = FormatLine(metrics) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_.get()) != line.size()) {
    return absl::ErrnoToStatus(errno, absl::StrCat("metrics jsonl: cannot write ", path_));
  }
  return absl::OkStatus();
}

absl::Status JsonlSink::Flush() {
  if (std::fflush(file_.get()) != 0)
    return absl::ErrnoToStatus(errno, absl::StrCat("metrics jsonl: ", path_));
  return absl::OkStatus();
}

}  // namespace zerofit::worker::metrics
