#include "text/jinja/json.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "text/jinja/strings.h"

namespace zerofit::text {
namespace {

absl::StatusOr<Value> FromJsonAt(const nlohmann::ordered_json& json, int depth, int max_depth) {
  if (depth > max_depth) {
    return absl::InvalidArgumentError(absl::StrCat("JSON input nests deeper than ", max_depth, " levels"));
  }
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::None();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::Bool(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::Int(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = json.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::Float(static_cast<double>(u));
      return Value::Int(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::Float(json.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::String(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) {
        auto v = FromJsonAt(item, depth + 1, max_depth);
        if (!v.ok()) return v.status();
        items.push_back(*std::move(v));
      }
      return Value::List(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value dict = Value::Dict();
      for (const auto& [key, item] : json.items()) {
        auto v = FromJsonAt(item, depth + 1, max_depth);
        if (!v.ok()) return v.status();
        dict.mutable_dict().items.emplace_back(key, *std::move(v));
      }
      return dict;
    }
    default:
      return absl::InvalidArgumentError("binary JSON values are not supported");
  }
}

void AppendJsonString(std::string* out, const std::string& s, bool ensure_ascii) {
  out->push_back('"');
  for (char32_t c : DecodeUtf8(s)) {
    char buf[16];
    switch (c) {
      case '"':
        out->append("\\\"");
        continue;
      case '\\':
        out->append("\\\\");
        continue;
      case '\n':
        out->append("\\n");
        continue;
      case '\r':
        out->append("\\r");
        continue;
      case '\t':
        out->append("\\t");
        continue;
      case '\b':
        out->append("\\b");
        continue;
      case '\f':
        out->append("\\f");
        continue;
      default:
        break;
    }
    if (c < 0x20 || (ensure_ascii && c >= 0x7f)) {
      if (c >= 0x10000) {
        char32_t v = c - 0x10000;
        std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
      } else {
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      }
      out->append(buf);
    } else {
      AppendUtf8(out, c);
    }
  }
  out->push_back('"');
}

class JsonDumper {
 public:
  explicit JsonDumper(const JsonDumpOptions& options)
      : options_(options),
        item_sep_(options.item_separator ? *options.item_separator
                  : options.indent       ? ","
                                         : ", ") {}

  absl::Status Dump(const Value& v, int level, std::string* out) {
    if (level > 512) return absl::InvalidArgumentError("tojson: value nests too deeply");
    switch (v.kind()) {
      case Value::Kind::kNone:
        out->append("null");
        return absl::OkStatus();
      case Value::Kind::kBool:
        out->append(v.bool_value() ? "true" : "false");
        return absl::OkStatus();
      case Value::Kind::kInt:
        absl::StrAppend(out, v.int_value());
        return absl::OkStatus();
      case Value::Kind::kFloat: {
        std::string f = FormatPythonFloat(v.number());
        out->append(f == "inf" ? "Infinity" : f == "-inf" ? "-Infinity" : f == "nan" ? "NaN" : f);
        return absl::OkStatus();
      }
      case Value::Kind::kString:
        AppendJsonString(out, v.str(), options_.ensure_ascii);
        return absl::OkStatus();
      case Value::Kind::kList:
        return DumpList(v, level, out);
      case Value::Kind::kDict:
        if (!v.is_namespace()) return DumpDict(v, level, out);
        [[fallthrough]];
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("Object of type ", v.TypeName(), " is not JSON serializable"));
    }
  }

 private:
  void Newline(int level, std::string* out) {
    if (!options_.indent) return;
    out->push_back('\n');
    out->append(static_cast<size_t>(std::max(0, *options_.indent) * level), ' ');
  }

  absl::Status DumpList(const Value& v, int level, std::string* out) {
    if (v.list().empty()) {
      out->append("[]");
      return absl::OkStatus();
    }
    out->push_back('[');
    for (size_t i = 0; i < v.list().size(); ++i) {
      if (i > 0) out->append(item_sep_);
      Newline(level + 1, out);
      absl::Status s = Dump(v.list()[i], level + 1, out);
      if (!s.ok()) return s;
    }
    Newline(level, out);
    out->push_back(']');
    return absl::OkStatus();
  }

  absl::Status DumpDict(const Value& v, int level, std::string* out) {
    if (v.dict().items.empty()) {
      out->append("{}");
      return absl::OkStatus();
    }
    std::vector<const std::pair<std::string, Value>*> items;
    for (const auto& kv : v.dict().items) items.push_back(&kv);
    if (options_.sort_keys) {
      std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
    }
    out->push_back('{');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out->append(item_sep_);
      Newline(level + 1, out);
      AppendJsonString(out, items[i]->first, options_.ensure_ascii);
      out->append(options_.key_separator);
      absl::Status s = Dump(items[i]->second, level + 1, out);
      if (!s.ok()) return s;
    }
    Newline(level, out);
    out->push_back('}');
    return absl::OkStatus();
  }

  const JsonDumpOptions& options_;
  std::string item_sep_;
};

}  // namespace

absl::StatusOr<Value> ValueFromJson(const nlohmann::ordered_json& json, int max_depth) {
  return FromJsonAt(json, 0, max_depth);
}

absl::StatusOr<std::string> DumpJson(const Value& value, const JsonDumpOptions& options) {
  std::string out;
  JsonDumper dumper(options);
  absl::Status s = dumper.Dump(value, 0, &out);
  if (!s.ok()) return s;
  return out;
}

}  // namespace zerofit::text
