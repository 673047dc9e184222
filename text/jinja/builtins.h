// jinja2's built-in filters and tests, and the Python str/dict methods templates call. Pure functions of
// their arguments: errors are InvalidArgument without a position (the interpreter adds it).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "text/jinja/value.h"

namespace zerofit::text {

// Bounds on what a built-in makes before the interpreter can check it against RenderLimits: a string a
// filter or method builds (join, replace), and a string iterated code point by code point (each becomes a
// Value of ~100 bytes). Real templates stay far below both.
inline constexpr size_t kMaxBuiltinStringBytes = size_t{1} << 24;
inline constexpr size_t kMaxIteratedCodePoints = size_t{1} << 18;

// The size PyReplace(s, from, to, count) would have, checked against kMaxBuiltinStringBytes.
absl::Status CheckReplaceSize(std::string_view s, std::string_view from, std::string_view to, int64_t count);

// Argument `index` if given positionally, else the keyword argument `keyword`, else null.
const Value* FindArg(const CallArgs& args, size_t index, const char* keyword);

// Whether a filter / test of that name exists: jinja2 rejects unknown names when it compiles a template.
bool IsKnownFilter(const std::string& name);
bool IsKnownTest(const std::string& name);
// `input | name(args)`. NotFound-like InvalidArgument "No filter named 'x'." for unknown names.
absl::StatusOr<Value> ApplyFilter(const std::string& name, const Value& input, CallArgs& args);
// `input is name(args)`.
absl::StatusOr<bool> ApplyTest(const std::string& name, const Value& input, CallArgs& args);
// `obj.name` as a bound method (str: strip, split, startswith, ...; dict: items, keys, values, get);
// nullopt when `obj` has no such method.
std::optional<Value> BoundMethod(const Value& obj, const std::string& name);
// jinja2's attribute lookup `obj.name`: a method, else a dict entry, else undefined with jinja2's message.
// Fails only for an undefined `obj` (jinja2 raises there).
absl::StatusOr<Value> GetAttribute(const Value& obj, const std::string& name);
// jinja2's attribute argument of map/sort/groupby/...: `item` itself when null, item[i] for an int, else a
// dotted path of attribute lookups ("a.b").
absl::StatusOr<Value> AttributePath(const Value& item, const Value* attribute);
// Python iteration: list items, dict keys, string code points; undefined iterates as empty.
absl::StatusOr<std::vector<Value>> IterateValue(const Value& v);
// Python `item in container` (substring for strings, key for dicts; undefined contains nothing).
absl::StatusOr<bool> ValueContains(const Value& container, const Value& item);
// The error jinja2 raises when an undefined value is used further (its message).
absl::Status UndefinedError(const Value& v);
// Python `fmt % args` for str (%s %r %d %i %f %x %%, with flags, width and precision).
absl::StatusOr<std::string> PercentFormat(const std::string& fmt, const Value& args);
// Python str.format with {} / {0} / {name} fields.
absl::StatusOr<std::string> BraceFormat(const std::string& fmt, const CallArgs& args);

}  // namespace zerofit::text
