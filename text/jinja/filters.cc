// jinja2's built-in filters used by chat templates, plus transformers' tojson.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/status_macros.h"
#include "text/jinja/builtins.h"
#include "text/jinja/json.h"
#include "text/jinja/rare_filters.h"
#include "text/jinja/strings.h"

namespace zerofit::text {
namespace {

bool BoolArg(const CallArgs& args, size_t i, const char* name) {
  const Value* v = FindArg(args, i, name);
  return v != nullptr && v->Truthy();
}

// Sort key: strings compare case-insensitively unless case_sensitive (jinja2's default for sort/unique).
Value SortKey(const Value& v, bool case_sensitive) {
  if (v.is_string() && !case_sensitive) return Value::String(PyLower(v.str()));
  return v;
}

// The text Python's int()/float() parse: surrounding whitespace stripped, and underscores between digits
// ("1_000") dropped; an empty string where underscores are misplaced (Python rejects those).
std::string PythonNumberText(const std::string& s) {
  std::string t = PyStrip(s, true, true, nullptr);
  std::string out;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] != '_') {
      out += t[i];
      continue;
    }
    bool between_digits = i > 0 && i + 1 < t.size() && std::isdigit(static_cast<unsigned char>(t[i - 1])) &&
                          std::isdigit(static_cast<unsigned char>(t[i + 1]));
    if (!between_digits) return "";
  }
  return out;
}

absl::StatusOr<Value> Length(const Value& v) {
  if (v.is_string()) return Value::Int(static_cast<int64_t>(Utf8Length(v.str())));
  if (v.is_list()) return Value::Int(static_cast<int64_t>(v.list().size()));
  if (v.is_dict()) return Value::Int(static_cast<int64_t>(v.dict().items.size()));
  if (v.is_undefined()) return Value::Int(0);
  return TypeError(absl::StrCat("object of type '", v.TypeName(), "' has no len()"));
}

absl::StatusOr<Value> ToInt(const Value& v, const CallArgs& args) {
  const Value* dflt = FindArg(args, 0, "default");
  if (v.is_int() || v.is_bool()) return Value::Int(v.int_value());
  if (v.is_float()) return Value::Int(static_cast<int64_t>(std::trunc(v.number())));
  if (v.is_string()) {
    std::string s = PythonNumberText(v.str());
    int64_t i;
    if (absl::SimpleAtoi(s, &i)) return Value::Int(i);
    double d;  // jinja2: "42.23"|int is int(float("42.23"))
    if (absl::SimpleAtod(s, &d) && std::isfinite(d)) return Value::Int(static_cast<int64_t>(std::trunc(d)));
  }
  return dflt ? *dflt : Value::Int(0);
}

absl::StatusOr<Value> ToFloat(const Value& v, const CallArgs& args) {
  const Value* dflt = FindArg(args, 0, "default");
  if (v.is_number()) return Value::Float(v.number());
  double d;
  if (v.is_string() && absl::SimpleAtod(PythonNumberText(v.str()), &d)) return Value::Float(d);
  return dflt ? *dflt : Value::Float(0);
}

absl::StatusOr<Value> Join(const Value& v, const CallArgs& args) {
  const Value* sep = FindArg(args, 0, "d");
  ZF_ASSIGN_OR_RETURN(std::vector<Value> items, IterateValue(v));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep ? sep->ToString() : "";
    ZF_ASSIGN_OR_RETURN(Value item, AttributePath(items[i], FindArg(args, 1, "attribute")));
    out += item.ToString();
    if (out.size() > kMaxBuiltinStringBytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("join made more than ", kMaxBuiltinStringBytes, " bytes"));
    }
  }
  return Value::String(out);
}

absl::StatusOr<Value> ToJson(const Value& v, const CallArgs& args) {
  // transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
  JsonDumpOptions o;
  o.ensure_ascii = BoolArg(args, 0, "ensure_ascii");
  const Value* indent = FindArg(args, 1, "indent");
  if (indent && !indent->is_none()) {
    constexpr int64_t kMaxIndent = 1024;  // spaces per nesting level; bounds the output before dumping
    if (indent->int_value() > kMaxIndent) {
      return absl::ResourceExhaustedError(
          absl::StrCat("tojson indent ", indent->int_value(), " is larger than ", kMaxIndent));
    }
    o.indent = static_cast<int>(indent->int_value());
  }
  const Value* seps = FindArg(args, 2, "separators");
  if (seps && seps->is_list() && seps->list().size() == 2) {
    o.item_separator = seps->list()[0].ToString();
    o.key_separator = seps->list()[1].ToString();
  }
  o.sort_keys = BoolArg(args, 3, "sort_keys");
  ZF_ASSIGN_OR_RETURN(std::string s, DumpJson(v, o));
  return Value::String(s);
}

