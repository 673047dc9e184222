// YamlReader: reads fields of a job spec's YAML with errors that name the file, the line and the field
// ("job.yaml:7: field 'training.lr': expected a number, got 'fast'"). Unknown keys are errors. Shared by the
// spec's sections (job_spec.cc, grpo_spec_yaml.cc).
#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/excerpt.h"
#include "core/status_macros.h"

namespace zerofit::jobspec {

// A field's name in an error: a key is the user's text too (an unknown key of 40,000 characters).
inline constexpr size_t kFieldExcerptBytes = 96;

class YamlReader {
 public:
  explicit YamlReader(std::string source) : source_(std::move(source)) {}

  absl::Status Error(const YAML::Node& node, const std::string& field, const std::string& why) const {
    const int line = node.IsDefined() ? node.Mark().line + 1 : 0;
    return absl::InvalidArgumentError(absl::StrCat(source_, line > 0 ? absl::StrCat(":", line) : "",
                                                   ": field '", core::Excerpt(field, kFieldExcerptBytes),
                                                   "': ", why));
  }

  // A required text field: `node` absent or null is "required" (at the file), a value that is empty or only
  // blanks (`data: ''`) is refused at its line, like the field left out.
  absl::Status Required(const YAML::Node& node, const std::string& field, const std::string& value,
                        const std::string& what) const {
    if (!absl::StripAsciiWhitespace(value).empty()) return absl::OkStatus();
    if (!node.IsDefined() || node.IsNull()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source_, ": field '", field, "': required (", what, ")"));
    }
    return Error(node, field, absl::StrCat("required (", what, "), got an empty value"));
  }

  // The name of a mapping key. yaml-cpp throws on as<std::string>() of a complex key (a mapping or a
  // sequence used as a key, `? [a, b]: 1`), so the key's kind is checked first.
  absl::StatusOr<std::string> KeyName(const YAML::Node& key, const std::string& prefix) const {
    if (!key.IsScalar()) {
      return Error(key, prefix + "?", "a key must be a plain name, not a mapping or a list");
    }
    return key.Scalar();
  }

  // Unknown keys are errors too (a typo must not silently fall back to a default), and so is a key given
  // twice: YAML requires unique keys, yet yaml-cpp keeps both and a lookup returns the first, so the later
  // value, the one a reader takes to win, would be dropped without a word.
  absl::Status OnlyKeys(const YAML::Node& map, const std::string& prefix,
                        const std::set<std::string>& known) const {
    std::map<std::string, int> first_line;
    for (const auto& kv : map) {
      ZF_ASSIGN_OR_RETURN(const std::string key, KeyName(kv.first, prefix));
      if (!known.count(key)) return Error(kv.first, prefix + key, "unknown field");
      const auto [at, added] = first_line.emplace(key, kv.first.Mark().line + 1);
      if (!added) {
        return Error(kv.first, prefix + key, absl::StrCat("given twice (first at line ", at->second, ")"));
      }
    }
    return absl::OkStatus();
  }

  template <typename T>
  absl::Status Get(const YAML::Node& map, const std::string& key, const std::string& field, T* out,
                   const char* expected) const {
    const YAML::Node n = map[key];
    if (!n.IsDefined() || n.IsNull()) return absl::OkStatus();
    if (!n.IsScalar()) return Error(n, field, absl::StrCat("expected ", expected));
    try {
      *out = n.as<T>();
    } catch (const YAML::Exception&) {
      return Error(n, field, absl::StrCat("expected ", expected, ", got ", core::QuotedExcerpt(n.Scalar())));
    }
    return absl::OkStatus();
  }

  template <typename T>
  absl::Status GetOptional(const YAML::Node& map, const std::string& key, const std::string& field,
                           std::optional<T>* out, const char* expected) const {
    if (!map[key].IsDefined() || map[key].IsNull()) return absl::OkStatus();
    T v{};
    ZF_RETURN_IF_ERROR(Get(map, key, field, &v, expected));
    *out = v;
    return absl::OkStatus();
  }

 private:
  std::string source_;
};

// The node a field's name points at ("model", "rollout.top_p", "rewards[1].rule": one level of key below the
// top, a list index on the top key), or the closest present: an error about the field can then name a line.
inline YAML::Node NodeOf(const YAML::Node& root, const std::string& field) {
  const size_t dot = field.find('.');
  const std::string head = field.substr(0, dot);
  YAML::Node n = root[head.substr(0, head.find('['))];
  if (!n.IsDefined()) return n;  // an absent key's node throws on IsSequence() and IsMap()
  if (const size_t open = head.find('['); open != std::string::npos && n.IsSequence()) {
    size_t i = 0;
    if (absl::SimpleAtoi(head.substr(open + 1, head.size() - open - 2), &i) && i < n.size()) n = n[i];
  }
  if (dot == std::string::npos || !n.IsMap()) return n;
  const YAML::Node leaf = n[field.substr(dot + 1)];
  return leaf.IsDefined() ? leaf : n;
}

}  // namespace zerofit::jobspec
