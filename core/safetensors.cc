#include "core/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/excerpt.h"
#include "core/json_depth.h"
#include "core/status_macros.h"
#include "nlohmann/json.hpp"

namespace zerofit::core {
namespace {

// ordered_json keeps the header's key order, so tensors() is in file order and the writer emits the
// caller's order.
using Json = nlohmann::ordered_json;

// The same cap as the reference implementation (safetensors' MAX_HEADER_SIZE): a header this large is
// corrupt, and refusing it keeps a flipped length byte from triggering a huge allocation.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";
constexpr const char* kIndexFileName = "model.safetensors.index.json";
constexpr const char* kSingleFileName = "model.safetensors";

// Owns one file descriptor; closes it on destruction. Close() reports the error that a destructor
// would have to drop (it matters after writes: NFS and quota errors surface at close).
class ScopedFd {
 public:
  explicit ScopedFd(int fd = -1) : fd_(fd) {}
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  absl::Status Close(const std::string& path) {
    const int fd = release();
    if (fd >= 0 && ::close(fd) != 0) return absl::ErrnoToStatus(errno, absl::StrCat(path, ": close"));
    return absl::OkStatus();
  }

 private:
  int fd_;
};

std::string DirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir.back() == '/') return dir + name;
  return absl::StrCat(dir, "/", name);
}

std::string TensorWhere(const std::string& path, const std::string& name) {
  return absl::StrCat(path, ": tensor '", name, "': ");
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) absl::StrAppend(&s, i ? ", " : "", shape[i]);
  return s + "]";
}

// A JSON value for an error message, cut short so a corrupt header cannot produce a megabyte message.
std::string JsonExcerpt(const Json& j) {
  return core::Excerpt(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

bool ParseDType(const std::string& s, StDType* out) {
  static constexpr StDType kAll[] = {StDType::kF64, StDType::kF32, StDType::kF16, StDType::kBF16,
                                     StDType::kI64, StDType::kI32, StDType::kI16, StDType::kI8,
                                     StDType::kU8,  StDType::kBool};
  for (StDType t : kAll) {
    if (s == StDTypeName(t)) {
      *out = t;
      return true;
    }
  }
  return false;
}

// Number of bytes a tensor of `shape` and `dtype` occupies; false on overflow or a negative dimension.
bool TensorBytes(const std::vector<int64_t>& shape, StDType dtype, uint64_t* bytes) {
  uint64_t n = StDTypeSize(dtype);
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d == 0) {
      *bytes = 0;
      return true;
    }
  }
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return false;
  }
  *bytes = n;
  return true;
}

// Reads exactly `n` bytes at `offset`, retrying partial reads; end of file before `n` is DataLoss.
absl::Status PreadAll(int fd, void* dst, size_t n, uint64_t offset, const std::string& path,
                      const std::string& what) {
  auto* p = static_cast<char*>(dst);
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd, p + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat(path, ": reading ", what));
    }
    if (r == 0) {
      return absl::DataLossError(absl::StrCat(path, ": short read of ", what, ": got ", done, " of ", n,
                                              " bytes at offset ", offset, " (file truncated?)"));
    }
    done += static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

absl::Status WriteAll(int fd, const void* src, size_t n, const std::string& path) {
  const auto* p = static_cast<const char*>(src);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat(path, ": write"));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