// Bounds indent's output: a width is a count of spaces the filter allocates for every line.
constexpr int64_t kMaxIndentWidth = int64_t{1} << 20;
constexpr size_t kMaxIndentOutputBytes = size_t{1} << 24;

absl::StatusOr<Value> Indent(const Value& v, const CallArgs& args) {
  const Value* width = FindArg(args, 0, "width");
  if (width != nullptr && !width->is_string() && width->int_value() > kMaxIndentWidth) {
    return absl::ResourceExhaustedError(
        absl::StrCat("indent width ", width->int_value(), " is larger than ", kMaxIndentWidth));
  }
  std::string pad = width == nullptr     ? "    "
                    : width->is_string() ? width->str()
                                         : std::string(std::max<int64_t>(0, width->int_value()), ' ');
  bool first = BoolArg(args, 1, "first");
  bool blank = BoolArg(args, 2, "blank");
  std::string s = v.ToString() + "\n";
  std::vector<std::string> lines = absl::StrSplit(s, '\n');
  lines.pop_back();  // splitlines drops the piece after the final newline
  std::string out = lines.empty() ? "" : lines[0];
  for (size_t i = 1; i < lines.size(); ++i) {
    out += "\n";
    if (blank || !lines[i].empty()) out += pad;
    out += lines[i];
    if (out.size() > kMaxIndentOutputBytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("indent output is larger than ", kMaxIndentOutputBytes, " bytes"));
    }
  }
  return Value::String(first ? pad + out : out);
}

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// select / reject / selectattr / rejectattr.
absl::StatusOr<Value> Select(const Value& v, CallArgs& args, bool by_attr, bool keep_if) {
  ZF_ASSIGN_OR_RETURN(std::vector<Value> items, IterateValue(v));
  size_t first_test_arg = by_attr ? 1 : 0;
  const Value* test = first_test_arg < args.args.size() ? &args.args[first_test_arg] : nullptr;
  CallArgs test_args;
  for (size_t i = first_test_arg + 1; i < args.args.size(); ++i) test_args.args.push_back(args.args[i]);
  std::vector<Value> out;
  for (const Value& item : items) {
    Value subject = item;
    if (by_attr) {
      if (args.args.empty()) return TypeError("selectattr needs an attribute name");
      ZF_ASSIGN_OR_RETURN(subject, AttributePath(item, &args.args[0]));
    }
    bool ok = subject.Truthy();
    if (test != nullptr) {
      ZF_ASSIGN_OR_RETURN(ok, ApplyTest(test->ToString(), subject, test_args));
    }
    if (ok == keep_if) out.push_back(item);
  }
  return Value::List(std::move(out));
}

absl::StatusOr<Value> Map(const Value& v, CallArgs& args) {
  ZF_ASSIGN_OR_RETURN(std::vector<Value> items, IterateValue(v));
  std::vector<Value> out;
  const Value* attribute = FindArg(args, SIZE_MAX, "attribute");
  if (attribute != nullptr) {
    const Value* dflt = FindArg(args, SIZE_MAX, "default");
    for (const Value& item : items) {
      ZF_ASSIGN_OR_RETURN(Value got, AttributePath(item, attribute));
      out.push_back(got.is_undefined() && dflt ? *dflt : got);
    }
    return Value::List(std::move(out));
  }
  if (args.args.empty()) return TypeError("map requires a filter argument");
  CallArgs rest;
  rest.args.assign(args.args.begin() + 1, args.args.end());
  rest.kwargs = args.kwargs;
  for (const Value& item : items) {
    ZF_ASSIGN_OR_RETURN(Value got, ApplyFilter(args.args[0].ToString(), item, rest));
    out.push_back(got);
  }
  return Value::List(std::move(out));
}

