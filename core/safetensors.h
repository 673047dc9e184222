// A framework-free reader and writer for the safetensors format (https://huggingface.co/docs/safetensors):
//   8 bytes: N, little-endian u64  |  N bytes: JSON header  |  data
// The header maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the
// data section) plus an optional "__metadata__" string map. Every header is validated before any data is
// used: header size within the file, JSON well formed, known dtypes, shapes that match their byte ranges,
// ranges inside the file, non-overlapping and covering the data section without holes. A bad or truncated
// file gives an error naming the file, the tensor and the field, never a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zerofit::core {

enum class StDType { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool };
size_t StDTypeSize(StDType t);
const char* StDTypeName(StDType t);  // "F32", "BF16", ... as in the format

struct StTensorInfo {
  std::string name;
  StDType dtype = StDType::kF32;
  std::vector<int64_t> shape;
  size_t begin = 0;  // byte offsets relative to the data section
  size_t end = 0;
  size_t bytes() const { return end - begin; }
  int64_t numel() const;
};

// One .safetensors file, opened read-only. Move-only RAII (owns the file descriptor).
class SafetensorsFile {
 public:
  static absl::StatusOr<SafetensorsFile> Open(const std::string& path);
  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  const std::vector<StTensorInfo>& tensors() const { return tensors_; }  // in header order
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // nullptr if absent.
  const StTensorInfo* Find(const std::string& name) const;
  // Copies the raw bytes of tensor `name` (little-endian, as stored) into dst, which holds `dst_bytes`.
  absl::Status Read(const std::string& name, void* dst, size_t dst_bytes) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  int fd_ = -1;
  size_t data_start_ = 0;
  std::vector<StTensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

struct StTensorToWrite {
  std::string name;
  StDType dtype = StDType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // numel * StDTypeSize(dtype) bytes, little-endian
};

// Writes a .safetensors file atomically (temporary file in the same directory, fsync, rename), so a crash
// never leaves a half-written file under `path`. Tensors are stored in the given order.
absl::Status WriteSafetensors(const std::string& path, const std::vector<StTensorToWrite>& tensors,
                              const std::map<std::string, std::string>& metadata = {});

// A model stored as one `model.safetensors` or as shards listed in `model.safetensors.index.json`
// ({"metadata": {...}, "weight_map": {tensor name: shard file name}}) in a directory.
class SafetensorsModel {
 public:
  // `path`: a directory (index.json preferred, else model.safetensors) or a single .safetensors file.
  static absl::StatusOr<SafetensorsModel> Open(const std::string& path);
  std::vector<std::string> names() const;  // sorted
  const StTensorInfo* Find(const std::string& name) const;
  absl::Status Read(const std::string& name, void* dst, size_t dst_bytes) const;

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, size_t> where_;  // tensor name -> index into files_
};

}  // namespace zerofit::core
