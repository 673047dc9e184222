// Conversions between nlohmann JSON and interpreter values, and Python's json.dumps (transformers' tojson).
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "text/jinja/value.h"

namespace zerofit::text {

// Objects keep their key order (Python dicts do; tojson output depends on it). InvalidArgument when the
// document nests deeper than `max_depth`.
absl::StatusOr<Value> ValueFromJson(const nlohmann::ordered_json& json, int max_depth);

// The arguments of Python's json.dumps that transformers' tojson filter passes through.
struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<int> indent;                  // null: one line
  std::optional<std::string> item_separator;  // default ", " without indent, "," with it
  std::string key_separator = ": ";
  bool sort_keys = false;
};

// json.dumps(value, ...): floats as Python repr, non-ASCII kept unless ensure_ascii. InvalidArgument for
// values JSON cannot hold (undefined, functions) with Python's message.
absl::StatusOr<std::string> DumpJson(const Value& value, const JsonDumpOptions& options);

}  // namespace zerofit::text