absl::StatusOr<Value> Sort(const Value& v, const CallArgs& args, bool unique) {
  ZF_ASSIGN_OR_RETURN(std::vector<Value> items, IterateValue(v));
  bool reverse = !unique && BoolArg(args, 0, "reverse");
  bool case_sensitive = BoolArg(args, unique ? 0 : 1, "case_sensitive");
  const Value* attribute = FindArg(args, unique ? 1 : 2, "attribute");
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& item : items) {
    ZF_ASSIGN_OR_RETURN(Value key, AttributePath(item, attribute));
    keyed.emplace_back(SortKey(key, case_sensitive), item);
  }
  std::vector<Value> out;
  if (unique) {
    std::vector<Value> seen;
    for (auto& entry : keyed) {
      const Value& k = entry.first;  // not a structured binding: C++17 lambdas cannot capture those (clang)
      if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return ValuesEqual(s, k); })) {
        seen.push_back(k);
        out.push_back(entry.second);
      }
    }
    return Value::List(std::move(out));
  }
  absl::Status error;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    auto lt = reverse ? ValueLess(b.first, a.first) : ValueLess(a.first, b.first);
    if (!lt.ok()) error = lt.status();
    return lt.ok() && *lt;
  });
  ZF_RETURN_IF_ERROR(error);
  for (auto& kv : keyed) out.push_back(kv.second);
  return Value::List(std::move(out));
}

absl::StatusOr<Value> MinMax(const Value& v, const CallArgs& args, bool max) {
  ZF_ASSIGN_OR_RETURN(Value sorted, Sort(v, CallArgs{{}, args.kwargs}, false));
  if (sorted.list().empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  return max ? sorted.list().back() : sorted.list().front();
}

absl::StatusOr<Value> Sum(const Value& v, const CallArgs& args) {
  ZF_ASSIGN_OR_RETURN(std::vector<Value> items, IterateValue(v));
  const Value* start = FindArg(args, 1, "start");
  bool is_float = start && start->is_float();
  double f = start ? start->number() : 0;
  int64_t i = start && !is_float ? start->int_value() : 0;
  for (const Value& raw : items) {
    ZF_ASSIGN_OR_RETURN(Value item, AttributePath(raw, FindArg(args, 0, "attribute")));
    if (!item.is_number())
      return TypeError(absl::StrCat("unsupported operand type(s) for +: 'int' and '", item.TypeName(), "'"));
    is_float = is_float || item.is_float();
    f += item.number();
    i += item.is_float() ? 0 : item.int_value();
  }
  return is_float ? Value::Float(f) : Value::Int(i);
}

absl::StatusOr<Value> FirstLast(const Value& v, bool first) {
  ZF_ASSIGN_OR_RETURN(std::vector<Value> items, IterateValue(v));
  if (items.empty())
    return Value::Undefined(absl::StrCat("No ", first ? "first" : "last", " item, sequence was empty."));
  return first ? items.front() : items.back();
}

}  // namespace

absl::StatusOr<Value> AttributePath(const Value& item, const Value* attribute) {
  if (attribute == nullptr) return item;
  if (attribute->is_int() && item.is_list()) {
    int64_t i = attribute->int_value();
    if (i >= 0 && i < static_cast<int64_t>(item.list().size())) return item.list()[i];
    return Value::Undefined("no such element");
  }
  Value cur = item;
  for (const std::string& part : std::vector<std::string>(absl::StrSplit(attribute->ToString(), '.'))) {
    ZF_ASSIGN_OR_RETURN(cur, GetAttribute(cur, part));
  }
  return cur;
}

bool IsKnownFilter(const std::string& name) {
  static const char* kFilters[] = {
      "trim",   "length", "count",  "upper",  "lower",       "title",      "capitalize", "replace",
      "string", "int",    "float",  "first",  "last",        "join",       "default",    "d",
      "items",  "list",   "map",    "select", "reject",      "selectattr", "rejectattr", "tojson",
      "indent", "safe",   "escape", "e",      "forceescape", "sort",       "unique",     "reverse",
      "abs",    "round",  "sum",    "min",    "max",         "format",     "dictsort"};
  for (const char* f : kFilters) {
    if (name == f) return true;
  }
  return IsRareFilter(name);
}