// nlohmann reports parse errors by exception; they are translated here, where the library is called
// (STYLE 2), and never escape. Duplicate keys at depth 1 (tensor names) are an error: JSON parsers
// silently keep one of them, which would hide a tensor.
absl::StatusOr<Json> ParseJson(const std::string& text, const std::string& path, const std::string& what) {
  std::string duplicate;
  std::set<std::string> top_keys;
  Json::parser_callback_t cb = [&](int depth, nlohmann::json::parse_event_t event, Json& parsed) {
    if (depth == 1 && event == nlohmann::json::parse_event_t::key && parsed.is_string()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!top_keys.insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  if (absl::Status deep = CheckJsonDepth(text, kMaxJsonDepth, absl::StrCat(path, ": ", what)); !deep.ok()) {
    return absl::DataLossError(deep.message());
  }
  Json j;
  try {
    j = Json::parse(text, cb);
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(path, ": ", what, " is not valid JSON: ", e.what()));
  }
  if (!duplicate.empty()) {
    return absl::DataLossError(absl::StrCat(path, ": ", what, " has key '", duplicate, "' twice"));
  }
  if (!j.is_object()) {
    return absl::DataLossError(
        absl::StrCat(path, ": ", what, " must be a JSON object, got ", j.type_name(), " ", JsonExcerpt(j)));
  }
  return j;
}

// A non-negative JSON integer that fits `max`; false for floats, negatives, strings, ...
bool GetUnsigned(const Json& j, uint64_t max, uint64_t* out) {
  if (!j.is_number_unsigned()) return false;
  const uint64_t v = j.get<uint64_t>();
  if (v > max) return false;
  *out = v;
  return true;
}

// Validates one header entry (everything except its position relative to the other tensors).
absl::StatusOr<StTensorInfo> ParseTensorEntry(const std::string& path, const std::string& name,
                                              const Json& entry, uint64_t data_bytes) {
  const std::string where = TensorWhere(path, name);
  if (!entry.is_object()) {
    return absl::DataLossError(absl::StrCat(where, "entry must be an object with dtype, shape and ",
                                            "data_offsets, got ", entry.type_name()));
  }
  StTensorInfo info;
  info.name = name;

  const auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end()) return absl::DataLossError(absl::StrCat(where, "field 'dtype' is missing"));
  if (!dtype_it->is_string()) {
    return absl::DataLossError(
        absl::StrCat(where, "field 'dtype' must be a string, got ", dtype_it->type_name()));
  }
  const std::string& dtype_name = dtype_it->get_ref<const std::string&>();
  if (!ParseDType(dtype_name, &info.dtype)) {
    return absl::DataLossError(absl::StrCat(where, "field 'dtype': unknown dtype ", JsonExcerpt(*dtype_it),
                                            " (known: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)"));
  }

  const auto shape_it = entry.find("shape");
  if (shape_it == entry.end()) return absl::DataLossError(absl::StrCat(where, "field 'shape' is missing"));
  if (!shape_it->is_array()) {
    return absl::DataLossError(
        absl::StrCat(where, "field 'shape' must be an array, got ", shape_it->type_name()));
  }
  for (size_t i = 0; i < shape_it->size(); ++i) {
    uint64_t d = 0;
    if (!GetUnsigned((*shape_it)[i], std::numeric_limits<int64_t>::max(), &d)) {
      return absl::DataLossError(absl::StrCat(where, "field 'shape': entry ", i, " is ",
                                              JsonExcerpt((*shape_it)[i]), ", not a non-negative integer"));
    }
    info.shape.push_back(static_cast<int64_t>(d));
  }

  const auto off_it = entry.find("data_offsets");
  if (off_it == entry.end()) {
    return absl::DataLossError(absl::StrCat(where, "field 'data_offsets' is missing"));
  }
  uint64_t begin = 0, end = 0;
  if (!off_it->is_array() || off_it->size() != 2 ||
      !GetUnsigned((*off_it)[0], std::numeric_limits<uint64_t>::max(), &begin) ||
      !GetUnsigned((*off_it)[1], std::numeric_limits<uint64_t>::max(), &end)) {
    return absl::DataLossError(absl::StrCat(where, "field 'data_offsets' must be [begin, end] with ",
                                            "non-negative integers, got ", JsonExcerpt(*off_it)));
  }
  if (begin > end) {
    return absl::DataLossError(
        absl::StrCat(where, "data_offsets [", begin, ", ", end, "]: begin is after end"));
  }
  if (end > data_bytes) {
    return absl::DataLossError(absl::StrCat(where, "data_offsets [", begin, ", ", end,
                                            "] end past the data section, which holds ", data_bytes,
                                            " bytes (file truncated?)"));
  }
  uint64_t need = 0;
  if (!TensorBytes(info.shape, info.dtype, &need)) {
    return absl::DataLossError(absl::StrCat(where, "shape ", ShapeString(info.shape), " of ", dtype_name,
                                            " overflows 64-bit byte counts"));
  }
  if (need != end - begin) {
    return absl::DataLossError(absl::StrCat(where, "data_offsets [", begin, ", ", end, "] hold ", end - begin,
                                            " bytes but shape ", ShapeString(info.shape), " of ", dtype_name,
                                            " needs ", need));
  }
  info.begin = static_cast<size_t>(begin);
  info.end = static_cast<size_t>(end);
  return info;
}

