#include "text/hf/pre_tokenizer.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "text/hf/byte_level.h"
#include "text/hf/split_behavior.h"
#include "text/regex.h"
#include "text/string_view_compat.h"
#include "text/unicode.h"

namespace zerofit::text {
namespace {

// GPT-2's pattern, used by ByteLevel when use_regex is true.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Applies `split(text, &out)` to every piece; a sub-piece is at the input start when its piece is and it
// begins at the piece's first byte.
template <typename SplitFn>
absl::Status SplitEach(std::vector<PreToken>* pieces, SplitFn split) {
  std::vector<PreToken> result;
  result.reserve(pieces->size());
  std::vector<SplitPiece> parts;
  for (PreToken& piece : *pieces) {
    parts.clear();
    if (absl::Status s = split(piece.text, &parts); !s.ok()) return s;
    for (size_t i = 0; i < parts.size(); ++i) {  // HF: offsets_original().0 == 0
      result.push_back({std::move(parts[i].text), piece.at_input_start && parts[i].begin == 0});
    }
  }
  *pieces = std::move(result);
  return absl::OkStatus();
}

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts)
      : parts_(std::move(parts)) {}
  absl::Status PreTokenize(std::vector<PreToken>* pieces) const override {
    for (const auto& part : parts_) {
      if (absl::Status s = part->PreTokenize(pieces); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

// Split with a regex or a literal string pattern.
class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(std::unique_ptr<Regex> regex, std::string literal, SplitBehavior behavior, bool invert)
      : regex_(std::move(regex)), literal_(std::move(literal)), behavior_(behavior), invert_(invert) {}

  absl::Status PreTokenize(std::vector<PreToken>* pieces) const override {
    std::optional<Regex::Scratch> scratch;
    if (regex_ != nullptr) scratch.emplace(*regex_);
    std::vector<std::pair<size_t, size_t>> matches;
    return SplitEach(pieces, [&](const std::string& text, std::vector<SplitPiece>* out) {
      matches.clear();
      return Split(text, scratch ? &*scratch : nullptr, &matches, out);
    });
  }

 private:
  absl::Status Split(std::string_view text, Regex::Scratch* scratch,
                     std::vector<std::pair<size_t, size_t>>* matches, std::vector<SplitPiece>* out) const {
    if (regex_ != nullptr) {
      if (absl::Status s = regex_->FindAll(text, *scratch, matches); !s.ok()) return s;
    } else {
      FindLiteral(text, matches);
    }
    std::vector<MatchSpan> spans = CoverWithGaps(*matches, text.size());
    if (invert_) {
      for (MatchSpan& s : spans) s.is_match = !s.is_match;
    }
    SplitBySpans(text, spans, behavior_, out);
    return absl::OkStatus();
  }

  void FindLiteral(std::string_view text, std::vector<std::pair<size_t, size_t>>* matches) const {
    if (literal_.empty()) return;
    for (size_t pos = text.find(literal_); pos != std::string_view::npos;
         pos = text.find(literal_, pos + literal_.size())) {
      matches->emplace_back(pos, pos + literal_.size());
    }
  }

  std::unique_ptr<Regex> regex_;  // null: literal pattern
  std::string literal_;
  SplitBehavior behavior_;
  bool invert_;
};

// Splits out numeric characters (Rust char::is_numeric), one per piece or as contiguous runs.
class DigitsPreTokenizer : public PreTokenizer {
 public:
  explicit DigitsPreTokenizer(bool individual) : individual_(individual) {}
  absl::Status PreTokenize(std::vector<PreToken>* pieces) const override {
    return SplitEach(pieces, [this](const std::string& text, std::vector<SplitPiece>* out) {
      std::vector<std::pair<size_t, size_t>> matches;
      for (size_t pos = 0; pos < text.size();) {
        const size_t begin = pos;
        if (IsNumeric(DecodeUtf8(text, &pos))) matches.emplace_back(begin, pos);
      }
      SplitBySpans(text, CoverWithGaps(matches, text.size()),
                   individual_ ? SplitBehavior::kIsolated : SplitBehavior::kContiguous, out);
      return absl::OkStatus();
    });
  }

 private:
  bool individual_;
};

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::unique_ptr<SplitPreTokenizer> regex_split)
      : add_prefix_space_(add_prefix_space), regex_split_(std::move(regex_split)) {}

  absl::Status PreTokenize(std::vector<PreToken>* pieces) const override {
    if (add_prefix_space_) {
      for (PreToken& piece : *pieces) {
        if (piece.text.empty() || piece.text[0] != ' ') piece.text.insert(0, " ");
      }
    }
    if (regex_split_ != nullptr) {
      if (absl::Status s = regex_split_->PreTokenize(pieces); !s.ok()) return s;
    }
    const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::Get();
    for (PreToken& piece : *pieces) {
      std::string mapped;
      alphabet.Encode(piece.text, &mapped);
      piece.text = std::move(mapped);
    }
    return absl::OkStatus();
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<SplitPreTokenizer> regex_split_;  // null when use_regex is false
};

enum class PrependScheme { kAlways, kFirst, kNever };

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}

