// Tests, str/dict methods, attribute lookup and string formatting (filters live in jinja/filters.cc).
#include "text/jinja/builtins.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/excerpt.h"
#include "core/status_macros.h"
#include "text/jinja/strings.h"

namespace zerofit::text {
namespace {

const std::string kNewline = "\n";

// s[start:end] over code points (Python slice clamping, no step).
std::u32string PySliceCodePoints(const std::u32string& s, const Value& start, const Value& end) {
  int64_t n = static_cast<int64_t>(s.size());
  auto clamp = [n](const Value& v, int64_t dflt) {
    if (!v.is_int() && !v.is_bool()) return dflt;
    int64_t i = v.int_value() < 0 ? v.int_value() + n : v.int_value();
    return std::max<int64_t>(0, std::min(n, i));
  };
  int64_t b = clamp(start, 0);
  int64_t e = clamp(end, n);
  return b < e ? s.substr(static_cast<size_t>(b), static_cast<size_t>(e - b)) : std::u32string();
}

// str.startswith / str.endswith: a prefix (or a tuple of them), optionally within a slice.
absl::StatusOr<Value> StartsOrEndsWith(const std::string& s, const std::string& name, CallArgs& args) {
  if (args.args.size() > 1) {  // (prefix, start[, end]): the same test on the slice
    std::u32string cps = DecodeUtf8(s);
    CallArgs rest{{args.args[0]}, {}};
    Value sliced = Value::String(EncodeUtf8(
        PySliceCodePoints(cps, args.args[1], args.args.size() > 2 ? args.args[2] : Value::None())));
    return StartsOrEndsWith(sliced.str(), name, rest);
  }
  const Value* a0 = FindArg(args, 0, "");
  if (a0 == nullptr) return TypeError(absl::StrCat(name, "() takes at least 1 argument (0 given)"));
  std::vector<Value> options = a0->is_list() ? a0->list() : std::vector<Value>{*a0};
  for (const Value& o : options) {
    if (!o.is_string()) return TypeError(absl::StrCat(name, " first arg must be str or a tuple of str"));
    const std::string& p = o.str();
    bool hit = name == "startswith"
                   ? s.compare(0, p.size(), p) == 0
                   : s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
    if (hit) return Value::Bool(true);
  }
  return Value::Bool(false);
}

// str.split / str.rsplit (sep, maxsplit) and str.splitlines.
absl::StatusOr<Value> Split(const std::string& s, const std::string& name, CallArgs& args) {
  std::vector<std::string> pieces;
  if (name == "splitlines") {
    pieces = PySplit(s, &kNewline, -1);
    if (!pieces.empty() && pieces.back().empty()) pieces.pop_back();  // no piece after a final newline
  } else {
    const Value* sep = FindArg(args, 0, "sep");
    const Value* maxsplit = FindArg(args, 1, "maxsplit");
    const std::string* sep_str = sep != nullptr && sep->is_string() ? &sep->str() : nullptr;
    if (sep_str != nullptr && sep_str->empty()) return TypeError("empty separator");
    const int64_t max = maxsplit ? maxsplit->int_value() : -1;
    pieces = name == "split" ? PySplit(s, sep_str, max) : PyRSplit(s, sep_str, max);
  }
  std::vector<Value> parts;
  for (auto& p : pieces) parts.push_back(Value::String(std::move(p)));
  return Value::List(std::move(parts));
}

// str.find / str.count / str.index of a substring (positions and counts in code points).
absl::StatusOr<Value> Search(const std::string& s, const std::string& name, const Value* a0) {
  if (a0 == nullptr || !a0->is_string()) return TypeError(absl::StrCat(name, "() argument must be str"));
  const std::string& needle = a0->str();
  if (name == "count") {
    int64_t n = 0;
    for (size_t p = s.find(needle); p != std::string::npos && !needle.empty();
         p = s.find(needle, p + needle.size())) {
      ++n;
    }
    return Value::Int(needle.empty() ? static_cast<int64_t>(Utf8Length(s)) + 1 : n);
  }
  size_t p = s.find(needle);
  if (p == std::string::npos && name == "index") return TypeError("substring not found");
  return Value::Int(p == std::string::npos ? -1 : static_cast<int64_t>(Utf8Length(s.substr(0, p))));
}

// sep.join(list of str), bounded like every builtin's output.
absl::StatusOr<Value> Join(const std::string& s, const Value* a0) {
  if (a0 == nullptr || !a0->is_list()) return TypeError("join() argument must be a list");
  std::string out;
  for (size_t i = 0; i < a0->list().size(); ++i) {
    if (!a0->list()[i].is_string()) return TypeError("sequence item: expected str instance");
    if (i) out += s;
    out += a0->list()[i].str();
    if (out.size() > kMaxBuiltinStringBytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("join() made more than ", kMaxBuiltinStringBytes, " bytes"));
    }
  }
  return Value::String(out);
}

// str.isdigit / isalpha / isspace / isalnum (ASCII letters and digits, Python's whitespace).
Value CharacterClass(const std::string& s, const std::string& name) {
  if (s.empty()) return Value::Bool(false);
  for (char32_t c : DecodeUtf8(s)) {
    bool digit = c >= '0' && c <= '9';
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    bool ok = name == "isdigit"   ? digit
              : name == "isalpha" ? alpha
              : name == "isalnum" ? digit || alpha
                                  : IsPythonSpace(c);
    if (!ok) return Value::Bool(false);
  }
  return Value::Bool(true);
}

absl::StatusOr<Value> StringMethod(const std::string& s, const std::string& name, CallArgs& args) {
  const Value* a0 = FindArg(args, 0, "");
  const Value* a1 = FindArg(args, 1, "");
  auto opt_str = [](const Value* v) -> const std::string* {
    return v != nullptr && v->is_string() ? &v->str() : nullptr;
  };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    return Value::String(PyStrip(s, name != "rstrip", name != "lstrip", opt_str(a0)));
  }
  if (name == "startswith" || name == "endswith") return StartsOrEndsWith(s, name, args);
  if (name == "split" || name == "rsplit" || name == "splitlines") return Split(s, name, args);
  if (name == "removeprefix" || name == "removesuffix") {
    if (!opt_str(a0)) return TypeError(absl::StrCat(name, "() argument must be str"));
    const std::string& p = a0->str();
    if (name == "removeprefix") return Value::String(s.compare(0, p.size(), p) == 0 ? s.substr(p.size()) : s);
    bool hit = s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
    return Value::String(hit ? s.substr(0, s.size() - p.size()) : s);
  }
  if (name == "upper") return Value::String(PyUpper(s));
  if (name == "lower") return Value::String(PyLower(s));
  if (name == "title") return Value::String(PyTitle(s));
  if (name == "capitalize") return Value::String(PyCapitalize(s));
  if (name == "replace") {
    if (!opt_str(a0) || !opt_str(a1)) return TypeError("replace() arguments must be str");
    const Value* count = FindArg(args, 2, "count");
    const int64_t n = count ? count->int_value() : -1;
    ZF_RETURN_IF_ERROR(CheckReplaceSize(s, a0->str(), a1->str(), n));
    return Value::String(PyReplace(s, a0->str(), a1->str(), n));
  }
  if (name == "find" || name == "count" || name == "index") return Search(s, name, a0);
  if (name == "join") return Join(s, a0);
  if (name == "format") {
    ZF_ASSIGN_OR_RETURN(std::string out, BraceFormat(s, args));
    return Value::String(out);
  }
  if (name == "isdigit" || name == "isalpha" || name == "isspace" || name == "isalnum") {
    return CharacterClass(s, name);
  }
  return TypeError(absl::StrCat("'str' object has no attribute '", core::Excerpt(name), "'"));
}

