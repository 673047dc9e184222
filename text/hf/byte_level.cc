#include "text/hf/byte_level.h"

#include "text/unicode.h"

namespace zerofit::text {

const ByteLevelAlphabet& ByteLevelAlphabet::Get() {
  static const ByteLevelAlphabet* alphabet = new ByteLevelAlphabet();
  return *alphabet;
}

ByteLevelAlphabet::ByteLevelAlphabet() {
  byte_of_.fill(-1);
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    const char32_t cp = printable ? static_cast<char32_t>(b) : next++;
    AppendUtf8(cp, &glyphs_[b]);
    byte_of_[cp] = static_cast<int16_t>(b);
  }
}

void ByteLevelAlphabet::Encode(std::string_view bytes, std::string* out) const {
  out->reserve(out->size() + bytes.size() * 2);
  for (const char c : bytes) out->append(glyphs_[static_cast<uint8_t>(c)]);
}

}  // namespace zerofit::text
