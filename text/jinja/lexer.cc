#include "text/jinja/lexer.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <optional>

#include "absl/strings/str_cat.h"
#include "text/jinja/strings.h"

namespace zerofit::text {
namespace {

constexpr const char* kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|"};

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// Newlines to \n; drops one trailing newline (keep_trailing_newline=False).
std::string Normalize(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  absl::StatusOr<std::vector<Token>> Run() {
    size_t pos = 0;
    while (pos < src_.size()) {
      size_t tag = FindTag(pos);
      char kind = tag < src_.size() ? src_[tag + 1] : 0;
      char mod =
          (tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+')) ? src_[tag + 2] : 0;
      std::string text = src_.substr(pos, std::min(tag, src_.size()) - pos);
      if (kind != 0) StripBefore(&text, pos, kind, mod);
      if (!text.empty()) Push(TokenKind::kText, std::move(text), pos);
      if (kind == 0) break;
      absl::StatusOr<size_t> next = kind == '#' ? LexComment(tag, mod) : LexTag(tag, kind, mod);
      if (!next.ok()) return next.status();
      pos = *next;
    }
    Push(TokenKind::kEof, "", src_.size());
    return std::move(tokens_);
  }

 private:
  size_t FindTag(size_t pos) const {
    while (true) {
      size_t hit = src_.find('{', pos);
      if (hit == std::string::npos || hit + 1 >= src_.size()) return std::string::npos;
      char c = src_[hit + 1];
      if (c == '{' || c == '%' || c == '#') return hit;
      pos = hit + 1;
    }
  }

  // `{%-` strips all whitespace before the tag; lstrip_blocks strips spaces and tabs between a line start
  // and a block or comment tag unless the tag says `+`.
  void StripBefore(std::string* text, size_t text_start, char kind, char mod) const {
    if (mod == '-') {
      size_t e = text->size();
      while (e > 0 && IsSpace((*text)[e - 1])) --e;
      text->resize(e);
      return;
    }
    if (mod == '+' || kind == '{') return;
    size_t line_start = text->rfind('\n');
    line_start = line_start == std::string::npos ? 0 : line_start + 1;
    bool at_line_start = line_start > 0 || text_start == 0 || src_[text_start - 1] == '\n';
    if (!at_line_start) return;
    for (size_t i = line_start; i < text->size(); ++i) {
      if (!IsSpace((*text)[i])) return;
    }
    text->resize(line_start);
  }

  // After a tag: `-` strips all following whitespace; a block or comment tag without `+` drops one newline.
  size_t SkipAfter(size_t pos, char end_mod, bool trim_newline) const {
    if (end_mod == '-') {
      while (pos < src_.size() && IsSpace(src_[pos])) ++pos;
    } else if (end_mod != '+' && trim_newline && pos < src_.size() && src_[pos] == '\n') {
      ++pos;
    }
    return pos;
  }

  absl::StatusOr<size_t> LexComment(size_t tag, char mod) {
    size_t body = tag + 2 + (mod ? 1 : 0);
    size_t end = src_.find("#}", body);
    if (end == std::string::npos) return Error(tag, "missing end of comment tag");
    char end_mod = end > body && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : 0;
    return SkipAfter(end + 2, end_mod, true);
  }

  absl::StatusOr<size_t> LexTag(size_t tag, char kind, char mod) {
    size_t pos = tag + 2 + (mod ? 1 : 0);
    if (kind == '%') {
      size_t raw_end = 0;
      if (auto raw = LexRaw(pos, &raw_end)) {
        if (!*raw) return Error(tag, "missing endraw tag");
        return raw_end;
      }
    }
    Push(kind == '{' ? TokenKind::kVarBegin : TokenKind::kBlockBegin, "", tag);
    const char close = kind == '{' ? '}' : '%';
    int depth = 0;
    while (true) {
      while (pos < src_.size() && IsSpace(src_[pos])) ++pos;
      if (pos >= src_.size()) return Error(tag, "unexpected end of template: tag is not closed");
      char end_mod = (src_[pos] == '-' || src_[pos] == '+') ? src_[pos] : 0;
      size_t close_at = pos + (end_mod ? 1 : 0);
      if (depth == 0 && close_at + 1 < src_.size() && src_[close_at] == close && src_[close_at + 1] == '}' &&
          (end_mod != '+' || kind == '%')) {
        Push(kind == '{' ? TokenKind::kVarEnd : TokenKind::kBlockEnd, "", pos);
        return SkipAfter(close_at + 2, end_mod, kind == '%');
      }
      absl::StatusOr<size_t> next = LexExprToken(pos, &depth);
      if (!next.ok()) return next.status();
      pos = *next;
    }
  }

  // {% raw %}...{% endraw %}: returns nullopt when the tag is not `raw`, else whether endraw was found.
  std::optional<bool> LexRaw(size_t pos, size_t* end_out) {
    size_t p = pos;
    while (p < src_.size() && IsSpace(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0) return std::nullopt;
    p += 3;
    while (p < src_.size() && IsSpace(src_[p])) ++p;
    char open_mod = src_[p] == '-' ? '-' : 0;
    if (src_.compare(p + (open_mod ? 1 : 0), 2, "%}") != 0) return std::nullopt;
    size_t body = SkipAfter(p + (open_mod ? 3 : 2), open_mod, true);
    size_t search = body;
    while (true) {
      size_t end_tag = src_.find("{%", search);
      if (end_tag == std::string::npos) return false;
      size_t q = end_tag + 2;
      char close_mod = (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) ? src_[q++] : 0;
      while (q < src_.size() && IsSpace(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") != 0) {
        search = end_tag + 2;
        continue;
      }
      q += 6;
      while (q < src_.size() && IsSpace(src_[q])) ++q;
      char end_mod = (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) ? src_[q++] : 0;
      if (src_.compare(q, 2, "%}") != 0) return false;
      std::string text = src_.substr(body, end_tag - body);
      if (close_mod == '-') {
        while (!text.empty() && IsSpace(text.back())) text.pop_back();
      }
      if (!text.empty()) Push(TokenKind::kText, std::move(text), body);
      *end_out = SkipAfter(q + 2, end_mod, true);
      return true;
    }
  }

  absl::StatusOr<size_t> LexExprToken(size_t pos, int* depth) {
    char c = src_[pos];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t e = pos;
      while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
      Push(TokenKind::kName, src_.substr(pos, e - pos), pos);
      return e;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return LexNumber(pos);
    if (c == '\'' || c == '"') return LexString(pos);
    for (const char* op : kOps) {
      size_t len = std::char_traits<char>::length(op);
      if (src_.compare(pos, len, op) != 0) continue;
      if (len == 1 && (c == '(' || c == '[' || c == '{')) ++*depth;
      if (len == 1 && (c == ')' || c == ']' || c == '}')) *depth = std::max(0, *depth - 1);
      Push(TokenKind::kOp, op, pos);
      return pos + len;
    }
    return Error(pos, absl::StrCat("unexpected char '", std::string(1, c), "'"));
  }

  absl::StatusOr<size_t> LexNumber(size_t pos) {
    size_t e = pos;
    auto digits = [&] {
      while (e < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
    };
    digits();
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      is_float = true;
      ++e;
      digits();
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t x = e + 1;
      if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
      if (x < src_.size() && std::isdigit(static_cast<unsigned char>(src_[x]))) {
        is_float = true;
        e = x;
        digits();
      }
    }
    std::string text = src_.substr(pos, e - pos);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    Token t{is_float ? TokenKind::kFloat : TokenKind::kInt, text};
    if (is_float) {
      t.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      errno = 0;
      t.int_value = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) return Error(pos, "integer literal out of range");
    }
    SetPos(&t, pos);
    tokens_.push_back(std::move(t));
    return e;
  }

  absl::StatusOr<size_t> LexString(size_t pos) {
    char quote = src_[pos];
    std::string value;
    size_t i = pos + 1;
    while (i < src_.size() && src_[i] != quote) {
      if (src_[i] != '\\' || i + 1 >= src_.size()) {
        value.push_back(src_[i++]);
        continue;
      }
      char e = src_[i + 1];
      i += 2;
      switch (e) {
        case 'n':
          value.push_back('\n');
          break;
        case 't':
          value.push_back('\t');
          break;
        case 'r':
          value.push_back('\r');
          break;
        case '0':
          value.push_back('\0');
          break;
        case 'a':
          value.push_back('\a');
          break;
        case 'b':
          value.push_back('\b');
          break;
        case 'f':
          value.push_back('\f');
          break;
        case 'v':
          value.push_back('\v');
          break;
        case '\\':
        case '\'':
        case '"':
          value.push_back(e);
          break;
        case '\n':
          break;
        case 'x':
        case 'u':
        case 'U': {
          size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (i + n > src_.size()) return Error(i, "truncated escape in string literal");
          char32_t cp = static_cast<char32_t>(std::strtoul(src_.substr(i, n).c_str(), nullptr, 16));
          AppendUtf8(&value, cp);
          i += n;
          break;
        }
        default:  // Python keeps unknown escapes as they are
          value.push_back('\\');
          value.push_back(e);
      }
    }
    if (i >= src_.size()) return Error(pos, "unterminated string literal");
    Push(TokenKind::kString, std::move(value), pos);
    return i + 1;
  }

  void SetPos(Token* t, size_t pos) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos) - 1;
    t->line = 1 + static_cast<int>(it - line_starts_.begin());
    t->column = 1 + static_cast<int>(pos - *it);
  }

  void Push(TokenKind kind, std::string text, size_t pos) {
    Token t{kind, std::move(text)};
    SetPos(&t, pos);
    tokens_.push_back(std::move(t));
  }

  absl::Status Error(size_t pos, absl::string_view message) const {
    Token t{TokenKind::kEof, ""};
    SetPos(&t, std::min(pos, src_.size()));
    return absl::InvalidArgumentError(absl::StrCat("chat_template:", t.line, ":", t.column, ": ", message));
  }

  std::string src_;
  std::vector<size_t> line_starts_;  // offsets where lines begin, for token positions
  std::vector<Token> tokens_;
};

}  // namespace

absl::StatusOr<std::vector<Token>> LexTemplate(std::string_view source) {
  return Lexer(Normalize(source)).Run();
}

}  // namespace zerofit::text