absl::StatusOr<Value> DictMethod(const Value& d, const std::string& name, CallArgs& args) {
  if (name == "items" || name == "keys" || name == "values") {
    std::vector<Value> out;
    for (const auto& [k, v] : d.dict().items) {
      if (name == "items") out.push_back(Value::List({Value::String(k), v}, /*tuple=*/true));
      if (name == "keys") out.push_back(Value::String(k));
      if (name == "values") out.push_back(v);
    }
    return Value::List(std::move(out));
  }
  // get
  const Value* key = FindArg(args, 0, "key");
  const Value* dflt = FindArg(args, 1, "default");
  if (key == nullptr) return TypeError("get expected at least 1 argument, got 0");
  const Value* hit = key->is_string() ? d.dict().Find(key->str()) : nullptr;
  if (hit != nullptr) return *hit;
  return dflt ? *dflt : Value::None();
}

bool IsStringMethod(const std::string& n) {
  static const char* kNames[] = {"strip",   "lstrip",     "rstrip",       "startswith",  "endswith",
                                 "split",   "upper",      "lower",        "title",       "capitalize",
                                 "replace", "find",       "count",        "index",       "join",
                                 "format",  "isdigit",    "isalpha",      "isspace",     "isalnum",
                                 "rsplit",  "splitlines", "removeprefix", "removesuffix"};
  for (const char* k : kNames) {
    if (n == k) return true;
  }
  return false;
}

}  // namespace

