#include "text/hf/normalizer.h"

#include <unicode/uchar.h>

#include <utility>
#include <vector>

#include "absl/strings/str_replace.h"
#include "text/regex.h"
#include "text/string_view_compat.h"
#include "text/unicode.h"

namespace zerofit::text {
namespace {

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  absl::Status Normalize(std::string* text) const override {
    for (const auto& part : parts_) {
      if (absl::Status s = part->Normalize(text); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

class UnicodeNormalizer : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalForm form) : form_(form) {}
  absl::Status Normalize(std::string* text) const override {
    absl::StatusOr<std::string> out = NormalizeUnicode(form_, *text);
    if (!out.ok()) return out.status();
    *text = *std::move(out);
    return absl::OkStatus();
  }

 private:
  NormalForm form_;
};

// HF Prepend: prepends only to non-empty text.
class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  absl::Status Normalize(std::string* text) const override {
    if (!text->empty()) text->insert(0, prefix_);
    return absl::OkStatus();
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(std::string literal, std::unique_ptr<Regex> regex, std::string content)
      : literal_(std::move(literal)), regex_(std::move(regex)), content_(std::move(content)) {}
  absl::Status Normalize(std::string* text) const override {
    if (regex_ == nullptr) {
      if (!literal_.empty()) *text = absl::StrReplaceAll(*text, {{literal_, content_}});
      return absl::OkStatus();
    }
    std::vector<std::pair<size_t, size_t>> spans;
    if (absl::Status s = regex_->FindAll(*text, &spans); !s.ok()) return s;
    std::string out;
    size_t prev = 0;
    for (const auto& [b, e] : spans) {
      out.append(*text, prev, b - prev);
      out += content_;
      prev = e;
    }
    out.append(*text, prev, std::string::npos);
    *text = std::move(out);
    return absl::OkStatus();
  }

 private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;  // null: literal replacement
  std::string content_;
};

class LowercaseNormalizer : public Normalizer {
 public:
  absl::Status Normalize(std::string* text) const override {
    // Per code point like Rust's char::to_lowercase (no context-dependent final sigma).
    std::string out;
    out.reserve(text->size());
    for (size_t pos = 0; pos < text->size();) {
      const char32_t cp = DecodeUtf8(*text, &pos);
      if (cp == 0x130) {
        out += "i\xCC\x87";  // U+0130 lowercases to i + U+0307
      } else {
        AppendUtf8(static_cast<char32_t>(u_tolower(static_cast<UChar32>(cp))), &out);
      }
    }
    *text = std::move(out);
    return absl::OkStatus();
  }
};

class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  absl::Status Normalize(std::string* text) const override {
    size_t begin = 0, end = text->size();
    if (left_) {
      while (begin < end) {
        size_t pos = begin;
        if (!IsWhitespace(DecodeUtf8(*text, &pos))) break;
        begin = pos;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin && ((*text)[start] & 0xC0) == 0x80) --start;
        size_t pos = start;
        if (!IsWhitespace(DecodeUtf8(*text, &pos))) break;
        end = start;
      }
    }
    *text = text->substr(begin, end - begin);
    return absl::OkStatus();
  }

 private:
  bool left_, right_;
};

absl::StatusOr<std::unique_ptr<Normalizer>> SequenceFromJson(const JsonView& json) {
  const JsonView list = json["normalizers"];
  if (absl::Status s = list.ExpectArray(); !s.ok()) return s;
  std::vector<std::unique_ptr<Normalizer>> parts;
  for (size_t i = 0; i < list.value().size(); ++i) {
    absl::StatusOr<std::unique_ptr<Normalizer>> part = NormalizerFromJson(list.at(i));
    if (!part.ok()) return part.status();
    parts.push_back(*std::move(part));
  }
  return std::make_unique<SequenceNormalizer>(std::move(parts));
}

absl::StatusOr<std::unique_ptr<Normalizer>> ReplaceFromJson(const JsonView& json) {
  absl::StatusOr<std::string> content = json.String("content");
  if (!content.ok()) return content.status();
  const JsonView pattern = json["pattern"];
  if (pattern.Has("String")) {
    absl::StatusOr<std::string> literal = pattern.String("String");
    if (!literal.ok()) return literal.status();
    return std::make_unique<ReplaceNormalizer>(*std::move(literal), nullptr, *std::move(content));
  }
  absl::StatusOr<std::string> source = pattern.String("Regex");
  if (!source.ok()) return source.status();
  absl::StatusOr<std::unique_ptr<Regex>> regex = Regex::Compile(*source);
  if (!regex.ok()) return pattern.ErrorAt("Regex", AsStd(regex.status().message()));
  return std::make_unique<ReplaceNormalizer>("", *std::move(regex), *std::move(content));
}

absl::StatusOr<std::unique_ptr<Normalizer>> StripFromJson(const JsonView& json) {
  absl::StatusOr<bool> left = json.BoolOr("strip_left", true);
  if (!left.ok()) return left.status();
  absl::StatusOr<bool> right = json.BoolOr("strip_right", true);
  if (!right.ok()) return right.status();
  return std::make_unique<StripNormalizer>(*left, *right);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Normalizer>> NormalizerFromJson(const JsonView& json) {
  if (absl::Status s = json.ExpectObject(); !s.ok()) return s;
  absl::StatusOr<std::string> type = json.Type();
  if (!type.ok()) return type.status();
  if (*type == "Sequence") return SequenceFromJson(json);
  if (*type == "NFC") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfc);
  if (*type == "NFD") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfd);
  if (*type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfkc);
  if (*type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfkd);
  if (*type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (*type == "Strip") return StripFromJson(json);
  if (*type == "Replace") return ReplaceFromJson(json);
  if (*type == "Prepend") {
    absl::StatusOr<std::string> prefix = json.String("prepend");
    if (!prefix.ok()) return prefix.status();
    return std::make_unique<PrependNormalizer>(*std::move(prefix));
  }
  return json.Unsupported("type", *type);
}

}  // namespace zerofit::text
