// Fuzz target: a checkpoint's manifest.json as ReadLatestCheckpoint and the owner check read it (format,
// version, step, world size, extra). The input is written to manifest.json in one temporary directory,
// reused for every input. Seeds: corpus/checkpoint_manifest.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "sharding/checkpoint.h"
#include "sharding/checkpoint_owner.h"

namespace {

const std::string& ScratchDir() {
  static const std::string* const dir = [] {
    char templ[] = "/tmp/zerofit-manifest-fuzz-XXXXXX";
    if (mkdtemp(templ) == nullptr) std::abort();
    return new std::string(templ);
  }();
  return *dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = ScratchDir();
  {
    std::ofstream out(dir + "/manifest.json", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) std::abort();
  }
  (void)zerofit::sharding::ReadLatestCheckpoint(dir);
  (void)zerofit::sharding::CheckCheckpointDirIsOurs(dir, "fuzz-request");
  return 0;
}
