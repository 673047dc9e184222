#include "core/json_depth.h"

#include <cstddef>

#include "absl/strings/str_cat.h"

namespace zerofit::core {

absl::Status CheckJsonDepth(std::string_view text, int max_depth, const std::string& source) {
  int depth = 0;
  size_t line = 1;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string (a raw newline there is invalid JSON anyway)
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ":", line, ": JSON nested deeper than ", max_depth, " levels"));
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return absl::OkStatus();
}

}  // namespace zerofit::core
