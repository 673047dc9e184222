// Fuzz target: Hugging Face config.json (core::ParseHfConfig); a config that parses is written back and
// must parse again to the same parameter count. Seeds: corpus/hf_config.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = zerofit::core::ParseHfConfig(text, "config.json");
  if (!config.ok()) return 0;
  auto again = zerofit::core::ParseHfConfig(zerofit::core::HfConfigToJson(*config), "written.json");
  if (!again.ok() || again->ParameterCount() != config->ParameterCount()) std::abort();
  return 0;
}
