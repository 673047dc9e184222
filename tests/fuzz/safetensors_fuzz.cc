// Fuzz target: a safetensors file (8-byte header length, JSON header, data), opened through
// core::SafetensorsFile; every tensor that passes validation must be readable. The input is the whole
// file, written to one memfd that is reused for every input. Seeds: corpus/safetensors.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/safetensors.h"

namespace {

// The file descriptor of the memfd and its /proc path; created once (a fuzz target has no other state).
const std::string& MemfdPath() {
  static const std::string* const path = [] {
    const int fd = memfd_create("zerofit-safetensors-fuzz", 0);
    if (fd < 0) std::abort();
    return new std::string("/proc/self/fd/" + std::to_string(fd));
  }();
  return *path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = MemfdPath();
  const int fd = std::stoi(path.substr(path.rfind('/') + 1));
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) std::abort();
  auto file = zerofit::core::SafetensorsFile::Open(path);
  if (!file.ok()) return 0;
  for (const zerofit::core::StTensorInfo& t : file->tensors()) {
    std::vector<char> buf(t.bytes());
    if (!file->Read(t.name, buf.data(), buf.size()).ok()) std::abort();
  }
  return 0;
}
