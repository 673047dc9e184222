// What a training process does with each step's named metrics besides sending them to the coordinator: runs
// the alarms (every rank: a NaN loss stops the rank that sees it) and writes the sinks it was given (rank 0
// owns them in a multi-rank job). Not thread-safe: the training loop calls it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/metrics/metrics_sink.h"
#include "worker/metrics/training_alarms.h"

namespace zerofit::worker::metrics {

struct RecorderOptions {
  std::string tensorboard_dir;  // empty: none
  std::string jsonl_path;       // empty: none
  std::string hostname;         // names the TensorBoard file
  double now_unix_s = 0;        // names the TensorBoard file
  AlarmOptions alarms;
};

class MetricsRecorder {
 public:
  // Opens the sinks (pass empty paths on ranks that do not write).
  static absl::StatusOr<std::unique_ptr<MetricsRecorder>> Create(const RecorderOptions& options);

  // Writes and flushes the sinks, then runs the alarms: the warnings to log, or the error that must stop
  // training (the sinks already hold the bad step, for the post-mortem).
  absl::StatusOr<std::vector<std::string>> Record(const StepMetrics& metrics);

 private:
  explicit MetricsRecorder(const AlarmOptions& alarms) : alarms_(alarms) {}
  std::vector<std::unique_ptr<MetricsSink>> sinks_;
  TrainingAlarms alarms_;
};

}  // namespace zerofit::worker::metrics
