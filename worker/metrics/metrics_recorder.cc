#include "worker/metrics/metrics_recorder.h"

#include "worker/metrics/jsonl_sink.h"
#include "worker/metrics/tensorboard_sink.h"

namespace zerofit::worker::metrics {

absl::StatusOr<std::unique_ptr<MetricsRecorder>> MetricsRecorder::Create(const RecorderOptions& o) {
  std::unique_ptr<MetricsRecorder> r(new MetricsRecorder(o.alarms));
  if (!o.tensorboard_dir.empty()) {
    auto tb = TensorBoardSink::Create(o.tensorboard_dir, o.hostname, o.now_unix_s);
    if (!tb.ok()) return tb.status();
    r->sinks_.push_back(std::move(*tb));
  }
  if (!o.jsonl_path.empty()) {
    auto jsonl = JsonlSink::Create(o.jsonl_path);
    if (!jsonl.ok()) return jsonl.status();
    r->sinks_.push_back(std::move(*jsonl));
  }
  return r;
}

absl::StatusOr<std::vector<std::string>> MetricsRecorder::Record(const StepMetrics& metrics) {
  for (const auto& sink : sinks_) {
    if (absl::Status s = sink->Write(metrics); !s.ok()) return s;
    if (absl::Status s = sink->Flush(); !s.ok()) return s;
  }
  return alarms_.Observe(metrics);
}

}  // namespace zerofit::worker::metrics
