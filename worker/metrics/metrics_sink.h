// Where a worker's step metrics go besides the coordinator: a TensorBoard event file, a JSONL file. One
// writer thread per sink (not thread-safe); rank 0 owns them in a multi-rank job.
#pragma once

#include "absl/status/status.h"
#include "worker/metrics/step_metrics.h"

namespace zerofit::worker::metrics {

class MetricsSink {
 public:
  virtual ~MetricsSink() = default;
  // Appends one step. Values that are not finite are written as the format allows (JSONL: null).
  virtual absl::Status Write(const StepMetrics& metrics) = 0;
  // Makes everything written so far visible to readers (tail -f, TensorBoard).
  virtual absl::Status Flush() = 0;
};

}  // namespace zerofit::worker::metrics
