// Debian 12's abseil is built without its std::string_view alias, so absl::string_view and
// std::string_view are distinct types: convert explicitly where the two APIs meet (StrCat, hash lookups,
// Status messages).
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace zerofit::text {

inline absl::string_view AsAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }
inline std::string_view AsStd(absl::string_view s) { return std::string_view(s.data(), s.size()); }

}  // namespace zerofit::text
