// Fuzz target: a checkpoint's manifest.json as ReadLatestCheckpoint and the owner check read it (format,
// version, step, world size, extra). The input is written to manifest.json in one temporary directory,
// reused for every input. Seeds: corpus/checkpoint_manifest.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "sharding/checkpoint.h"
#include "sharding/checkpoint_owner.h"

namespace {

// A temporary directory for the whole run, removed when the process exits normally.
struct ScratchDir {
  ScratchDir() {
    char templ[] = "/tmp/zerofit-manifest-fuzz-XXXXXX";
    if (mkdtemp(templ) == nullptr) std::abort();
    path = templ;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  std::string path;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ScratchDir scratch;
  const std::string& dir = scratch.path;
  {
    std::ofstream out(dir + "/manifest.json", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) std::abort();
  }
  (void)zerofit::sharding::ReadLatestCheckpoint(dir);
  (void)zerofit::sharding::CheckCheckpointDirIsOurs(dir, "fuzz-request");
  return 0;
}
