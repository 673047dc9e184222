// A Hugging Face `tokenizer.json` tokenizer: added tokens, normalizer, pre-tokenizer, BPE model,
// post-processor and decoder, producing exactly the ids of the Rust `tokenizers` library for the supported
// components. Anything else a file uses is refused at load time with an error naming its JSON path.
// Named after its file format: the data pipeline's tokenizer concept is data::Tokenizer
// (worker/data/tokenizer.h), and data::HfTokenizer puts this engine behind it.
//
// Thread-safety: a TokenizerJson is immutable after construction apart from the BPE word cache, which locks
// internally; Encode and Decode may run concurrently from any number of threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace zerofit::text {

class AddedVocabulary;
class BpeModel;
class Decoder;
class Normalizer;
class PostProcessor;
class PreTokenizer;
class JsonView;

struct TokenizerJsonLimits {
  size_t max_file_bytes = size_t{256} << 20;  // the largest real tokenizer.json is ~12 MB
  int max_json_depth = 64;
};

class TokenizerJson {
 public:
  static absl::StatusOr<std::unique_ptr<TokenizerJson>> FromFile(const std::string& path,
                                                                 const TokenizerJsonLimits& limits = {});
  // `source` names the document in error messages.
  static absl::StatusOr<std::unique_ptr<TokenizerJson>> FromJson(std::string_view json,
                                                                 std::string_view source = "tokenizer.json",
                                                                 const TokenizerJsonLimits& limits = {});
  ~TokenizerJson();
  TokenizerJson(const TokenizerJson&) = delete;
  TokenizerJson& operator=(const TokenizerJson&) = delete;

  // Ids of `text` (UTF-8; invalid UTF-8 or more than 2 GiB is InvalidArgument). Added tokens written in the
  // text are always matched; `add_special_tokens` runs the post-processor (BOS/EOS templates).
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text, bool add_special_tokens) const;

  // Text of `ids`; `skip_special_tokens` drops added tokens marked special. An id that is neither in the
  // model nor an added token is InvalidArgument (HF would silently drop it).
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids, bool skip_special_tokens) const;

  std::optional<int32_t> TokenToId(std::string_view token) const;
  std::optional<std::string> IdToToken(int32_t id) const;
  // One past the largest id of the model vocabulary and the added tokens.
  int32_t vocab_size() const;

 private:
  TokenizerJson();
  absl::Status Load(const JsonView& root);
  absl::Status EncodeSegment(std::string_view text, bool at_input_start, std::vector<int32_t>* ids) const;
  absl::Status TokenizePieces(std::string text, bool at_input_start, std::vector<int32_t>* ids) const;

  std::unique_ptr<AddedVocabulary> added_;
  std::unique_ptr<Normalizer> normalizer_;       // may be null
  std::unique_ptr<PreTokenizer> pre_tokenizer_;  // may be null
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<PostProcessor> post_processor_;  // may be null
  std::unique_ptr<Decoder> decoder_;               // may be null: tokens are joined with spaces
};

}  // namespace zerofit::text
