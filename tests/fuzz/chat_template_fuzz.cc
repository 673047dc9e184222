// Fuzz target: chat template parsing, then rendering with a fixed conversation (with and without tools and
// the generation prompt). Seeds: corpus/chat_template (the synthetic golden templates and the real ones).
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "text/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using Json = nlohmann::ordered_json;
  auto t = zerofit::text::ChatTemplate::Parse(std::string(reinterpret_cast<const char*>(data), size));
  if (!t.ok()) return 0;
  const Json messages = Json::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}, {"type": "image"}]},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function":
      {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "22C", "name": "get_weather"},
    {"role": "assistant", "content": "22\u00b0C in Paris \ud83d\ude00"}])");
  zerofit::text::ChatTemplateOptions options;
  options.bos_token = "<s>";
  options.eos_token = "</s>";
  options.now = absl::FromUnixSeconds(1700000000);
  options.time_zone = absl::UTCTimeZone();
  options.limits.max_steps = 1 << 16;  // keeps each input fast; the limits themselves are under test too
  options.limits.max_output_bytes = 1 << 20;
  (void)t->Render(messages, options);
  options.add_generation_prompt = true;
  options.tools = Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
  options.extra = Json::parse(R"({"enable_thinking": false, "tree": [{"c": [{"c": []}]}]})");
  (void)t->Render(messages, options);
  return 0;
}
