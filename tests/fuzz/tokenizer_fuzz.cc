// Fuzz target: tokenizer.json loading, then Encode/Decode. The input is JSON, optionally followed by a NUL
// byte and the text to encode (seeds: corpus/tokenizer, written by make_seeds.py).
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "text/hf/tokenizer_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using zerofit::text::TokenizerJson;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t cut = input.find('\0');
  const std::string_view json = input.substr(0, cut);
  const std::string_view text = cut == std::string_view::npos
                                    ? std::string_view("Hello w\xc3\xb6rld 123 <s> \xf0\x9f\x98\x80 ab")
                                    : input.substr(cut + 1);
  zerofit::text::TokenizerJsonLimits limits;
  limits.max_file_bytes = size_t{1} << 20;
  auto tok = TokenizerJson::FromJson(json, "fuzz.json", limits);
  if (!tok.ok()) return 0;
  for (bool special : {false, true}) {
    auto ids = (*tok)->Encode(text, special);
    if (!ids.ok()) continue;
    (void)(*tok)->Decode(*ids, /*skip_special_tokens=*/false);
    (void)(*tok)->Decode(*ids, /*skip_special_tokens=*/true);
    for (int32_t id : *ids) (void)(*tok)->IdToToken(id);
  }
  // Arbitrary ids, out-of-range and negative ones included.
  std::vector<int32_t> raw;
  for (unsigned char c : text.substr(0, 256)) raw.push_back(static_cast<int32_t>(c) * 37 - 100);
  (void)(*tok)->Decode(raw, false);
  (void)(*tok)->TokenToId(text.substr(0, 16));
  (void)(*tok)->vocab_size();
  return 0;
}
