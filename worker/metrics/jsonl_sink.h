// Step metrics as JSON Lines: one object per step, {"step": S, "rank": R, "wall_time": T, "<name>": value,
// ...}, appended to FILE (created with its directory). Values that are not finite are written as null (JSON
// has no NaN). Names are IsValidMetricName's, so they need no escaping beyond the check.
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/metrics/metrics_sink.h"

namespace zerofit::worker::metrics {

class JsonlSink : public MetricsSink {
 public:
  static absl::StatusOr<std::unique_ptr<JsonlSink>> Create(const std::string& path);
  absl::Status Write(const StepMetrics& metrics) override;
  absl::Status Flush() override;

  static std::string FormatLine(const StepMetrics& metrics);  // without the newline

 private:
  struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  JsonlSink(std::unique_ptr<std::FILE, FileCloser> file, std::string path)
      : file_(std::move(file)), path_(std::move(path)) {}
  std::unique_ptr<std::FILE, FileCloser> file_;
  std::string path_;
};

}  // namespace zerofit::worker::metrics
