#include "core/excerpt.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace zerofit::core {
namespace {

// How byte `c` is written in an excerpt.
std::string Written(unsigned char c) {
  switch (c) {
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default:
      if (c < 0x20 || c == 0x7f) return absl::StrFormat("\\x%02x", c);
      return std::string(1, static_cast<char>(c));
  }
}

// The length of the UTF-8 sequence that starts with `lead` (1 for a byte that starts none: it is kept as
// is, a cut after it splits nothing that decodes).
size_t SequenceLength(unsigned char lead) {
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  return 1;
}

// The longest prefix of `text` of at most `max_bytes` bytes that ends at a sequence boundary.
size_t Utf8Prefix(std::string_view text, size_t max_bytes) {
  size_t i = 0;
  while (i < text.size()) {
    const size_t n = std::min(SequenceLength(static_cast<unsigned char>(text[i])), text.size() - i);
    if (i + n > max_bytes) break;
    i += n;
  }
  return i;
}

}  // namespace

std::string Excerpt(std::string_view value, size_t max_bytes) {
  max_bytes = std::max<size_t>(max_bytes, 8);
  const size_t budget = max_bytes - 3;  // a cut value leaves room for "..."
  std::string out;
  size_t cut_at = 0;  // out's length after the last whole sequence that fits `budget`
  size_t i = 0;
  while (i < value.size()) {
    const size_t n = std::min(SequenceLength(static_cast<unsigned char>(value[i])), value.size() - i);
    const std::string piece =
        n == 1 ? Written(static_cast<unsigned char>(value[i])) : std::string(value.substr(i, n));
    if (out.size() + piece.size() > max_bytes) break;
    out += piece;
    i += n;
    if (out.size() <= budget) cut_at = out.size();
  }
  if (i == value.size()) return out;
  out.resize(cut_at);
  return absl::StrCat(out, "... (", value.size(), " bytes)");
}

std::string BoundedMessage(std::string_view message, size_t max_bytes) {
  if (message.size() <= max_bytes) return std::string(message);
  const size_t kept = Utf8Prefix(message, max_bytes);
  return absl::StrCat(std::string(message.substr(0, kept)), " ... (cut at ", kept, " of ", message.size(),
                      " bytes)");
}

std::string QuotedExcerpt(std::string_view value) { return "'" + Excerpt(value) + "'"; }

}  // namespace zerofit::core
