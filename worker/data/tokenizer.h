// Tokenizer: text <-> token ids, the data pipeline's one tokenizer concept. The interface is narrow so tests
// can use a fake (a character-level one lives in tests/worker/data/). Implementations: HfTokenizer
// (hf_tokenizer.h: a Hugging Face model directory, text::TokenizerJson and its chat template) and
// SentencePieceTokenizer (sentencepiece_tokenizer.h: a `tokenizer.model`, in its own library because
// SentencePiece cannot share a process with LibTorch, see CMakeLists.txt).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zerofit::data {

// What a data line gives the chat template besides its messages, as TRL's dataset columns do: `tools` (a
// JSON list of function schemas; TRL also takes the list as a JSON string) and `chat_template_kwargs` (a JSON
// object of template variables: enable_thinking, ...). Empty strings: not given.
struct ChatExtras {
  std::string tools_json;
  std::string kwargs_json;
};

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
  // `extras` reach the template as transformers' apply_chat_template(tools=..., **chat_template_kwargs)
  // passes them.
  virtual absl::StatusOr<std::string> RenderChat(const std::string& messages_json, bool add_generation_prompt,
                                                 const ChatExtras& extras) const {
    (void)messages_json;
    (void)add_generation_prompt;
    (void)extras;
    return absl::FailedPreconditionError(
        "this tokenizer has no chat template (conversational data needs a Hugging Face model directory)");
  }
  absl::StatusOr<std::string> RenderChat(const std::string& messages_json, bool add_generation_prompt) const {
    return RenderChat(messages_json, add_generation_prompt, ChatExtras{});
  }
};

}  // namespace zerofit::data
