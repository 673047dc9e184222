// UTF-8 and Unicode helpers shared by the tokenizer stages. All functions are pure and thread-safe; text is
// UTF-8 in std::string / std::string_view (bytes, not code points, unless a name says otherwise).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace zerofit::text {

// Decodes the code point at text[*pos] and advances *pos past it. Invalid or truncated sequences yield
// U+FFFD and advance by one byte, so a loop over any byte string terminates. Precondition: *pos < size.
char32_t DecodeUtf8(std::string_view text, size_t* pos);

// Byte length of the UTF-8 sequence that starts with `lead` (1 for invalid lead bytes).
inline size_t Utf8Length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  if ((lead >> 3) == 0x1E) return 4;
  return 1;
}

void AppendUtf8(char32_t cp, std::string* out);

// Rust's `String::from_utf8_lossy`: every maximal invalid subpart becomes one U+FFFD.
std::string Utf8Lossy(std::string_view bytes);

bool IsValidUtf8(std::string_view bytes);

// Rust's `char::is_numeric`: general category Nd, Nl or No.
bool IsNumeric(char32_t cp);

// Rust's `char::is_whitespace`: the Unicode White_Space property.
bool IsWhitespace(char32_t cp);

// Rust's `char::is_alphanumeric`: Alphabetic or numeric.
bool IsAlphanumeric(char32_t cp);

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };

// Unicode normalization (ICU). Fails only on ICU errors; invalid UTF-8 is replaced with U+FFFD by ICU.
absl::StatusOr<std::string> NormalizeUnicode(NormalForm form, std::string_view text);

}  // namespace zerofit::text
