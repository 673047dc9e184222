// A bound on JSON nesting, checked on the raw text before any parser sees it (STYLE 18). nlohmann's parser
// is iterative, but dumping, copying and walking a parsed value recurse once per level, so a file of
// 100,000 nested `[` overflows the stack of whatever touches it next. Every parse of untrusted JSON (a
// safetensors header, config.json, a DeepSpeed config, a checkpoint manifest, a JSONL line) calls this
// first.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace zerofit::core {

// Deeper than any file zerofit reads legitimately (config.json and safetensors headers nest 3 levels,
// chat messages with tool calls about 8).
inline constexpr int kMaxJsonDepth = 64;

// OK when no array or object in `text` is nested more than `max_depth` levels; otherwise
// InvalidArgument "<source>:<line>: JSON nested deeper than <max_depth> levels". Brackets inside strings
// do not count. Linear in the text, no allocation; does not validate the JSON otherwise.
absl::Status CheckJsonDepth(std::string_view text, int max_depth, const std::string& source);

}  // namespace zerofit::core