// Checks that the ranges tile [0, data_bytes) exactly: sorted by begin, each starts where the previous
// ended. Empty tensors (begin == end) may share an offset with anything.
absl::Status CheckCoverage(const std::string& path, const std::vector<StTensorInfo>& tensors,
                           uint64_t data_bytes) {
  std::vector<const StTensorInfo*> order;
  order.reserve(tensors.size());
  for (const StTensorInfo& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const StTensorInfo* a, const StTensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = 0;
  const StTensorInfo* prev = nullptr;
  for (const StTensorInfo* t : order) {
    if (t->begin < covered) {
      return absl::DataLossError(absl::StrCat(TensorWhere(path, t->name), "data_offsets [", t->begin, ", ",
                                              t->end, "] overlap tensor '", prev->name, "' at [", prev->begin,
                                              ", ", prev->end, "]"));
    }
    if (t->begin > covered) {
      return absl::DataLossError(absl::StrCat(
          TensorWhere(path, t->name), "data_offsets [", t->begin, ", ", t->end, "] leave a hole: bytes [",
          covered, ", ", t->begin, ") of the data section belong to no tensor",
          prev ? absl::StrCat(" (previous tensor '", prev->name, "' ends at ", prev->end, ")") : ""));
    }
    if (t->end > covered || prev == nullptr) prev = t;
    covered = std::max<uint64_t>(covered, t->end);
  }
  if (covered != data_bytes) {
    return absl::DataLossError(absl::StrCat(path, ": data section holds ", data_bytes, " bytes but tensors ",
                                            "cover only [0, ", covered, "): ", data_bytes - covered,
                                            " trailing bytes belong to no tensor"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  // O_NONBLOCK: open(2) of a FIFO named here returns at once (and is refused below) instead of waiting for a
  // writer; no effect on a regular file.
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return absl::ErrnoToStatus(errno, absl::StrCat(path, ": open"));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return absl::ErrnoToStatus(errno, absl::StrCat(path, ": fstat"));
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  if (static_cast<uint64_t>(st.st_size) > kMaxHeaderBytes) {
    return absl::DataLossError(absl::StrCat(
        path, ": ", st.st_size, " bytes is too large for an index (limit ", kMaxHeaderBytes, ")"));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  ZF_RETURN_IF_ERROR(PreadAll(fd.get(), text.data(), text.size(), 0, path, "the file"));
  return text;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

size_t StDTypeSize(StDType t) {
  switch (t) {
    case StDType::kF64:
    case StDType::kI64:
      return 8;
    case StDType::kF32:
    case StDType::kI32:
      return 4;
    case StDType::kF16:
    case StDType::kBF16:
    case StDType::kI16:
      return 2;
    case StDType::kI8:
    case StDType::kU8:
    case StDType::kBool:
      return 1;
  }
  return 0;
}

const char* StDTypeName(StDType t) {
  switch (t) {
    case StDType::kF64:
      return "F64";
    case StDType::kF32:
      return "F32";
    case StDType::kF16:
      return "F16";
    case StDType::kBF16:
      return "BF16";
    case StDType::kI64:
      return "I64";
    case StDType::kI32:
      return "I32";
    case StDType::kI16:
      return "I16";
    case StDType::kI8:
      return "I8";
    case StDType::kU8:
      return "U8";
    case StDType::kBool:
      return "BOOL";
  }
  return "UNKNOWN";
}

int64_t StTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // no overflow: Open checked numel * dtype size == bytes()
  return n;
}

// ---- SafetensorsFile -------------------------------------------------------------------------------

absl::StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  SafetensorsFile f;
  f.path_ = path;
  // Owned by f from here on. O_NONBLOCK: a FIFO is refused below rather than waited on (see ReadSmallFile).
  f.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f.fd_ < 0) return absl::ErrnoToStatus(errno, absl::StrCat(path, ": open"));
  struct stat st;
  if (::fstat(f.fd_, &st) != 0) return absl::ErrnoToStatus(errno, absl::StrCat(path, ": fstat"));
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  const uint64_t file_bytes = static_cast<uint64_t>(st.st_size);
  if (file_bytes < 8) {
    return absl::DataLossError(absl::StrCat(path, ": file is ", file_bytes,
                                            " bytes, too short for the 8-byte header length (truncated?)"));
  }
  unsigned char len_le[8];
  ZF_RETURN_IF_ERROR(PreadAll(f.fd_, len_le, 8, 0, path, "the header length"));
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | len_le[i];
  if (header_bytes > kMaxHeaderBytes) {
    return absl::DataLossError(absl::StrCat(path, ": header length ", header_bytes, " exceeds the limit of ",
                                            kMaxHeaderBytes, " bytes (corrupt or not a safetensors file)"));
  }
  if (header_bytes > file_bytes - 8) {
    return absl::DataLossError(absl::StrCat(path, ": header length ", header_bytes, " is larger than the ",
                                            file_bytes - 8,
                                            " bytes that follow it in the file (truncated or corrupt)"));
  }
  std::string header(static_cast<size_t>(header_bytes), '\0');
  ZF_RETURN_IF_ERROR(PreadAll(f.fd_, header.data(), header.size(), 8, path, "the header"));
  ZF_ASSIGN_OR_RETURN(Json j, ParseJson(header, path, "header"));

  f.data_start_ = static_cast<size_t>(8 + header_bytes);
  const uint64_t data_bytes = file_bytes - 8 - header_bytes;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == kMetadataKey) {
      if (!it.value().is_object()) {
        return absl::DataLossError(absl::StrCat(path, ": field '__metadata__' must be an object of strings, ",
                                                "got ", it.value().type_name()));
      }
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string()) {
          return absl::DataLossError(absl::StrCat(path, ": field '__metadata__': value of '", m.key(),
                                                  "' must be a string, got ", m.value().type_name(), " ",
                                                  JsonExcerpt(m.value())));
        }
        f.metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    ZF_ASSIGN_OR_RETURN(StTensorInfo info, ParseTensorEntry(path, it.key(), it.value(), data_bytes));
    f.tensors_.push_back(std::move(info));
  }
  ZF_RETURN_IF_ERROR(CheckCoverage(path, f.tensors_, data_bytes));
  return f;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      data_start_(other.data_start_),
      tensors_(std::move(other.tensors_)),
      metadata_(std::move(other.metadata_)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    data_start_ = other.data_start_;
    tensors_ = std::move(other.tensors_);
    metadata_ = std::move(other.metadata_);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0) ::close(fd_);
}

const StTensorInfo* SafetensorsFile::Find(const std::string& name) const {
  // Linear: headers hold at most a few thousand tensors and lookups happen once per tensor at load.
  for (const StTensorInfo& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

absl::Status SafetensorsFile::Read(const std::string& name, void* dst, size_t dst_bytes) const {
  const StTensorInfo* t = Find(name);
  if (t == nullptr) return absl::NotFoundError(absl::StrCat(path_, ": no tensor '", name, "'"));
  if (dst_bytes != t->bytes()) {
    return absl::InvalidArgumentError(
        absl::StrCat(TensorWhere(path_, name), "destination holds ", dst_bytes, " bytes but the tensor has ",
                     t->bytes(), " (shape ", ShapeString(t->shape), " of ", StDTypeName(t->dtype), ")"));
  }
  if (dst == nullptr && dst_bytes > 0) {
    return absl::InvalidArgumentError(absl::StrCat(TensorWhere(path_, name), "destination is null"));
  }
  return PreadAll(fd_, dst, dst_bytes, data_start_ + t->begin, path_, absl::StrCat("tensor '", name, "'"));
}

// ---- WriteSafetensors ------------------------------------------------------------------------------

namespace {

// The file's first bytes: the header's length (8 bytes, little-endian) and its JSON, padded with spaces so
// that the data section starts 8-byte aligned, as Hugging Face's writer does. `sizes_out` gets each
// tensor's bytes.
absl::StatusOr<std::string> SafetensorsPrefix(const std::string& path,
                                              const std::vector<StTensorToWrite>& tensors,
                                              const std::map<std::string, std::string>& metadata,
                                              std::vector<uint64_t>* sizes_out) {
  Json header = Json::object();
  if (!metadata.empty()) {
    Json m = Json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header[kMetadataKey] = std::move(m);
  }
  std::vector<uint64_t>& sizes = *sizes_out;
  sizes.reserve(tensors.size());
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const StTensorToWrite& t : tensors) {
    const std::string where = TensorWhere(path, t.name);
    if (t.name == kMetadataKey) {
      return absl::InvalidArgumentError(absl::StrCat(where, "the name is reserved for metadata"));
    }
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, "name appears twice in the tensor list"));
    }
    uint64_t bytes = 0;
    if (!TensorBytes(t.shape, t.dtype, &bytes)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "shape ", ShapeString(t.shape), " has a negative dimension or overflows"));
    }
    if (t.data == nullptr && bytes > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "data is null but the tensor has ", bytes, " bytes"));
    }
    Json entry = Json::object();
    entry["dtype"] = StDTypeName(t.dtype);
    entry["shape"] = t.shape;
    entry["data_offsets"] = {offset, offset + bytes};
    header[t.name] = std::move(entry);
    sizes.push_back(bytes);
    offset += bytes;
  }
  std::string text;
  try {
    // Strict UTF-8: a name that is not valid UTF-8 cannot be stored in JSON (nlohmann throws type_error).
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": a tensor name or metadata entry cannot be encoded as JSON: ", e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string prefix(8, '\0');
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  prefix += text;

  return prefix;
}

}  // namespace

