// Bounded JSON parsing and a read-only cursor that remembers its JSON path, so every configuration error
// names where it is ("tokenizer.json: pre_tokenizer.pretokenizers[1].type: unsupported \"X\"").
// Internal to zerofit_text: public headers never name nlohmann::json.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace zerofit::text {

struct JsonLimits {
  size_t max_bytes = size_t{256} << 20;  // tokenizer.json files are ~1-12 MB
  int max_depth = 64;                    // real files nest < 10 deep
};

// Checks size and nesting depth with a linear scan before nlohmann-json allocates or recurses, then parses.
// `source` names the document in errors.
absl::StatusOr<nlohmann::json> ParseBoundedJson(std::string_view text, std::string_view source,
                                                const JsonLimits& limits);

// A non-owning view of one JSON value plus its path. The referenced json must outlive the view.
class JsonView {
 public:
  JsonView(const nlohmann::json& value, std::string source, std::string path)
      : value_(&value), source_(std::move(source)), path_(std::move(path)) {}

  const nlohmann::json& value() const { return *value_; }
  const std::string& path() const { return path_; }
  bool is_null() const { return value_->is_null(); }
  bool Has(std::string_view key) const;

  // Child views; a missing key yields a view of null (callers decide whether null is allowed).
  JsonView operator[](std::string_view key) const;
  JsonView at(size_t index) const;

  absl::StatusOr<std::string> String(std::string_view key) const;
  // Missing or null key -> `fallback`.
  absl::StatusOr<std::string> StringOr(std::string_view key, std::string_view fallback) const;
  absl::StatusOr<bool> BoolOr(std::string_view key, bool fallback) const;
  absl::StatusOr<int64_t> IntOr(std::string_view key, int64_t fallback, int64_t lo, int64_t hi) const;
  // The "type" field, which must be a string.
  absl::StatusOr<std::string> Type() const { return String("type"); }

  // Errors carrying "<source>: <path>[.key]: <message>".
  absl::Status Error(std::string_view message) const;
  absl::Status ErrorAt(std::string_view key, std::string_view message) const;
  absl::Status Unsupported(std::string_view key, std::string_view what) const;
  // Fails unless this value is an array (or, with `object`, an object).
  absl::Status ExpectArray() const;
  absl::Status ExpectObject() const;

 private:
  std::string ChildPath(std::string_view key) const;

  const nlohmann::json* value_;
  std::string source_;
  std::string path_;
};

}  // namespace zerofit::text
