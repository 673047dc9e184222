#include "text/json_view.h"

#include "absl/strings/str_cat.h"
#include "core/excerpt.h"
#include "text/string_view_compat.h"

namespace zerofit::text {
namespace {

const nlohmann::json& NullJson() {
  static const nlohmann::json* null_value = new nlohmann::json();
  return *null_value;
}

// Deepest [ / { nesting outside strings; stops early once `limit` is exceeded.
int MaxNesting(std::string_view text, int limit) {
  int depth = 0, max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
      if (max_depth > limit) return max_depth;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

}  // namespace

absl::StatusOr<nlohmann::json> ParseBoundedJson(std::string_view text, std::string_view source,
                                                const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(AsAbsl(source), ": ", text.size(), " bytes exceeds the limit of ", limits.max_bytes));
  }
  if (MaxNesting(text, limits.max_depth) > limits.max_depth) {
    return absl::InvalidArgumentError(
        absl::StrCat(AsAbsl(source), ": JSON nesting deeper than ", limits.max_depth, " levels"));
  }
  // nlohmann reports syntax errors only through exceptions; this is the library's border.
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(AsAbsl(source), ": malformed JSON: ", e.what()));
  }
}

bool JsonView::Has(std::string_view key) const {
  return value_->is_object() && value_->find(std::string(key)) != value_->end();
}

JsonView JsonView::operator[](std::string_view key) const {
  const nlohmann::json* child = &NullJson();
  if (value_->is_object()) {
    auto it = value_->find(std::string(key));
    if (it != value_->end()) child = &*it;
  }
  return JsonView(*child, source_, ChildPath(key));
}

JsonView JsonView::at(size_t index) const {
  const nlohmann::json* child = &NullJson();
  if (value_->is_array() && index < value_->size()) child = &(*value_)[index];
  return JsonView(*child, source_, absl::StrCat(path_, "[", index, "]"));
}

absl::StatusOr<std::string> JsonView::String(std::string_view key) const {
  const JsonView child = (*this)[key];
  if (!child.value().is_string()) return child.Error("expected a string");
  return child.value().get<std::string>();
}

absl::StatusOr<std::string> JsonView::StringOr(std::string_view key, std::string_view fallback) const {
  if ((*this)[key].is_null()) return std::string(fallback);
  return String(key);
}

absl::StatusOr<bool> JsonView::BoolOr(std::string_view key, bool fallback) const {
  const JsonView child = (*this)[key];
  if (child.is_null()) return fallback;
  if (!child.value().is_boolean()) return child.Error("expected true or false");
  return child.value().get<bool>();
}

absl::StatusOr<int64_t> JsonView::IntOr(std::string_view key, int64_t fallback, int64_t lo,
                                        int64_t hi) const {
  const JsonView child = (*this)[key];
  if (child.is_null()) return fallback;
  if (!child.value().is_number_integer()) return child.Error("expected an integer");
  const int64_t v = child.value().get<int64_t>();
  if (v < lo || v > hi) return child.Error(absl::StrCat(v, " is outside [", lo, ", ", hi, "]"));
  return v;
}

absl::Status JsonView::Error(std::string_view message) const {
  if (path_.empty()) return absl::InvalidArgumentError(absl::StrCat(source_, ": ", AsAbsl(message)));
  return absl::InvalidArgumentError(absl::StrCat(source_, ": ", path_, ": ", AsAbsl(message)));
}

absl::Status JsonView::ErrorAt(std::string_view key, std::string_view message) const {
  return (*this)[key].Error(message);
}

absl::Status JsonView::Unsupported(std::string_view key, std::string_view what) const {
  return ErrorAt(key, absl::StrCat("unsupported \"", core::Excerpt(what), "\""));
}

absl::Status JsonView::ExpectArray() const {
  return value_->is_array() ? absl::OkStatus() : Error("expected an array");
}

absl::Status JsonView::ExpectObject() const {
  return value_->is_object() ? absl::OkStatus() : Error("expected an object");
}

std::string JsonView::ChildPath(std::string_view key) const {
  return path_.empty() ? std::string(key) : absl::StrCat(path_, ".", AsAbsl(key));
}

}  // namespace zerofit::text
