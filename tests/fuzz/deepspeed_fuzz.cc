// Fuzz target: the DeepSpeed JSON import (jobspec::ParseDeepSpeedConfig) on one and on 4096 ranks (the
// batch product check). Seeds: corpus/deepspeed.
#include <cstddef>
#include <cstdint>
#include <string>

#include "jobspec/job_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (int world_size : {1, 4096}) (void)zerofit::jobspec::ParseDeepSpeedConfig(text, "ds.json", world_size);
  return 0;
}
