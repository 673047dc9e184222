// TensorBoard event files written from scratch (no TensorFlow, no .proto): a file
// DIR/events.out.tfevents.<seconds>.<hostname> of TFRecords, each
//   uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes | data | uint32 masked CRC-32C of
//   data
// (crc32c.h), whose data is a hand-encoded tensorflow.Event:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
// The first record carries file_version "brain.Event:2"; then one Event per step with one Value per metric.
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/metrics/metrics_sink.h"

namespace zerofit::worker::metrics {

class TensorBoardSink : public MetricsSink {
 public:
  // Creates `dir` if needed and a new event file in it, named after `now_unix_s` and `hostname`.
  static absl::StatusOr<std::unique_ptr<TensorBoardSink>> Create(const std::string& dir,
                                                                 const std::string& hostname,
                                                                 double now_unix_s);
  absl::Status Write(const StepMetrics& metrics) override;
  absl::Status Flush() override;
  const std::string& path() const { return path_; }

  // The encoded Event (exposed for tests and tools).
  static std::string EncodeFileVersionEvent(double wall_time);
  static std::string EncodeStepEvent(const StepMetrics& metrics);
  // data framed as one TFRecord.
  static std::string FrameRecord(const std::string& data);

 private:
  struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  TensorBoardSink(std::unique_ptr<std::FILE, FileCloser> file, std::string path)
      : file_(std::move(file)), path_(std::move(path)) {}
  absl::Status Append(const std::string& record);

  std::unique_ptr<std::FILE, FileCloser> file_;
  std::string path_;
};

}  // namespace zerofit::worker::metrics