absl::Status WriteSafetensors(const std::string& path, const std::vector<StTensorToWrite>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  std::vector<uint64_t> sizes;
  ZF_ASSIGN_OR_RETURN(const std::string prefix, SafetensorsPrefix(path, tensors, metadata, &sizes));
  std::string tmp = path + ".tmp.XXXXXX";
  ScopedFd fd(::mkstemp(tmp.data()));
  if (fd.get() < 0) return absl::ErrnoToStatus(errno, absl::StrCat(tmp, ": mkstemp"));
  // Removes the temporary file on every early return; disarmed after the rename.
  struct Unlinker {
    const std::string* p;
    ~Unlinker() {
      if (p) ::unlink(p->c_str());
    }
  } unlinker{&tmp};
  // mkstemp creates 0600; model files are meant to be shared like any file the user writes.
  if (::fchmod(fd.get(), 0644) != 0) return absl::ErrnoToStatus(errno, absl::StrCat(tmp, ": fchmod"));
  ZF_RETURN_IF_ERROR(WriteAll(fd.get(), prefix.data(), prefix.size(), tmp));
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (sizes[i] > 0) ZF_RETURN_IF_ERROR(WriteAll(fd.get(), tensors[i].data, sizes[i], tmp));
  }
  if (::fsync(fd.get()) != 0) return absl::ErrnoToStatus(errno, absl::StrCat(tmp, ": fsync"));
  ZF_RETURN_IF_ERROR(fd.Close(tmp));
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("rename ", tmp, " -> ", path));
  }
  unlinker.p = nullptr;
  // The rename is durable only once the directory entry is on disk.
  const std::string dir = DirName(path);
  ScopedFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd.get() < 0) return absl::ErrnoToStatus(errno, absl::StrCat(dir, ": open directory"));
  if (::fsync(dfd.get()) != 0) return absl::ErrnoToStatus(errno, absl::StrCat(dir, ": fsync directory"));
  return dfd.Close(dir);
}

