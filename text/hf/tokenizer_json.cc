#include "text/hf/tokenizer_json.h"

#include <filesystem>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/text_file.h"
#include "text/hf/added_vocabulary.h"
#include "text/hf/bpe_model.h"
#include "text/hf/decoder.h"
#include "text/hf/normalizer.h"
#include "text/hf/post_processor.h"
#include "text/hf/pre_tokenizer.h"
#include "text/json_view.h"
#include "text/unicode.h"

namespace zerofit::text {

TokenizerJson::TokenizerJson() = default;
TokenizerJson::~TokenizerJson() = default;

absl::StatusOr<std::unique_ptr<TokenizerJson>> TokenizerJson::FromFile(const std::string& path,
                                                                       const TokenizerJsonLimits& limits) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat(path, ": ", ec.message()));
  if (size > limits.max_file_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", size, " bytes exceeds the limit of ", limits.max_file_bytes));
  }
  absl::StatusOr<std::string> text = core::ReadTextFile(path);
  if (!text.ok()) return text.status();
  return FromJson(*text, path, limits);
}

absl::StatusOr<std::unique_ptr<TokenizerJson>> TokenizerJson::FromJson(std::string_view json,
                                                                       std::string_view source,
                                                                       const TokenizerJsonLimits& limits) {
  absl::StatusOr<nlohmann::json> doc =
      ParseBoundedJson(json, source, {limits.max_file_bytes, limits.max_json_depth});
  if (!doc.ok()) return doc.status();
  const JsonView root(*doc, std::string(source), "");
  if (absl::Status s = root.ExpectObject(); !s.ok()) return s;
  std::unique_ptr<TokenizerJson> tokenizer(new TokenizerJson());
  if (absl::Status s = tokenizer->Load(root); !s.ok()) return s;
  return tokenizer;
}

absl::Status TokenizerJson::Load(const JsonView& root) {
  for (const char* key : {"truncation", "padding"}) {
    if (!root[key].is_null()) return root.ErrorAt(key, "unsupported (only null)");
  }
  absl::StatusOr<std::unique_ptr<BpeModel>> model = BpeModel::FromJson(root["model"]);
  if (!model.ok()) return model.status();
  model_ = *std::move(model);
  absl::StatusOr<AddedVocabulary> added = AddedVocabulary::FromJson(root["added_tokens"], *model_);
  if (!added.ok()) return added.status();
  added_ = std::make_unique<AddedVocabulary>(*std::move(added));
  if (!root["normalizer"].is_null()) {
    absl::StatusOr<std::unique_ptr<Normalizer>> n = NormalizerFromJson(root["normalizer"]);
    if (!n.ok()) return n.status();
    normalizer_ = *std::move(n);
  }
  if (!root["pre_tokenizer"].is_null()) {
    absl::StatusOr<std::unique_ptr<PreTokenizer>> p = PreTokenizerFromJson(root["pre_tokenizer"]);
    if (!p.ok()) return p.status();
    pre_tokenizer_ = *std::move(p);
  }
  if (!root["post_processor"].is_null()) {
    absl::StatusOr<std::unique_ptr<PostProcessor>> p = PostProcessorFromJson(root["post_processor"]);
    if (!p.ok()) return p.status();
    post_processor_ = *std::move(p);
  }
  if (!root["decoder"].is_null()) {
    absl::StatusOr<std::unique_ptr<Decoder>> d = DecoderFromJson(root["decoder"]);
    if (!d.ok()) return d.status();
    decoder_ = *std::move(d);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> TokenizerJson::Encode(std::string_view text,
                                                           bool add_special_tokens) const {
  if (text.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("text of ", text.size(), " bytes is longer than 2 GiB"));
  }
  if (!IsValidUtf8(text)) return absl::InvalidArgumentError("text is not valid UTF-8");
  std::vector<int32_t> ids;
  std::vector<TextSegment> segments;
  added_->Split(text, /*normalized=*/false, &segments);
  for (const TextSegment& segment : segments) {
    if (segment.token_id) {
      ids.push_back(*segment.token_id);
    } else if (absl::Status s = EncodeSegment(segment.text, segment.offset == 0, &ids); !s.ok()) {
      return s;
    }
  }
  if (add_special_tokens && post_processor_ != nullptr) post_processor_->Process(&ids);
  return ids;
}

// One stretch of raw text between added tokens: normalize, then split on the normalized added tokens.
absl::Status TokenizerJson::EncodeSegment(std::string_view text, bool at_input_start,
                                          std::vector<int32_t>* ids) const {
  std::string normalized(text);
  if (normalizer_ != nullptr) {
    if (absl::Status s = normalizer_->Normalize(&normalized); !s.ok()) return s;
  }
  if (!added_->has_normalized_tokens()) return TokenizePieces(std::move(normalized), at_input_start, ids);
  std::vector<TextSegment> parts;
  added_->Split(normalized, /*normalized=*/true, &parts);
  for (const TextSegment& part : parts) {
    if (part.token_id) {
      ids->push_back(*part.token_id);
    } else if (absl::Status s =
                   TokenizePieces(std::string(part.text), at_input_start && part.offset == 0, ids);
               !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status TokenizerJson::TokenizePieces(std::string text, bool at_input_start,
                                           std::vector<int32_t>* ids) const {
  if (text.empty()) return absl::OkStatus();
  std::vector<PreToken> pieces;
  pieces.push_back({std::move(text), at_input_start});
  if (pre_tokenizer_ != nullptr) {
    if (absl::Status s = pre_tokenizer_->PreTokenize(&pieces); !s.ok()) return s;
  }
  for (const PreToken& piece : pieces) model_->Tokenize(piece.text, ids);
  return absl::OkStatus();
}

absl::StatusOr<std::string> TokenizerJson::Decode(absl::Span<const int32_t> ids,
                                                  bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    if (const AddedToken* added = added_->FindById(id)) {
      if (!(skip_special_tokens && added->special)) tokens.push_back(added->content);
      continue;
    }
    std::optional<std::string_view> token = model_->IdToToken(id);
    if (!token) return absl::InvalidArgumentError(absl::StrCat("id ", id, " is not in the vocabulary"));
    tokens.emplace_back(*token);
  }
  if (decoder_ == nullptr) return absl::StrJoin(tokens, " ");
  decoder_->DecodeChain(&tokens);
  return absl::StrJoin(tokens, "");
}

std::optional<int32_t> TokenizerJson::TokenToId(std::string_view token) const {
  if (const AddedToken* added = added_->FindByContent(token)) return added->id;
  return model_->TokenToId(token);
}

std::optional<std::string> TokenizerJson::IdToToken(int32_t id) const {
  if (const AddedToken* added = added_->FindById(id)) return added->content;
  std::optional<std::string_view> token = model_->IdToToken(id);
  if (!token) return std::nullopt;
  return std::string(*token);
}

int32_t TokenizerJson::vocab_size() const {
  int32_t size = model_->vocab_size();
  for (const AddedToken& token : added_->tokens()) size = std::max(size, token.id + 1);
  return size;
}

}  // namespace zerofit::text
