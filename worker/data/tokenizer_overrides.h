// What a job changes about the Hugging Face tokenizer it reads text with, as TRL's SFTConfig does
// (`eos_token`, `chat_template_path`): the spec's data.eos_token and data.chat_template, the --eos-token and
// --chat-template flags. The tokenizer (hf_tokenizer.h) applies them when it loads, and the export
// (companion_files.h) writes the tokenizer as changed, as Trainer.save_model saves TRL's changed tokenizer.
#pragma once

#include <string>

namespace zerofit::data {

struct TokenizerOverrides {
  // A token of the vocabulary that becomes the EOS: the id appended to responses, the chat template's
  // eos_token, where GRPO's rollouts stop, the export's eos_token. Empty: the tokenizer's own.
  std::string eos_token;
  // A .jinja or .j2 file, or a model directory, whose chat template replaces the tokenizer's (a base model
  // trained on conversations). Empty: the tokenizer's own.
  std::string chat_template;

  bool empty() const { return eos_token.empty() && chat_template.empty(); }
};

}  // namespace zerofit::data