// ---- SafetensorsModel ------------------------------------------------------------------------------

absl::StatusOr<SafetensorsModel> SafetensorsModel::Open(const std::string& path) {
  SafetensorsModel model;
  // Adds every tensor of `file` to where_; a name in two files is ambiguous and refused.
  auto add_file = [&model](SafetensorsFile file) -> absl::Status {
    const size_t index = model.files_.size();
    for (const StTensorInfo& t : file.tensors()) {
      const auto [it, inserted] = model.where_.emplace(t.name, index);
      if (!inserted) {
        return absl::DataLossError(absl::StrCat("tensor '", t.name, "' is in both ",
                                                model.files_[it->second]->path(), " and ", file.path()));
      }
    }
    model.files_.push_back(std::make_unique<SafetensorsFile>(std::move(file)));
    return absl::OkStatus();
  };

  if (!IsDirectory(path)) {
    ZF_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(path));
    ZF_RETURN_IF_ERROR(add_file(std::move(f)));
    return model;
  }
  const std::string index_path = JoinPath(path, kIndexFileName);
  if (!Exists(index_path)) {
    const std::string single = JoinPath(path, kSingleFileName);
    if (!Exists(single)) {
      return absl::NotFoundError(
          absl::StrCat(path, ": directory has neither ", kIndexFileName, " nor ", kSingleFileName));
    }
    ZF_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(single));
    ZF_RETURN_IF_ERROR(add_file(std::move(f)));
    return model;
  }

  ZF_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(index_path));
  ZF_ASSIGN_OR_RETURN(Json index, ParseJson(text, index_path, "index"));
  const auto wm = index.find("weight_map");
  if (wm == index.end()) {
    return absl::DataLossError(absl::StrCat(index_path, ": field 'weight_map' is missing"));
  }
  if (!wm->is_object()) {
    return absl::DataLossError(
        absl::StrCat(index_path, ": field 'weight_map' must be an object, got ", wm->type_name()));
  }
  std::map<std::string, size_t> shard_index;  // shard file name -> index into files_
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    const std::string where = absl::StrCat(index_path, ": weight_map['", it.key(), "']: ");
    if (!it.value().is_string()) {
      return absl::DataLossError(
          absl::StrCat(where, "shard must be a file name string, got ", it.value().type_name()));
    }
    const std::string& shard = it.value().get_ref<const std::string&>();
    // Shards live in the model directory; refusing absolute paths and ".." keeps an index from
    // pointing outside it.
    if (shard.empty() || shard.front() == '/' || shard == ".." || shard.rfind("../", 0) == 0 ||
        shard.find("/../") != std::string::npos ||
        (shard.size() >= 3 && shard.compare(shard.size() - 3, 3, "/..") == 0)) {
      return absl::DataLossError(
          absl::StrCat(where, "shard '", shard, "' is not a file name inside the model directory"));
    }
    if (shard_index.count(shard) == 0) {
      auto file = SafetensorsFile::Open(JoinPath(path, shard));
      if (!file.ok()) {
        return absl::Status(
            file.status().code(),
            absl::StrCat(where, "shard '", shard, "' cannot be opened: ", file.status().message()));
      }
      shard_index[shard] = model.files_.size();
      ZF_RETURN_IF_ERROR(add_file(std::move(*file)));
    }
    const size_t want = shard_index[shard];
    const auto found = model.where_.find(it.key());
    if (found == model.where_.end() || found->second != want) {
      return absl::DataLossError(absl::StrCat(where, "shard '", shard, "' has no tensor '", it.key(), "'"));
    }
  }
  // A tensor present in a shard but absent from weight_map is kept (it is part of the model); one that a
  // later shard defines again was refused by add_file as a duplicate.
  return model;
}

std::vector<std::string> SafetensorsModel::names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& [name, index] : where_) out.push_back(name);
  return out;
}

const StTensorInfo* SafetensorsModel::Find(const std::string& name) const {
  const auto it = where_.find(name);
  return it == where_.end() ? nullptr : files_[it->second]->Find(name);
}

absl::Status SafetensorsModel::Read(const std::string& name, void* dst, size_t dst_bytes) const {
  const auto it = where_.find(name);
  if (it == where_.end()) return absl::NotFoundError(absl::StrCat("model has no tensor '", name, "'"));
  return files_[it->second]->Read(name, dst, dst_bytes);
}

}  // namespace zerofit::core
