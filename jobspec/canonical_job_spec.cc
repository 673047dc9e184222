#include "jobspec/canonical_job_spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace zerofit::jobspec {

namespace {

// Appends node `n`: scalars length-prefixed (no value can imitate structure), mappings sorted by key.
// The spec was accepted by ParseJobSpec, whose fields nest two levels: the recursion is shallow.
void AppendCanonical(const YAML::Node& n, std::string* out) {
  switch (n.Type()) {
    case YAML::NodeType::Scalar:
      absl::StrAppend(out, "s", n.Scalar().size(), ":", n.Scalar());
      return;
    case YAML::NodeType::Sequence:
      out->push_back('[');
      for (const YAML::Node& item : n) AppendCanonical(item, out);
      out->push_back(']');
      return;
    case YAML::NodeType::Map: {
      std::vector<std::pair<std::string, std::string>> entries;
      for (const auto& kv : n) {
        std::string key, value;
        AppendCanonical(kv.first, &key);
        AppendCanonical(kv.second, &value);
        entries.emplace_back(std::move(key), std::move(value));
      }
      std::sort(entries.begin(), entries.end());
      out->push_back('{');
      for (const auto& [key, value] : entries) absl::StrAppend(out, key, value);
      out->push_back('}');
      return;
    }
    default:  // null, undefined
      out->push_back('~');
  }
}

}  // namespace

std::string CanonicalJobSpec(const std::string& yaml_text) {
  try {
    std::string out;
    AppendCanonical(YAML::Load(yaml_text), &out);
    return out;
  } catch (const YAML::Exception&) {
    return yaml_text;
  }
}

}  // namespace zerofit::jobspec
