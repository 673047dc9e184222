// Recursive-descent parser from lexer tokens to the syntax tree, following jinja2's grammar and operator
// precedence for the subset chat templates use.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "text/jinja/ast.h"

namespace zerofit::text {

// Nesting of blocks and expressions is bounded by `max_depth`. Unsupported tags (extends, include,
// import, ...) and syntax errors are InvalidArgument "chat_template:LINE:COL: ...".
absl::StatusOr<NodeList> ParseTemplate(std::string_view source, int max_depth);

}  // namespace zerofit::text
