#include "text/jinja/rare_filters.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "text/jinja/builtins.h"
#include "text/jinja/strings.h"
#include "text/unicode.h"

namespace zerofit::text {
namespace {

// An int argument within [lo, kMaxRareFilterSize]; `fallback` when absent.
absl::StatusOr<int64_t> SizeArg(const CallArgs& args, size_t index, const char* name, int64_t fallback,
                                int64_t lo) {
  const Value* v = FindArg(args, index, name);
  if (v == nullptr) return fallback;
  if (!v->is_int() && !v->is_bool()) {
    return TypeError(absl::StrCat("'", v->TypeName(), "' object cannot be interpreted as an integer"));
  }
  const int64_t n = v->int_value();
  if (n < lo || n > kMaxRareFilterSize) {
    return TypeError(absl::StrCat(name, " must be in [", lo, ", ", kMaxRareFilterSize, "], got ", n));
  }
  return n;
}

const Value* FillArg(const CallArgs& args, size_t index) {
  const Value* fill = FindArg(args, index, "fill_with");
  return fill != nullptr && !fill->is_none() ? fill : nullptr;
}

// batch(linecount, fill_with=None): lists of linecount items, the last padded with fill_with.
absl::StatusOr<Value> Batch(const Value& v, const CallArgs& args) {
  ZF_ASSIGN_OR_RETURN(int64_t count, SizeArg(args, 0, "linecount", -1, 1));
  if (count < 0) return TypeError("batch() missing required argument 'linecount'");
  const Value* fill = FillArg(args, 1);
  ZF_ASSIGN_OR_RETURN(std::vector<Value> items, IterateValue(v));
  std::vector<Value> out;
  for (size_t i = 0; i < items.size(); i += static_cast<size_t>(count)) {
    const size_t end = std::min(items.size(), i + static_cast<size_t>(count));
    std::vector<Value> row(items.begin() + static_cast<std::ptrdiff_t>(i),
                           items.begin() + static_cast<std::ptrdiff_t>(end));
    if (fill != nullptr) row.resize(static_cast<size_t>(count), *fill);
    out.push_back(Value::List(std::move(row)));
  }
  return Value::List(std::move(out));
}

// slice(slices, fill_with=None): `slices` columns, the first len % slices one item longer; with fill_with
// the shorter ones are padded (jinja2's algorithm).
absl::StatusOr<Value> Slice(const Value& v, const CallArgs& args) {
  ZF_ASSIGN_OR_RETURN(int64_t slices, SizeArg(args, 0, "slices", -1, 1));
  if (slices < 0) return TypeError("slice() missing required argument 'slices'");
  const Value* fill = FillArg(args, 1);
  ZF_ASSIGN_OR_RETURN(std::vector<Value> items, IterateValue(v));
  const size_t n = static_cast<size_t>(slices);
  const size_t per = items.size() / n, extra = items.size() % n;
  std::vector<Value> out;
  size_t start = 0;
  for (size_t k = 0; k < n; ++k) {
    const size_t len = per + (k < extra ? 1 : 0);
    std::vector<Value> column(items.begin() + static_cast<std::ptrdiff_t>(start),
                              items.begin() + static_cast<std::ptrdiff_t>(start + len));
    if (fill != nullptr && k >= extra) column.push_back(*fill);
    start += len;
    out.push_back(Value::List(std::move(column)));
  }
  return Value::List(std::move(out));
}

// groupby(attribute, default=None, case_sensitive=False): (grouper, list) named tuples sorted by grouper;
// without case_sensitive, strings group by lower case and the grouper is the group's first item's value.
absl::StatusOr<Value> GroupBy(const Value& v, const CallArgs& args) {
  const Value* attribute = FindArg(args, 0, "attribute");
  if (attribute == nullptr) return TypeError("groupby() missing required argument 'attribute'");
  const Value* dflt = FindArg(args, 1, "default");
  const Value* cs = FindArg(args, 2, "case_sensitive");
  const bool case_sensitive = cs != nullptr && cs->Truthy();
  ZF_ASSIGN_OR_RETURN(std::vector<Value> items, IterateValue(v));
  struct Keyed {
    Value key;    // what groups and sorts
    Value value;  // the attribute as written
    Value item;
  };
  std::vector<Keyed> keyed;
  for (const Value& item : items) {
    ZF_ASSIGN_OR_RETURN(Value value, AttributePath(item, attribute));
    if (value.is_undefined()) {
      if (dflt == nullptr) return UndefinedError(value);
      value = *dflt;
    }
    Value key = value.is_string() && !case_sensitive ? Value::String(PyLower(value.str())) : value;
    keyed.push_back({std::move(key), std::move(value), item});
  }
  absl::Status order_error;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const Keyed& a, const Keyed& b) {
    auto less = ValueLess(a.key, b.key);
    if (!less.ok()) {
      order_error = less.status();
      return false;
    }
    return *less;
  });
  if (!order_error.ok()) return order_error;
  std::vector<Value> groups;
  for (size_t i = 0; i < keyed.size();) {
    size_t j = i;
    std::vector<Value> members;
    while (j < keyed.size() && ValuesEqual(keyed[j].key, keyed[i].key)) members.push_back(keyed[j++].item);
    groups.push_back(
        Value::NamedTuple({"grouper", "list"}, {keyed[i].value, Value::List(std::move(members))}));
    i = j;
  }
  return Value::List(std::move(groups));
}