const Value* FindArg(const CallArgs& args, size_t index, const char* keyword) {
  if (index < args.args.size()) return &args.args[index];
  for (const auto& [k, v] : args.kwargs) {
    if (k == keyword) return &v;
  }
  return nullptr;
}

bool IsKnownTest(const std::string& name) {
  static const char* kTests[] = {
      "defined", "undefined", "none",        "string",      "mapping", "iterable", "sequence", "number",
      "integer", "float",     "boolean",     "true",        "false",   "callable", "lower",    "upper",
      "odd",     "even",      "divisibleby", "equalto",     "eq",      "==",       "ne",       "!=",
      "sameas",  "in",        "lt",          "<",           "le",      "<=",       "gt",       ">",
      "ge",      ">=",        "lessthan",    "greaterthan", "filter",  "test"};
  for (const char* t : kTests) {
    if (name == t) return true;
  }
  return false;
}

absl::Status CheckReplaceSize(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
  if (to.size() <= from.size()) return absl::OkStatus();
  size_t hits = 0;
  if (from.empty()) {
    hits = Utf8Length(s) + 1;
  } else {
    for (size_t p = s.find(from); p != std::string_view::npos; p = s.find(from, p + from.size())) ++hits;
  }
  if (count >= 0) hits = std::min(hits, static_cast<size_t>(count));
  const size_t growth = to.size() - from.size();
  if (hits > 0 &&
      (growth > kMaxBuiltinStringBytes / hits || s.size() + hits * growth > kMaxBuiltinStringBytes)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("replace() would make more than ", kMaxBuiltinStringBytes, " bytes"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Value>> IterateValue(const Value& v) {
  if (v.is_list()) return v.list();
  if (v.is_undefined()) return std::vector<Value>{};
  std::vector<Value> out;
  if (v.is_dict() && !v.is_namespace()) {
    for (const auto& kv : v.dict().items) out.push_back(Value::String(kv.first));
    return out;
  }
  if (v.is_string()) {
    if (Utf8Length(v.str()) > kMaxIteratedCodePoints) {
      return absl::ResourceExhaustedError(
          absl::StrCat("iterating a string of more than ", kMaxIteratedCodePoints, " characters"));
    }
    for (char32_t c : DecodeUtf8(v.str())) out.push_back(Value::String(EncodeUtf8(std::u32string(1, c))));
    return out;
  }
  return TypeError(absl::StrCat("'", v.TypeName(), "' object is not iterable"));
}

absl::StatusOr<bool> ValueContains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string()) {
      return TypeError(absl::StrCat("'in <string>' requires string as left operand, not ", item.TypeName()));
    }
    return container.str().find(item.str()) != std::string::npos;
  }
  if (container.is_list()) {
    for (const Value& v : container.list()) {
      if (ValuesEqual(v, item)) return true;
    }
    return false;
  }
  if (container.is_dict()) return item.is_string() && container.dict().Find(item.str()) != nullptr;
  if (container.is_undefined()) return false;
  return TypeError(absl::StrCat("argument of type '", container.TypeName(), "' is not iterable"));
}

