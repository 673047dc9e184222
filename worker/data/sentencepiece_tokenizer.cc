#include "worker/data/sentencepiece_tokenizer.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/data/sentencepiece_bridge.h"

namespace zerofit::data {

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::Load(
    const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return absl::NotFoundError(absl::StrCat(path, ": tokenizer model not found (expected a SentencePiece ",
                                            "tokenizer.model file)"));
  }
  std::string error;
  std::unique_ptr<spm_bridge::Processor> processor = spm_bridge::Processor::Load(path, &error);
  if (processor == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a SentencePiece model: ", error));
  }
  if (processor->piece_size() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": SentencePiece model has no pieces"));
  }
  return std::unique_ptr<SentencePieceTokenizer>(new SentencePieceTokenizer(std::move(processor), path));
}

SentencePieceTokenizer::SentencePieceTokenizer(std::unique_ptr<spm_bridge::Processor> processor,
                                               std::string path)
    : processor_(std::move(processor)),
      path_(std::move(path)),
      bos_id_(processor_->bos_id()),
      eos_id_(processor_->eos_id()),
      pad_id_(processor_->pad_id() >= 0 ? processor_->pad_id() : processor_->eos_id()),
      unk_id_(processor_->unk_id()),
      vocab_size_(processor_->piece_size()) {}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

absl::StatusOr<std::vector<int32_t>> SentencePieceTokenizer::Encode(const std::string& text) const {
  std::vector<int> ids;
  std::string error;
  if (!processor_->Encode(text, &ids, &error)) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": encode failed: ", error));
  }
  return std::vector<int32_t>(ids.begin(), ids.end());
}

absl::StatusOr<std::string> SentencePieceTokenizer::Decode(const std::vector<int32_t>& ids) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size_) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ": decode: id ", ids[i], " at position ", i,
                                                     " is outside [0, ", vocab_size_, ")"));
    }
  }
  std::string text;
  std::string error;
  if (!processor_->Decode(std::vector<int>(ids.begin(), ids.end()), &text, &error)) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": decode failed: ", error));
  }
  return text;
}

}  // namespace zerofit::data
