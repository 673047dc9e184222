// jinja2's rarer built-in filters that some Hugging Face chat templates use: batch, slice, groupby, center,
// wordcount, truncate. Pure functions like the others (jinja/builtins.h); errors are InvalidArgument without
// a position. Sizes a filter would allocate from its arguments (batch's fill, slice's count, center's width)
// are bounded before allocating.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "text/jinja/value.h"

namespace zerofit::text {

// Bound on the items or bytes one of these filters makes up from an argument.
inline constexpr int64_t kMaxRareFilterSize = int64_t{1} << 20;

bool IsRareFilter(const std::string& name);
// Precondition: IsRareFilter(name).
absl::StatusOr<Value> ApplyRareFilter(const std::string& name, const Value& input, CallArgs& args);

}  // namespace zerofit::text