absl::Status UndefinedError(const Value& v) {
  return absl::InvalidArgumentError(v.str().empty() ? "value is undefined" : v.str());
}

std::optional<Value> BoundMethod(const Value& obj, const std::string& name) {
  if (obj.is_string() && IsStringMethod(name)) {
    std::string s = obj.str();
    return Value::Function(name, [s, name](CallArgs& args) { return StringMethod(s, name, args); });
  }
  if (obj.is_dict() && !obj.is_namespace() &&
      (name == "items" || name == "keys" || name == "values" || name == "get")) {
    return Value::Function(name, [obj, name](CallArgs& args) { return DictMethod(obj, name, args); });
  }
  return std::nullopt;
}

absl::StatusOr<Value> GetAttribute(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) return absl::InvalidArgumentError(obj.str());
  if (auto method = BoundMethod(obj, name)) return *method;
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().Find(name)) return *v;
  }
  if (const Value* field = obj.Field(name)) return *field;
  // jinja2's message: repr(object_type_repr(obj)) + " has no attribute " + repr(name).
  std::string type = obj.is_none() ? "None" : absl::StrCat(obj.TypeName(), " object");
  return Value::Undefined(absl::StrCat(PythonStringRepr(type), " has no attribute ", PythonStringRepr(name)));
}

absl::StatusOr<bool> ApplyTest(const std::string& name, const Value& v, CallArgs& args) {
  const Value* a0 = FindArg(args, 0, "value");
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict() && !v.is_namespace();
  if (name == "iterable") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "sequence") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.bool_value();
  if (name == "false") return v.is_bool() && !v.bool_value();
  if (name == "callable") return v.is_callable();
  if (name == "filter") return v.is_string() && IsKnownFilter(v.str());
  if (name == "test") return v.is_string() && IsKnownTest(v.str());
  if (name == "lower" || name == "upper") {
    std::string s = v.ToString();
    return s == (name == "lower" ? PyLower(s) : PyUpper(s));
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (!v.is_number() || v.is_float()) return TypeError(absl::StrCat("test '", name, "' needs an integer"));
    int64_t d = name == "divisibleby" ? (a0 && a0->is_number() ? a0->int_value() : 0) : 2;
    if (d == 0) return TypeError("integer division or modulo by zero");
    int64_t r = ((v.int_value() % d) + d) % d;
    return name == "odd" ? r == 1 : r == 0;
  }
  if (a0 == nullptr) return TypeError(absl::StrCat("No test named '", name, "' without an argument."));
  if (name == "equalto" || name == "eq" || name == "==") return ValuesEqual(v, *a0);
  if (name == "ne" || name == "!=") return !ValuesEqual(v, *a0);
  if (name == "sameas") {
    return v.identity() ? v.identity() == a0->identity() : (v.kind() == a0->kind() && ValuesEqual(v, *a0));
  }
  if (name == "in") return ValueContains(*a0, v);
  if (name == "lt" || name == "<" || name == "lessthan" || name == "ge" || name == ">=") {
    ZF_ASSIGN_OR_RETURN(bool lt, ValueLess(v, *a0));
    return (name == "lt" || name == "<" || name == "lessthan") ? lt : !lt;
  }
  if (name == "gt" || name == ">" || name == "greaterthan" || name == "le" || name == "<=") {
    ZF_ASSIGN_OR_RETURN(bool gt, ValueLess(*a0, v));
    return (name == "gt" || name == ">" || name == "greaterthan") ? gt : !gt;
  }
  return TypeError(absl::StrCat("No test named '", name, "'."));  // keep in sync with IsKnownTest
}

