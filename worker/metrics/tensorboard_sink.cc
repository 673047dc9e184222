#include "worker/metrics/tensorboard_sink.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "worker/metrics/crc32c.h"

namespace zerofit::worker::metrics {
namespace {

// Protobuf wire types.
constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void PutTag(std::string* out, uint32_t field, uint32_t wire_type) {
  PutVarint(out, (field << 3) | wire_type);
}

template <typename T>
void PutLittleEndian(std::string* out, T v) {  // x86 and arm64 are little-endian; memcpy keeps it portable
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out->append(bytes, sizeof(T));
}

void PutBytes(std::string* out, uint32_t field, const std::string& bytes) {
  PutTag(out, field, kLengthDelimited);
  PutVarint(out, bytes.size());
  out->append(bytes);
}

std::string EventHeader(double wall_time, int64_t step) {
  std::string e;
  PutTag(&e, 1, kFixed64);
  PutLittleEndian(&e, wall_time);
  PutTag(&e, 2, kVarint);
  PutVarint(&e, static_cast<uint64_t>(step));  // int64: two's complement as a varint
  return e;
}

}  // namespace

std::string TensorBoardSink::EncodeFileVersionEvent(double wall_time) {
  std::string e = EventHeader(wall_time, 0);
  PutBytes(&e, 3, "brain.Event:2");
  return e;
}

std::string TensorBoardSink::EncodeStepEvent(const StepMetrics& m) {
  std::string summary;
  for (const NamedValue& v : m.values) {
    std::string value;
    PutBytes(&value, 1, v.name);
    PutTag(&value, 2, kFixed32);
    PutLittleEndian(&value, static_cast<float>(v.value));
    PutBytes(&summary, 1, value);
  }
  std::string e = EventHeader(m.wall_time, m.step);
  PutBytes(&e, 5, summary);
  return e;
}

std::string TensorBoardSink::FrameRecord(const std::string& data) {
  std::string r;
  PutLittleEndian(&r, static_cast<uint64_t>(data.size()));
  PutLittleEndian(&r, MaskCrc32c(Crc32c(r.data(), 8)));
  r.append(data);
  PutLittleEndian(&r, MaskCrc32c(Crc32c(data.data(), data.size())));
  return r;
}

absl::StatusOr<std::unique_ptr<TensorBoardSink>> TensorBoardSink::Create(const std::string& dir,
                                                                         const std::string& hostname,
                                                                         double now_unix_s) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return absl::PermissionDeniedError(absl::StrCat("tensorboard: cannot create ", dir, ": ", ec.message()));
  const std::string path =
      absl::StrFormat("%s/events.out.tfevents.%d.%s", dir, static_cast<int64_t>(now_unix_s),
                      hostname.empty() ? "localhost" : hostname);
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "ab"));
  if (!file) return absl::ErrnoToStatus(errno, absl::StrCat("tensorboard: cannot open ", path));
  std::unique_ptr<TensorBoardSink> sink(new TensorBoardSink(std::move(file), path));
  if (absl::Status s = sink->Append(FrameRecord(EncodeFileVersionEvent(now_unix_s))); !s.ok()) return s;
  if (absl::Status s = sink->Flush(); !s.ok()) return s;
  return sink;
}

absl::Status TensorBoardSink::Append(const std::string& record) {
  if (std::fwrite(record.data(), 1, record.size(), file_.get()) != record.size()) {
    return absl::ErrnoToStatus(errno, absl::StrCat("tensorboard: cannot write ", path_));
  }
  return absl::OkStatus();
}

absl::Status TensorBoardSink::Write(const StepMetrics& metrics) {
  return Append(FrameRecord(EncodeStepEvent(metrics)));
}

absl::Status TensorBoardSink::Flush() {
  if (std::fflush(file_.get()) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("tensorboard: ", path_));
  return absl::OkStatus();
}

}  // namespace zerofit::worker::metrics
