#include "text/hf/decoder.h"

#include <utility>

#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "text/hf/byte_level.h"
#include "text/unicode.h"

namespace zerofit::text {
namespace {

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (const auto& part : parts_) part->DecodeChain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

// Maps glyphs back to bytes and joins everything into one lossily decoded string. A token with any code
// point outside the alphabet is taken as raw UTF-8 (HF does this for added tokens such as CJK ones).
class ByteLevelDecoder : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>* tokens) const override {
    const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::Get();
    std::string bytes, token_bytes;
    for (const std::string& token : *tokens) {
      token_bytes.clear();
      bool all_mapped = true;
      for (size_t pos = 0; pos < token.size() && all_mapped;) {
        const int b = alphabet.ByteOf(DecodeUtf8(token, &pos));
        all_mapped = b >= 0;
        if (all_mapped) token_bytes.push_back(static_cast<char>(b));
      }
      bytes += all_mapped ? token_bytes : token;
    }
    *tokens = {Utf8Lossy(bytes)};
  }
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(std::string pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    if (pattern_.empty()) return;
    for (std::string& token : *tokens) token = absl::StrReplaceAll(token, {{pattern_, content_}});
  }

 private:
  std::string pattern_;
  std::string content_;
};

// Runs of "<0xNN>" tokens become the bytes they name: one string when valid UTF-8, else one U+FFFD per byte.
class ByteFallbackDecoder : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens->size());
    std::string pending;
    size_t pending_count = 0;
    auto flush = [&] {
      if (pending_count == 0) return;
      if (IsValidUtf8(pending)) {
        out.push_back(pending);
      } else {
        for (size_t i = 0; i < pending_count; ++i) out.emplace_back("\xEF\xBF\xBD");
      }
      pending.clear();
      pending_count = 0;
    };
    for (std::string& token : *tokens) {
      const int byte = ParseByteToken(token);
      if (byte >= 0) {
        pending.push_back(static_cast<char>(byte));
        ++pending_count;
        continue;
      }
      flush();
      out.push_back(std::move(token));
    }
    flush();
    *tokens = std::move(out);
  }

 private:
  static int HexDigit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  static int ParseByteToken(const std::string& t) {
    if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
    const int hi = HexDigit(t[3]), lo = HexDigit(t[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
  }
};

class FuseDecoder : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>* tokens) const override {
    *tokens = {absl::StrJoin(*tokens, "")};
  }
};

// Removes up to `start` leading and `stop` trailing copies of the code point `content` from each token.
class StripDecoder : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (std::string& token : *tokens) {
      std::vector<std::pair<size_t, char32_t>> chars;  // (byte offset, code point)
      for (size_t pos = 0; pos < token.size();) {
        const size_t begin = pos;
        chars.emplace_back(begin, DecodeUtf8(token, &pos));
      }
      size_t first = 0, last = chars.size();
      while (first < chars.size() && first < start_ && chars[first].second == content_) ++first;
      while (last > first && chars.size() - last < stop_ && chars[last - 1].second == content_) --last;
      const size_t begin = first < chars.size() ? chars[first].first : token.size();
      const size_t end = last < chars.size() ? chars[last].first : token.size();
      token = token.substr(begin, end - begin);
    }
  }

 private:
  char32_t content_;
  size_t start_, stop_;
};

// HF Metaspace decoder: the replacement becomes a space, except in the first token, where every
// replacement is dropped (unless prepend_scheme is "never").
class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first)
      : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (size_t i = 0; i < tokens->size(); ++i) {
      const bool drop = i == 0 && strip_first_;
      (*tokens)[i] = absl::StrReplaceAll((*tokens)[i], {{replacement_, drop ? "" : " "}});
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

absl::StatusOr<std::unique_ptr<Decoder>> SequenceFromJson(const JsonView& json) {
  const JsonView list = json["decoders"];
  if (absl::Status s = list.ExpectArray(); !s.ok()) return s;
  std::vector<std::unique_ptr<Decoder>> parts;
  for (size_t i = 0; i < list.value().size(); ++i) {
    absl::StatusOr<std::unique_ptr<Decoder>> part = DecoderFromJson(list.at(i));
    if (!part.ok()) return part.status();
    parts.push_back(*std::move(part));
  }
  return std::make_unique<SequenceDecoder>(std::move(parts));
}

absl::StatusOr<std::unique_ptr<Decoder>> ReplaceFromJson(const JsonView& json) {
  const JsonView pattern = json["pattern"];
  if (!pattern.Has("String")) return pattern.Error("unsupported pattern (only String)");
  absl::StatusOr<std::string> literal = pattern.String("String");
  if (!literal.ok()) return literal.status();
  absl::StatusOr<std::string> content = json.String("content");
  if (!content.ok()) return content.status();
  return std::make_unique<ReplaceDecoder>(*std::move(literal), *std::move(content));
}

absl::StatusOr<std::unique_ptr<Decoder>> StripFromJson(const JsonView& json) {
  absl::StatusOr<std::string> content = json.String("content");
  if (!content.ok()) return content.status();
  size_t pos = 0;
  const char32_t cp = content->empty() ? 0 : DecodeUtf8(*content, &pos);
  if (content->empty() || pos != content->size()) return json.ErrorAt("content", "expected one character");
  absl::StatusOr<int64_t> start = json.IntOr("start", 0, 0, 1 << 20);
  if (!start.ok()) return start.status();
  absl::StatusOr<int64_t> stop = json.IntOr("stop", 0, 0, 1 << 20);
  if (!stop.ok()) return stop.status();
  return std::make_unique<StripDecoder>(cp, static_cast<size_t>(*start), static_cast<size_t>(*stop));
}

absl::StatusOr<std::unique_ptr<Decoder>> MetaspaceFromJson(const JsonView& json) {
  absl::StatusOr<std::string> replacement = json.String("replacement");
  if (!replacement.ok()) return replacement.status();
  bool strip_first = true;
  if (json.Has("prepend_scheme")) {
    absl::StatusOr<std::string> scheme = json.String("prepend_scheme");
    if (!scheme.ok()) return scheme.status();
    if (*scheme != "always" && *scheme != "first" && *scheme != "never") {
      return json.Unsupported("prepend_scheme", *scheme);
    }
    strip_first = *scheme != "never";
  } else {
    absl::StatusOr<bool> add = json.BoolOr("add_prefix_space", true);
    if (!add.ok()) return add.status();
    strip_first = *add;
  }
  return std::make_unique<MetaspaceDecoder>(*std::move(replacement), strip_first);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Decoder>> DecoderFromJson(const JsonView& json) {
  if (absl::Status s = json.ExpectObject(); !s.ok()) return s;
  absl::StatusOr<std::string> type = json.Type();
  if (!type.ok()) return type.status();
  if (*type == "Sequence") return SequenceFromJson(json);
  if (*type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (*type == "Replace") return ReplaceFromJson(json);
  if (*type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (*type == "Fuse") return std::make_unique<FuseDecoder>();
  if (*type == "Strip") return StripFromJson(json);
  if (*type == "Metaspace") return MetaspaceFromJson(json);
  return json.Unsupported("type", *type);
}

}  // namespace zerofit::text