namespace {

// Width and precision of a %-spec bound what snprintf writes (a width of 2^31 would take seconds to pad).
constexpr int64_t kMaxFormatWidth = int64_t{1} << 20;

absl::Status CheckFormatSpec(const std::string& spec) {
  for (size_t i = 0; i < spec.size();) {
    if (!std::isdigit(static_cast<unsigned char>(spec[i]))) {
      ++i;
      continue;
    }
    int64_t n = 0;
    for (; i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i])); ++i) {
      n = std::min<int64_t>(n * 10 + (spec[i] - '0'), kMaxFormatWidth + 1);
    }
    if (n > kMaxFormatWidth) {
      return absl::ResourceExhaustedError(
          absl::StrCat("format width or precision in '%", spec, "' is larger than ", kMaxFormatWidth));
    }
  }
  return absl::OkStatus();
}

// snprintf into a string of the exact size (no truncation).
template <typename T>
std::string CFormat(const std::string& format, T value) {
  const int n = std::snprintf(nullptr, 0, format.c_str(), value);
  if (n <= 0) return "";
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), format.c_str(), value);
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace

absl::StatusOr<std::string> PercentFormat(const std::string& fmt, const Value& args) {
  std::vector<Value> items = args.is_tuple() ? args.list() : std::vector<Value>{args};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    size_t j = i + 1;
    while (j < fmt.size() && std::string_view("-+ #0123456789.").find(fmt[j]) != std::string_view::npos) ++j;
    if (j >= fmt.size()) return TypeError("incomplete format");
    char conv = fmt[j];
    std::string spec = fmt.substr(i + 1, j - i - 1);
    i = j;
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (absl::Status s = CheckFormatSpec(spec); !s.ok()) return s;
    if (next >= items.size()) return TypeError("not enough arguments for format string");
    const Value& v = items[next++];
    if (conv == 's' || conv == 'r') {
      std::string s = conv == 's' ? v.ToString() : v.Repr();
      out += spec.empty() ? s : CFormat("%" + spec + "s", s.c_str());
    } else if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X' || conv == 'o') {
      if (!v.is_number())
        return TypeError(absl::StrCat("%", std::string(1, conv), " format: a real number is required, not ",
                                      v.TypeName()));
      std::string c(1, conv == 'i' ? 'd' : conv);
      const double d = v.number();
      if (v.is_float() && !(std::fabs(d) < 9.2e18)) {
        return TypeError(
            absl::StrCat("%", std::string(1, conv), " format: ", v.ToString(), " is out of range"));
      }
      out += CFormat("%" + spec + "ll" + c,
                     static_cast<long long>(v.is_float() ? std::trunc(d) : v.int_value()));
    } else if (conv == 'f' || conv == 'F' || conv == 'e' || conv == 'g') {
      if (!v.is_number()) return TypeError("must be real number, not " + v.TypeName());
      out += CFormat("%" + spec + std::string(1, conv), v.number());
    } else {
      return TypeError(absl::StrCat("unsupported format character '", std::string(1, conv), "'"));
    }
  }
  if (next < items.size()) return TypeError("not all arguments converted during string formatting");
  return out;
}

absl::StatusOr<std::string> BraceFormat(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if ((c == '{' || c == '}') && i + 1 < fmt.size() && fmt[i + 1] == c) {
      out += c;
      ++i;
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos) return TypeError("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    const Value* v = nullptr;
    if (field.empty()) {
      v = auto_index < args.args.size() ? &args.args[auto_index++] : nullptr;
    } else if (std::isdigit(static_cast<unsigned char>(field[0]))) {
      // No std::stoul: it throws on overflow. A number that large is out of range anyway.
      size_t idx = 0;
      for (size_t k = 0; k < field.size() && std::isdigit(static_cast<unsigned char>(field[k])); ++k) {
        idx = std::min<size_t>(idx * 10 + static_cast<size_t>(field[k] - '0'), size_t{1} << 32);
      }
      v = idx < args.args.size() ? &args.args[idx] : nullptr;
    } else {
      v = FindArg(args, SIZE_MAX, field.c_str());
    }
    if (v == nullptr) return TypeError(absl::StrCat("Replacement index ", field, " out of range"));
    out += v->ToString();
  }
  return out;
}

}  // namespace zerofit::text
