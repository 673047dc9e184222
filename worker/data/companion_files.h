// The files an exported model directory carries beside model.safetensors and config.json, so that it loads
// as the directory it was trained from did: the tokenizer (transformers' AutoTokenizer, and zerofit's next
// job reading text from the export without data.tokenizer) and the generation defaults (GenerationConfig:
// the ids generate stops at, the sampling settings). Trainer.save_model writes the same set when given the
// tokenizer. The files are copied byte for byte, except where the job changed the tokenizer
// (tokenizer_overrides.h), as TRL's SFTTrainer saves the tokenizer it changed. Torch-free.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/data/tokenizer_overrides.h"

namespace zerofit::data {

// The tokenizer's files transformers reads from a model directory (a fast tokenizer's tokenizer.json, a
// slow one's vocabulary, the special tokens, the chat templates; the named ones,
// additional_chat_templates/*.jinja, as text::ChatTemplate::NamedTemplateFiles lists them), and the
// model's generation defaults.
inline constexpr const char* kTokenizerFileNames[] = {
    "tokenizer.json",    "tokenizer_config.json", "special_tokens_map.json",
    "added_tokens.json", "tokenizer.model",       "vocab.json",
    "merges.txt",        "chat_template.jinja",   "chat_template.json"};
inline constexpr const char* kGenerationConfigName = "generation_config.json";

struct CompanionFile {
  std::string from;  // the file to copy
  std::string name;  // its path relative to the export directory ("additional_chat_templates/x.jinja")
};

// The companion files that exist: the tokenizer's in `tokenizer_dir` (empty: none) and
// generation_config.json in `model_dir`, in a fixed order.
std::vector<CompanionFile> CompanionFilesOf(const std::string& model_dir, const std::string& tokenizer_dir);

// Copies CompanionFilesOf(model_dir, tokenizer_dir) into `export_dir` (which exists), each through a
// temporary file and a rename, so that a crash leaves the old or the new file. A companion name present in
// `export_dir` but not among the sources (left there by an earlier export of another model) is removed,
// since transformers would read it with the new weights: a stale chat_template.jinja, for one, overrides
// the new tokenizer_config.json's template. A source directory that is `export_dir` itself is not copied
// onto itself.
// `overrides` change what is written, as transformers saves the changed tokenizer: eos_token becomes
// tokenizer_config.json's and special_tokens_map.json's eos_token; chat_template's templates (read as
// text::ChatTemplate::FromTemplatePath reads them) are written as chat_template.jinja and
// additional_chat_templates/<name>.jinja, in place of the tokenizer's own template files, and
// tokenizer_config.json loses its chat_template entry. Every source is read before anything is written.
// Errors name the file.
absl::Status WriteCompanionFiles(const std::string& model_dir, const std::string& tokenizer_dir,
                                 const std::string& export_dir, const TokenizerOverrides& overrides = {});

}  // namespace zerofit::data
