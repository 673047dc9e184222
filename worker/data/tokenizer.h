// Tokenizer: text <-> token ids. The interface is narrow so tests can use a fake (a character-level one
// lives in tests/worker/data/); SentencePieceTokenizer is the real implementation.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zerofit::data {

namespace spm_bridge {
class Processor;
}  // namespace spm_bridge

// Thread-safety: implementations are immutable after construction; every method may be called from several
// threads at once.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Token ids of `text`. Adds no BOS/EOS: the data pipeline decides where they go (preference_dataset.h).
  virtual absl::StatusOr<std::vector<int32_t>> Encode(const std::string& text) const = 0;
  // Text of `ids`. Special ids (BOS, EOS, PAD) decode to nothing. An id outside [0, vocab_size()) is an
  // InvalidArgument error.
  virtual absl::StatusOr<std::string> Decode(const std::vector<int32_t>& ids) const = 0;

  // -1 when the tokenizer has no such token.
  virtual int32_t bos_id() const = 0;
  virtual int32_t eos_id() const = 0;
  // The model's pad id if it defines one, else eos_id() (so padding never needs a token the model lacks).
  virtual int32_t pad_id() const = 0;
  // Number of ids; every id this tokenizer produces is in [0, vocab_size()).
  virtual int32_t vocab_size() const = 0;

  // The model's chat template applied to `messages_json` (a JSON list of {"role", "content", ...}, keys in
  // the order they should reach the template). Conversational preference data needs it; the default says
  // the tokenizer has no template (SentencePiece models carry none).
  virtual absl::StatusOr<std::string> RenderChat(const std::string& messages_json,
                                                 bool add_generation_prompt) const {
    (void)messages_json;
    (void)add_generation_prompt;
    return absl::FailedPreconditionError(
        "this tokenizer has no chat template (conversational data needs a Hugging Face model directory)");
  }
};

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
