#include "worker/data/training_data.h"

#include <fstream>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/line_reader.h"
#include "core/status_macros.h"
#include "nlohmann/json.hpp"
#include "worker/data/hf_tokenizer.h"

namespace zerofit::data {
namespace {

// Whether the first non-blank line of `path` is conversational: a pair whose "chosen" is a list of messages,
// an SFT example with "messages" or a "completion" list, a GRPO prompt with "messages" or a "prompt" list.
// Unreadable or malformed lines answer false: loading reports them with their line number.
bool StartsConversational(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string line;
  while (core::ReadLine(in, &line).value_or(false)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return false;
    for (const char* key : {"chosen", "messages", "completion", "prompt"}) {
      if (j.contains(key) && j[key].is_array()) return true;
    }
    return false;
  }
  return false;
}

bool ResolveAddBos(const DataSource& source, const HfTokenizer* tok) {
  if (source.add_bos) return *source.add_bos;
  return tok == nullptr || AutoAddBos(*tok, source.train);
}

// The specials of a run without a tokenizer: config.json's.
absl::Status SpecialsFromConfig(const core::HfModelConfig& config, const DataSource& source,
                                PreferenceDataOptions* o) {
  if (!config.bos_token_id || !config.eos_token_id) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config.json: fields 'bos_token_id' and 'eos_token_id' are required when ", source.train,
        " is read without a tokenizer (or give data.tokenizer, a directory with tokenizer.json)"));
  }
  o->bos_id = static_cast<int32_t>(*config.bos_token_id);
  o->eos_id = static_cast<int32_t>(*config.eos_token_id);
  o->vocab_size = static_cast<int32_t>(config.vocab_size);
  return absl::OkStatus();
}

absl::Status CheckTokenizerFitsModel(const HfTokenizer& tok, const core::HfModelConfig& config) {
  if (tok.vocab_size() > config.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        tok.dir(), "/tokenizer.json: ", tok.vocab_size(), " tokens, but config.json's vocab_size is ",
        config.vocab_size, ": ids past the embedding table; use the model's own tokenizer"));
  }
  if (tok.eos_id() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        tok.dir(),
        ": no EOS token (tokenizer_config.json eos_token or config.json eos_token_id): responses "
        "need one"));
  }
  return absl::OkStatus();
}

}  // namespace

bool AutoAddBos(const HfTokenizer& tok, const std::string& train_path) {
  if (tok.bos_id() < 0) return false;
  if (tok.template_writes_bos() && StartsConversational(train_path)) return false;
  return tok.add_bos_token().value_or(false);
}

DataSource DataSourceOfDirectory(const std::string& dir) {
  DataSource s;
  s.train = dir + "/train_ids.jsonl";
  s.test = dir + "/test_ids.jsonl";
  return s;
}

std::string TokenizerDirOf(const std::string& model_dir) {
  return std::ifstream(model_dir + "/tokenizer.json") ? model_dir : std::string();
}

int64_t PromptLengthLimit(int64_t max_prompt_length, int64_t max_length) {
  return max_prompt_length > 0 ? max_prompt_length : max_length / 2;
}

absl::StatusOr<std::optional<bool>> ParseAddBos(const std::string& value, const std::string& field) {
  if (value.empty() || value == "auto") return std::optional<bool>();
  if (value == "true") return std::optional<bool>(true);
  if (value == "false") return std::optional<bool>(false);
  return absl::InvalidArgumentError(absl::StrCat(field, ": '", value, "' is not auto, true or false"));
}

absl::StatusOr<std::unique_ptr<HfTokenizer>> LoadDataTokenizer(const DataSource& source) {
  if (source.tokenizer_dir.empty()) {
    if (source.tokenizer_overrides.empty()) return std::unique_ptr<HfTokenizer>();
    return absl::InvalidArgumentError(
        "data.eos_token and data.chat_template change a tokenizer, and this job has none (data.tokenizer, or "
        "a model directory with tokenizer.json): token-id data carries its EOS and template in its ids");
  }
  return HfTokenizer::Load(source.tokenizer_dir, source.tokenizer_overrides);
}

absl::StatusOr<TrainingData> LoadTrainingData(const DataSource& source, const core::HfModelConfig& config,
                                              int64_t max_length) {
  if (source.train.empty()) return absl::InvalidArgumentError("data.train: no training file given");
  ZF_ASSIGN_OR_RETURN(std::unique_ptr<HfTokenizer> tok, LoadDataTokenizer(source));
  if (tok) ZF_RETURN_IF_ERROR(CheckTokenizerFitsModel(*tok, config));
  TrainingData out;
  PreferenceDataOptions& o = out.options;
  o.max_length = max_length;
  o.max_prompt_length = PromptLengthLimit(source.max_prompt_length, max_length);
  o.add_bos = ResolveAddBos(source, tok.get());
  o.sft = source.sft;
  o.completion_only_loss = source.completion_only_loss;
  o.assistant_only_loss = source.assistant_only_loss;
  if (tok == nullptr) {
    if (absl::Status s = SpecialsFromConfig(config, source, &o); !s.ok()) return s;
  }
  if (absl::Status s = ValidatePreferenceDataOptions(o, tok.get()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("data (", source.train, "): ", s.message()));
  }
  // The training file is read whole first: the report measures what truncation then does to it.
  PreferenceDataOptions whole = o;
  whole.max_length = 0;
  auto train = LoadPreferenceJsonl(source.train, tok.get(), whole);
  if (!train.ok()) return train.status();
  const DataExpectations expect =
      tok ? tok->expectations()
          : DataExpectations{o.bos_id, o.eos_id,
                             config.pad_token_id ? static_cast<int32_t>(*config.pad_token_id) : -1,
                             o.add_bos};
  out.train.reserve(train->size());
  out.report = BuildDataReport(*train, expect, o, &out.train);  // truncates each pair once, for both
  if (!source.test.empty()) {
    auto test = LoadPreferenceJsonl(source.test, tok.get(), o);
    if (!test.ok()) return test.status();
    out.test = std::move(*test);
  }
  if (tok) {
    o.bos_id = tok->bos_id();
    o.eos_id = tok->eos_id();
    o.vocab_size = tok->vocab_size();
  }
  return out;
}

}  // namespace zerofit::data