  absl::Status PreTokenize(std::vector<PreToken>* pieces) const override {
    for (PreToken& piece : *pieces) {
      piece.text = absl::StrReplaceAll(piece.text, {{" ", replacement_}});
      const bool starts = piece.text.compare(0, replacement_.size(), replacement_) == 0;
      const bool prepend =
          scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && piece.at_input_start);
      if (prepend && !starts) piece.text.insert(0, replacement_);
    }
    if (!split_) return absl::OkStatus();
    return SplitEach(pieces, [this](const std::string& text, std::vector<SplitPiece>* out) {
      std::vector<std::pair<size_t, size_t>> matches;
      for (size_t pos = text.find(replacement_); pos != std::string::npos;
           pos = text.find(replacement_, pos + replacement_.size())) {
        matches.emplace_back(pos, pos + replacement_.size());
      }
      SplitBySpans(text, CoverWithGaps(matches, text.size()), SplitBehavior::kMergedWithNext, out);
      return absl::OkStatus();
    });
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
};

// WhitespaceSplit: runs of non-whitespace (Rust char::is_whitespace).
class WhitespaceSplitPreTokenizer : public PreTokenizer {
 public:
  absl::Status PreTokenize(std::vector<PreToken>* pieces) const override {
    return SplitEach(pieces, [](const std::string& text, std::vector<SplitPiece>* out) {
      std::vector<std::pair<size_t, size_t>> matches;
      for (size_t pos = 0; pos < text.size();) {
        const size_t begin = pos;
        if (IsWhitespace(DecodeUtf8(text, &pos))) matches.emplace_back(begin, pos);
      }
      SplitBySpans(text, CoverWithGaps(matches, text.size()), SplitBehavior::kRemoved, out);
      return absl::OkStatus();
    });
  }
};

absl::StatusOr<std::unique_ptr<PreTokenizer>> SequenceFromJson(const JsonView& json) {
  const JsonView list = json["pretokenizers"];
  if (absl::Status s = list.ExpectArray(); !s.ok()) return s;
  std::vector<std::unique_ptr<PreTokenizer>> parts;
  for (size_t i = 0; i < list.value().size(); ++i) {
    absl::StatusOr<std::unique_ptr<PreTokenizer>> part = PreTokenizerFromJson(list.at(i));
    if (!part.ok()) return part.status();
    parts.push_back(*std::move(part));
  }
  return std::make_unique<SequencePreTokenizer>(std::move(parts));
}

