// HfTokenizer: the data::Tokenizer of a Hugging Face model directory (tokenizer.json, tokenizer_config.json,
// config.json), backed by text::TokenizerJson and text::ChatTemplate. Unlike SentencePieceTokenizer it needs
// no SentencePiece, so training processes (which link LibTorch) can tokenize text preference data themselves.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "text/chat_template.h"
#include "text/hf/tokenizer_json.h"
#include "worker/data/data_report.h"
#include "worker/data/tokenizer.h"
#include "worker/data/tokenizer_overrides.h"

namespace zerofit::data {

// Thread-safety: immutable after Load; every method may be called from several threads at once.
class HfTokenizer final : public Tokenizer {
 public:
  // `dir` holds tokenizer.json (required), tokenizer_config.json and config.json (both optional).
  // Special tokens: bos/eos/pad_token of tokenizer_config.json (strings or AddedToken dicts) mapped through
  // the vocabulary; where the config has none, bos_token_id/eos_token_id/pad_token_id of config.json (the
  // first of a list). The chat templates are the directory's (text::ChatTemplate::FromDirectory:
  // chat_template.jinja and additional_chat_templates/ before tokenizer_config.json's chat_template); a
  // missing one, or one that does not parse, fails RenderChat only, so text and pre-tokenized data still
  // load.
  // Errors name the file.
  // `overrides` (tokenizer_overrides.h): eos_token must be one token of the vocabulary (an
  // InvalidArgument naming it and the file otherwise); chat_template replaces the directory's templates and,
  // asked for by name, must load here (text::ChatTemplate::FromTemplatePath), with this directory's tokens.
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> Load(const std::string& dir,
                                                           const TokenizerOverrides& overrides = {});

  // Ids without special tokens (the post-processor's BOS/EOS are not added).
  absl::StatusOr<std::vector<int32_t>> Encode(const std::string& text) const override;
  // Special tokens are skipped, as the interface asks.
  absl::StatusOr<std::string> Decode(const std::vector<int32_t>& ids) const override;
  // `extras`: tools (a list, or a JSON string holding one, as TRL accepts) and the kwargs object; a
  // malformed one is an InvalidArgument naming it.
  absl::StatusOr<std::string> RenderChat(const std::string& messages_json, bool add_generation_prompt,
                                         const ChatExtras& extras) const override;
  using Tokenizer::RenderChat;
  int32_t bos_id() const override { return bos_id_; }
  int32_t eos_id() const override { return eos_id_; }
  int32_t pad_id() const override { return pad_id_; }
  int32_t vocab_size() const override { return vocab_size_; }

  // The pad id the config names, -1 when none (pad_id() then falls back to eos_id()).
  int32_t configured_pad_id() const { return configured_pad_id_; }
  // tokenizer_config.json's add_bos_token, when present.
  std::optional<bool> add_bos_token() const { return add_bos_token_; }
  // The chat template (the one rendered without tools) writes bos_token itself, as Llama's and Mistral's do.
  bool template_writes_bos() const;
  // What prompts are expected to look like (for data::BuildDataReport): BOS when the template writes it or
  // the config asks for it.
  DataExpectations expectations() const;
  const text::TokenizerJson& text_tokenizer() const { return *tok_; }
  // Null when the model has no chat template.
  const text::ChatTemplate* chat_template() const { return chat_ ? &*chat_ : nullptr; }
  const std::string& dir() const { return dir_; }

 private:
  HfTokenizer() = default;

  std::string dir_;
  std::unique_ptr<text::TokenizerJson> tok_;
  std::optional<text::ChatTemplate> chat_;
  absl::Status chat_error_;  // why the directory's chat template did not load (RenderChat returns it)
  std::optional<std::string> eos_token_;  // the overriding EOS, which the template sees as eos_token
  int32_t bos_id_ = -1, eos_id_ = -1, pad_id_ = -1, configured_pad_id_ = -1, vocab_size_ = 0;
  std::optional<bool> add_bos_token_;
};

}  // namespace zerofit::data
