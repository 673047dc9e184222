// SentencePieceTokenizer: the data::Tokenizer of a SentencePiece model file. Its library, zerofit_tokenizer,
// links SentencePiece (and so protobuf-lite), which a LibTorch process must not load: only the tokenizing
// tools link it (CMakeLists.txt). SentencePiece's headers are seen by sentencepiece_bridge.cc only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/data/tokenizer.h"

namespace zerofit::data {

namespace spm_bridge {
class Processor;
}  // namespace spm_bridge

// A SentencePiece model file (`tokenizer.model`, a serialized ModelProto), e.g. as written by
// TrainSentencePieceTokenizer or shipped with Llama/Mistral checkpoints.
class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Errors name `path` (NotFound when the file does not exist, InvalidArgument when it does not parse).
  static absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> Load(const std::string& path);
  ~SentencePieceTokenizer() override;

  absl::StatusOr<std::vector<int32_t>> Encode(const std::string& text) const override;
  absl::StatusOr<std::string> Decode(const std::vector<int32_t>& ids) const override;
  int32_t bos_id() const override { return bos_id_; }
  int32_t eos_id() const override { return eos_id_; }
  int32_t pad_id() const override { return pad_id_; }
  int32_t vocab_size() const override { return vocab_size_; }
  int32_t unk_id() const { return unk_id_; }  // -1 when the model has none
  const std::string& path() const { return path_; }

 private:
  SentencePieceTokenizer(std::unique_ptr<spm_bridge::Processor> processor, std::string path);

  std::unique_ptr<spm_bridge::Processor> processor_;
  std::string path_;
  int32_t bos_id_, eos_id_, pad_id_, unk_id_, vocab_size_;
};

}  // namespace zerofit::data