absl::StatusOr<std::unique_ptr<SplitPreTokenizer>> MakeRegexSplit(std::string_view pattern,
                                                                  const JsonView& at, SplitBehavior behavior,
                                                                  bool invert) {
  absl::StatusOr<std::unique_ptr<Regex>> regex = Regex::Compile(pattern);
  if (!regex.ok()) return at.Error(AsStd(regex.status().message()));
  return std::make_unique<SplitPreTokenizer>(*std::move(regex), "", behavior, invert);
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> SplitFromJson(const JsonView& json) {
  absl::StatusOr<std::string> behavior_name = json.String("behavior");
  if (!behavior_name.ok()) return behavior_name.status();
  absl::StatusOr<SplitBehavior> behavior = ParseSplitBehavior(*behavior_name);
  if (!behavior.ok()) return json.ErrorAt("behavior", AsStd(behavior.status().message()));
  absl::StatusOr<bool> invert = json.BoolOr("invert", false);
  if (!invert.ok()) return invert.status();
  const JsonView pattern = json["pattern"];
  if (pattern.Has("String")) {
    absl::StatusOr<std::string> literal = pattern.String("String");
    if (!literal.ok()) return literal.status();
    return std::make_unique<SplitPreTokenizer>(nullptr, *std::move(literal), *behavior, *invert);
  }
  absl::StatusOr<std::string> source = pattern.String("Regex");
  if (!source.ok()) return source.status();
  return MakeRegexSplit(*source, pattern["Regex"], *behavior, *invert);
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> ByteLevelFromJson(const JsonView& json) {
  absl::StatusOr<bool> prefix = json.BoolOr("add_prefix_space", true);
  if (!prefix.ok()) return prefix.status();
  absl::StatusOr<bool> use_regex = json.BoolOr("use_regex", true);
  if (!use_regex.ok()) return use_regex.status();
  std::unique_ptr<SplitPreTokenizer> split;
  if (*use_regex) {
    absl::StatusOr<std::unique_ptr<SplitPreTokenizer>> made =
        MakeRegexSplit(kGpt2Pattern, json, SplitBehavior::kIsolated, false);
    if (!made.ok()) return made.status();
    split = *std::move(made);
  }
  return std::make_unique<ByteLevelPreTokenizer>(*prefix, std::move(split));
}

absl::StatusOr<PrependScheme> ParsePrependScheme(const JsonView& json) {
  if (!json.Has("prepend_scheme")) {
    // Files older than tokenizers 0.14 carry add_prefix_space instead.
    absl::StatusOr<bool> add = json.BoolOr("add_prefix_space", true);
    if (!add.ok()) return add.status();
    return *add ? PrependScheme::kAlways : PrependScheme::kNever;
  }
  absl::StatusOr<std::string> name = json.String("prepend_scheme");
  if (!name.ok()) return name.status();
  if (*name == "always") return PrependScheme::kAlways;
  if (*name == "first") return PrependScheme::kFirst;
  if (*name == "never") return PrependScheme::kNever;
  return json.Unsupported("prepend_scheme", *name);
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> MetaspaceFromJson(const JsonView& json) {
  absl::StatusOr<std::string> replacement = json.String("replacement");
  if (!replacement.ok()) return replacement.status();
  if (replacement->empty()) return json.ErrorAt("replacement", "must not be empty");
  absl::StatusOr<PrependScheme> scheme = ParsePrependScheme(json);
  if (!scheme.ok()) return scheme.status();
  absl::StatusOr<bool> split = json.BoolOr("split", true);
  if (!split.ok()) return split.status();
  return std::make_unique<MetaspacePreTokenizer>(*std::move(replacement), *scheme, *split);
}

}  // namespace

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizerFromJson(const JsonView& json) {
  if (absl::Status s = json.ExpectObject(); !s.ok()) return s;
  absl::StatusOr<std::string> type = json.Type();
  if (!type.ok()) return type.status();
  if (*type == "Sequence") return SequenceFromJson(json);
  if (*type == "Split") return SplitFromJson(json);
  if (*type == "ByteLevel") return ByteLevelFromJson(json);
  if (*type == "Metaspace") return MetaspaceFromJson(json);
  if (*type == "WhitespaceSplit") return std::make_unique<WhitespaceSplitPreTokenizer>();
  if (*type == "Digits") {
    absl::StatusOr<bool> individual = json.BoolOr("individual_digits", false);
    if (!individual.ok()) return individual.status();
    return std::make_unique<DigitsPreTokenizer>(*individual);
  }
  return json.Unsupported("type", *type);
}

}  // namespace zerofit::text
