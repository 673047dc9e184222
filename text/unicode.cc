#include "text/unicode.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace zerofit::text {
namespace {

bool IsContinuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// Length of the valid UTF-8 sequence at text[pos], or 0 with *invalid_len set to the length of the maximal
// invalid subpart (Unicode "substitution of maximal subparts", as Rust and ICU do).
size_t ValidSequenceLength(std::string_view text, size_t pos, size_t* invalid_len) {
  const auto b0 = static_cast<unsigned char>(text[pos]);
  *invalid_len = 1;
  if (b0 < 0x80) return 1;
  size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k <= need; ++k) {
    if (pos + k >= text.size()) return 0;
    const auto b = static_cast<unsigned char>(text[pos + k]);
    const bool ok = k == 1 ? (b >= lo && b <= hi) : IsContinuation(b);
    if (!ok) return 0;
    *invalid_len = k + 1;
  }
  return need + 1;
}

const icu::Normalizer2* NormalizerFor(NormalForm form, UErrorCode* status) {
  switch (form) {
    case NormalForm::kNfc:
      return icu::Normalizer2::getNFCInstance(*status);
    case NormalForm::kNfd:
      return icu::Normalizer2::getNFDInstance(*status);
    case NormalForm::kNfkc:
      return icu::Normalizer2::getNFKCInstance(*status);
    case NormalForm::kNfkd:
      return icu::Normalizer2::getNFKDInstance(*status);
  }
  return nullptr;
}

}  // namespace

char32_t DecodeUtf8(std::string_view text, size_t* pos) {
  size_t invalid = 0;
  const size_t n = ValidSequenceLength(text, *pos, &invalid);
  if (n == 0) {
    *pos += 1;
    return 0xFFFD;
  }
  const auto* p = reinterpret_cast<const unsigned char*>(text.data() + *pos);
  *pos += n;
  switch (n) {
    case 1:
      return p[0];
    case 2:
      return ((p[0] & 0x1F) << 6) | (p[1] & 0x3F);
    case 3:
      return ((p[0] & 0x0F) << 12) | ((p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    default:
      return ((p[0] & 0x07) << 18) | ((p[1] & 0x3F) << 12) | ((p[2] & 0x3F) << 6) | (p[3] & 0x3F);
  }
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string Utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    size_t invalid = 0;
    const size_t n = ValidSequenceLength(bytes, pos, &invalid);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      pos += invalid;
    } else {
      out.append(bytes.data() + pos, n);
      pos += n;
    }
  }
  return out;
}

bool IsValidUtf8(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    size_t invalid = 0;
    const size_t n = ValidSequenceLength(bytes, pos, &invalid);
    if (n == 0) return false;
    pos += n;
  }
  return true;
}

bool IsNumeric(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  const int8_t type = u_charType(static_cast<UChar32>(cp));
  return type == U_DECIMAL_DIGIT_NUMBER || type == U_LETTER_NUMBER || type == U_OTHER_NUMBER;
}

bool IsWhitespace(char32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
  return u_hasBinaryProperty(static_cast<UChar32>(cp), UCHAR_WHITE_SPACE);
}

bool IsAlphanumeric(char32_t cp) {
  return IsNumeric(cp) || u_hasBinaryProperty(static_cast<UChar32>(cp), UCHAR_ALPHABETIC);
}

absl::StatusOr<std::string> NormalizeUnicode(NormalForm form, std::string_view text) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = NormalizerFor(form, &status);
  if (U_FAILURE(status) || normalizer == nullptr) {
    return absl::InternalError(absl::StrCat("ICU normalizer unavailable: ", u_errorName(status)));
  }
  const icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  // Fast path: most text is already normalized (ASCII always is for NFC/NFD).
  if (normalizer->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return std::string(text);
  status = U_ZERO_ERROR;
  std::string out;
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
  normalizer->normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status)) {
    return absl::InternalError(absl::StrCat("ICU normalizeUTF8 failed: ", u_errorName(status)));
  }
  return out;
}

}  // namespace zerofit::text
