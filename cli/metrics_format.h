// `zerofit metrics JOB --format table|json|csv`: one stream of zerofit.v1 Metric rows, printed as a person or
// a script wants them. Pure (it returns text; the caller prints and flushes), so tests drive it with rows.
//   table: step (0-based, as stored), rank, and the metrics people watch (loss, accuracy, lr,
//          grad_norm, clipped, the task's margin, samples/s, host peak in MiB); a header every 40 rows.
//   json:  one JSON object per line (JSON Lines): step (0-based, as stored), rank, unix_us and every named
//          value; non-finite values are null.
//   csv:   a header of step,rank,unix_us and the names of the first row, then one line per row (a name the
//          first row lacked is left out; a value a row lacks is empty).
// Rows from workers older than named metrics show their fixed fields (loss, accuracy, tokens_per_s,
// peak_bytes) under those names.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "zerofit/v1/coordinator.pb.h"

namespace zerofit::cli {

enum class MetricsFormat { kTable, kJson, kCsv };
absl::StatusOr<MetricsFormat> ParseMetricsFormat(const std::string& name);

class MetricsPrinter {
 public:
  explicit MetricsPrinter(MetricsFormat format) : format_(format) {}
  // The text for one more row (with a header where one is due).
  std::string Row(const zerofit::v1::Metric& metric);

 private:
  std::string TableRow(const zerofit::v1::Metric& m);
  std::string CsvRow(const zerofit::v1::Metric& m);

  MetricsFormat format_;
  int rows_ = 0;
  std::vector<std::string> csv_columns_;
};

}  // namespace zerofit::cli
