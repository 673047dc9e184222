// GPT-2's byte-to-unicode alphabet ("bytes_to_unicode"): each of the 256 bytes is shown as one printable
// code point, so byte-level BPE vocabularies are plain UTF-8 strings. Immutable and thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace zerofit::text {

class ByteLevelAlphabet {
 public:
  // The one shared, immutable instance (built on first use; construction is thread-safe).
  static const ByteLevelAlphabet& Get();

  // UTF-8 encoding of the code point that stands for `byte`.
  std::string_view Glyph(uint8_t byte) const { return glyphs_[byte]; }

  // Appends the glyphs of every byte of `bytes`.
  void Encode(std::string_view bytes, std::string* out) const;

  // The byte a glyph stands for, or -1 when the code point is not part of the alphabet.
  int ByteOf(char32_t cp) const { return cp < byte_of_.size() ? byte_of_[cp] : -1; }

 private:
  ByteLevelAlphabet();

  std::array<std::string, 256> glyphs_;
  std::array<int16_t, 324> byte_of_{};  // glyph code points are all < 324
};

}  // namespace zerofit::text
