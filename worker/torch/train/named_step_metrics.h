// A training step's report (StepReport) as named metrics (worker/metrics/step_metrics.h): what the worker
// sends to the coordinator and writes to TensorBoard / JSONL. The global values are the same on every rank
// (summed over ranks); the time split and the host peak are the calling rank's.
#pragma once

#include <cstdint>
#include <vector>

#include "worker/metrics/step_metrics.h"
#include "worker/torch/train/preference_session.h"

namespace zerofit::worker {

struct HostSample {
  int rank = 0;
  double wall_time = 0;         // seconds since the Unix epoch
  int64_t peak_rss_bytes = -1;  // getrusage's ru_maxrss; -1: unknown (left out)
};

metrics::StepMetrics NamedStepMetrics(const StepReport& report, PreferenceTrainOptions::Task task,
                                      const HostSample& host);

// A held-out evaluation as named values: the task's values under "eval/" and "eval/pairs" (what
// NamedStepMetrics appends for a report with `.eval`).
std::vector<metrics::NamedValue> NamedEvalMetrics(const EvalReport& eval, PreferenceTrainOptions::Task task);

// The device clock's values (metric_names::kDeviceTimePrefix) of `breakdown.device`, if it has one.
void SetDeviceTimes(const sharding::StepBreakdown& breakdown, metrics::StepMetrics* m);

// getrusage(RUSAGE_SELF).ru_maxrss in bytes, -1 when it fails.
int64_t HostPeakRssBytes();

}  // namespace zerofit::worker
