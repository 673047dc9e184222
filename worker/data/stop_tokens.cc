#include "worker/data/stop_tokens.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "core/text_file.h"
#include "nlohmann/json.hpp"
#include "worker/data/companion_files.h"

namespace zerofit::data {
namespace {

void AddOnce(int64_t id, std::vector<int64_t>* ids) {
  if (id >= 0 && std::find(ids->begin(), ids->end(), id) == ids->end()) ids->push_back(id);
}

// generation_config.json's eos_token_id: absent or null adds nothing.
absl::Status AddGenerationConfigEos(const std::string& path, std::vector<int64_t>* ids) {
  ZF_ASSIGN_OR_RETURN(const std::string text, core::ReadTextFile(path));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  auto it = j.find("eos_token_id");
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  const auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(path,
                                                   ": field 'eos_token_id': expected a token id or a list of "
                                                   "them, got ",
                                                   it->dump()));
  };
  const nlohmann::json list = it->is_array() ? *it : nlohmann::json::array({*it});
  for (const nlohmann::json& id : list) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0) return bad();
    AddOnce(id.get<int64_t>(), ids);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> StopTokenIds(const std::string& model_dir,
                                                  const core::HfModelConfig& config, int64_t tokenizer_eos) {
  std::vector<int64_t> ids;
  if (config.eos_token_id) AddOnce(*config.eos_token_id, &ids);
  for (int64_t id : config.more_eos_token_ids) AddOnce(id, &ids);
  const std::string generation = model_dir + "/" + kGenerationConfigName;
  std::error_code ec;
  if (!model_dir.empty() && std::filesystem::exists(generation, ec)) {
    ZF_RETURN_IF_ERROR(AddGenerationConfigEos(generation, &ids));
  }
  AddOnce(tokenizer_eos, &ids);
  return ids;
}

}  // namespace zerofit::data
