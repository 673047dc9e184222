// Lexer for the Jinja subset of chat templates, with jinja2's whitespace rules as transformers configures
// them: trim_blocks, lstrip_blocks, keep_trailing_newline=False, and the -/+ tag modifiers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace zerofit::text {

enum class TokenKind {
  kText,        // template data, whitespace control already applied
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,  // text holds the unescaped value
  kInt,
  kFloat,
  kOp,  // text holds the operator: + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : |
  kEof,
};

struct Token {
  TokenKind kind;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;  // 1-based position of the token in the template
  int column = 1;
};

// Tokenizes `source` (newlines normalized to \n, one trailing newline dropped, as jinja2 does). Errors
// are InvalidArgument "chat_template:LINE:COL: ..." naming the position.
absl::StatusOr<std::vector<Token>> LexTemplate(std::string_view source);

}  // namespace zerofit::text