namespace {

absl::StatusOr<Value> Trim(const Value& v, CallArgs& args) {
  const Value* chars = FindArg(args, 0, "chars");
  std::string set = chars && chars->is_string() ? chars->str() : "";
  return Value::String(PyStrip(v.ToString(), true, true, chars && chars->is_string() ? &set : nullptr));
}

absl::StatusOr<Value> Replace(const Value& v, CallArgs& args) {
  const Value* from = FindArg(args, 0, "old");
  const Value* to = FindArg(args, 1, "new");
  const Value* count = FindArg(args, 2, "count");
  if (!from || !to) return TypeError("replace needs old and new");
  const int64_t n = count && !count->is_none() ? count->int_value() : -1;
  const std::string s = v.ToString();
  ZF_RETURN_IF_ERROR(CheckReplaceSize(s, from->ToString(), to->ToString(), n));
  return Value::String(PyReplace(s, from->ToString(), to->ToString(), n));
}

// default(value, boolean=false): the value, or the default where it is undefined (or falsy, with boolean).
Value Default(const Value& v, CallArgs& args) {
  const Value* dflt = FindArg(args, 0, "default_value");
  bool use = v.is_undefined() || (BoolArg(args, 1, "boolean") && !v.Truthy());
  return use ? (dflt ? *dflt : Value::String("")) : v;
}

absl::StatusOr<Value> Items(const Value& v) {
  if (v.is_undefined()) return Value::List({});
  if (!v.is_dict()) return TypeError("items filter needs a mapping");
  CallArgs none;
  return BoundMethod(v, "items")->function()(none);
}

// reverse: a string by code points, anything iterable as a list.
absl::StatusOr<Value> Reverse(const Value& v) {
  if (v.is_string()) {
    std::u32string cps = DecodeUtf8(v.str());
    return Value::String(EncodeUtf8(std::u32string(cps.rbegin(), cps.rend())));
  }
  ZF_ASSIGN_OR_RETURN(std::vector<Value> items, IterateValue(v));
  return Value::List(std::vector<Value>(items.rbegin(), items.rend()));
}

absl::StatusOr<Value> Abs(const Value& v) {
  if (v.is_float()) return Value::Float(std::fabs(v.number()));
  if (v.is_number()) return Value::Int(std::llabs(v.int_value()));
  return TypeError(absl::StrCat("bad operand type for abs(): '", v.TypeName(), "'"));
}

Value Round(const Value& v, CallArgs& args) {
  const Value* precision = FindArg(args, 0, "precision");
  double scale = std::pow(10.0, precision ? precision->int_value() : 0);
  return Value::Float(std::round(v.number() * scale) / scale);
}

// dictsort: a mapping's items sorted by key.
absl::StatusOr<Value> DictSort(const Value& v) {
  if (!v.is_dict()) return TypeError("dictsort needs a mapping");
  CallArgs none;
  ZF_ASSIGN_OR_RETURN(Value items, BoundMethod(v, "items")->function()(none));
  CallArgs by_key;
  by_key.kwargs.emplace_back("attribute", Value::Int(0));
  return Sort(items, by_key, false);
}

}  // namespace

absl::StatusOr<Value> ApplyFilter(const std::string& name, const Value& v, CallArgs& args) {
  if (name == "trim") return Trim(v, args);
  if (name == "length" || name == "count") return Length(v);
  if (name == "upper") return Value::String(PyUpper(v.ToString()));
  if (name == "lower") return Value::String(PyLower(v.ToString()));
  if (name == "title") return Value::String(JinjaTitle(v.ToString()));
  if (name == "capitalize") return Value::String(PyCapitalize(v.ToString()));
  if (name == "replace") return Replace(v, args);
  if (name == "string") return Value::String(v.ToString());
  if (name == "int") return ToInt(v, args);
  if (name == "float") return ToFloat(v, args);
  if (name == "first" || name == "last") return FirstLast(v, name == "first");
  if (name == "join") return Join(v, args);
  if (name == "default" || name == "d") return Default(v, args);
  if (name == "items") return Items(v);
  if (name == "list") {
    ZF_ASSIGN_OR_RETURN(std::vector<Value> items, IterateValue(v));
    return Value::List(std::move(items));
  }
  if (name == "map") return Map(v, args);
  if (name == "select" || name == "reject") return Select(v, args, false, name == "select");
  if (name == "selectattr" || name == "rejectattr") return Select(v, args, true, name == "selectattr");
  if (name == "tojson") return ToJson(v, args);
  if (name == "indent") return Indent(v, args);
  if (name == "safe") return v;
  if (name == "escape" || name == "e" || name == "forceescape")
    return Value::String(HtmlEscape(v.ToString()));
  if (name == "sort") return Sort(v, args, false);
  if (name == "unique") return Sort(v, args, true);
  if (name == "reverse") return Reverse(v);
  if (name == "abs") return Abs(v);
  if (name == "round") return Round(v, args);
  if (name == "sum") return Sum(v, args);
  if (name == "min" || name == "max") return MinMax(v, args, name == "max");
  if (name == "format") {
    ZF_ASSIGN_OR_RETURN(std::string s, PercentFormat(v.ToString(), Value::List(args.args, /*tuple=*/true)));
    return Value::String(s);
  }
  if (name == "dictsort") return DictSort(v);
  if (IsRareFilter(name)) return ApplyRareFilter(name, v, args);
  return TypeError(absl::StrCat("No filter named '", name, "'."));  // keep in sync with IsKnownFilter
}

}  // namespace zerofit::text