// center(width=80): Python's str.center (the extra space goes left when the margin and width are odd).
absl::StatusOr<Value> Center(const Value& v, const CallArgs& args) {
  ZF_ASSIGN_OR_RETURN(int64_t width, SizeArg(args, 0, "width", 80, std::numeric_limits<int64_t>::min()));
  const std::string s = v.ToString();
  const int64_t len = static_cast<int64_t>(Utf8Length(s));
  if (width <= len) return Value::String(s);
  const int64_t margin = width - len;
  const int64_t left = margin / 2 + (margin & width & 1);
  return Value::String(std::string(static_cast<size_t>(left), ' ') + s +
                       std::string(static_cast<size_t>(margin - left), ' '));
}

// wordcount: the number of runs of Python's \w (alphanumeric or underscore).
Value WordCount(const Value& v) {
  int64_t words = 0;
  bool in_word = false;
  for (char32_t c : DecodeUtf8(v.ToString())) {
    const bool w = c == U'_' || IsAlphanumeric(c);
    if (w && !in_word) ++words;
    in_word = w;
  }
  return Value::Int(words);
}

// truncate(length=255, killwords=False, end='...', leeway=5): jinja2's algorithm in code points.
absl::StatusOr<Value> Truncate(const Value& v, const CallArgs& args) {
  ZF_ASSIGN_OR_RETURN(int64_t length, SizeArg(args, 0, "length", 255, 0));
  const Value* killwords = FindArg(args, 1, "killwords");
  const Value* end_arg = FindArg(args, 2, "end");
  ZF_ASSIGN_OR_RETURN(int64_t leeway, SizeArg(args, 3, "leeway", 5, 0));
  const std::u32string s = DecodeUtf8(v.ToString());
  const std::u32string end = DecodeUtf8(end_arg != nullptr ? end_arg->ToString() : "...");
  if (length < static_cast<int64_t>(end.size())) {
    return TypeError(absl::StrCat("expected length >= ", end.size(), ", got ", length));
  }
  if (static_cast<int64_t>(s.size()) <= length + leeway) return Value::String(EncodeUtf8(s));
  std::u32string head = s.substr(0, static_cast<size_t>(length) - end.size());
  if (killwords == nullptr || !killwords->Truthy()) {
    const size_t space = head.rfind(U' ');
    if (space != std::u32string::npos) head.resize(space);
  }
  return Value::String(EncodeUtf8(head + end));
}

}  // namespace

bool IsRareFilter(const std::string& name) {
  return name == "batch" || name == "slice" || name == "groupby" || name == "center" || name == "wordcount" ||
         name == "truncate";
}

absl::StatusOr<Value> ApplyRareFilter(const std::string& name, const Value& v, CallArgs& args) {
  if (name == "batch") return Batch(v, args);
  if (name == "slice") return Slice(v, args);
  if (name == "groupby") return GroupBy(v, args);
  if (name == "center") return Center(v, args);
  if (name == "wordcount") return WordCount(v);
  return Truncate(v, args);
}

}  // namespace zerofit::text
