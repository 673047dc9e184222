#include "worker/torch/train/reward_model_scorer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/hf_config.h"
#include "core/safetensors.h"
#include "core/status_macros.h"
#include "worker/torch/train/host_to_device.h"
#include "worker/torch/train/pair_tensors.h"

namespace zerofit::worker {
namespace {

absl::Status NotARewardModel(const std::string& dir, const core::HfModelConfig& c) {
  return absl::InvalidArgumentError(absl::StrCat(
      dir, "/config.json: not a one-label reward model (architectures ", c.architecture, ", num_labels ",
      c.num_labels, "); export one with zerofit_train_prefs --task reward --export DIR"));
}

// Rows [from, to) of `sequences` as right-padded token ids and their lengths, on `device`.
std::pair<torch::Tensor, torch::Tensor> Batch(const std::vector<std::vector<int32_t>>& sequences, size_t from,
                                              size_t to, int64_t pad, torch::Device device) {
  size_t longest = 1;
  for (size_t i = from; i < to; ++i) longest = std::max(longest, sequences[i].size());
  torch::Tensor ids =
      torch::full({static_cast<int64_t>(to - from), static_cast<int64_t>(longest)}, pad, torch::kInt64);
  torch::Tensor lengths = torch::empty({static_cast<int64_t>(to - from)}, torch::kInt64);
  for (size_t i = from; i < to; ++i) {
    const auto& s = sequences[i];
    for (size_t t = 0; t < s.size(); ++t) ids[i - from][t] = s[t];
    lengths[i - from] = static_cast<int64_t>(s.size());
  }
  return {HostToDevice(ids, device), HostToDevice(lengths, device)};
}

}  // namespace

absl::StatusOr<std::unique_ptr<RewardModelScorer>> RewardModelScorer::Load(const std::string& dir,
                                                                           torch::Device device,
                                                                           torch::ScalarType dtype) {
  ZF_ASSIGN_OR_RETURN(core::HfModelConfig config, core::LoadHfConfig(dir + "/config.json"));
  if (config.num_labels != 1 || config.architecture.find("SequenceClassification") == std::string::npos) {
    return NotARewardModel(dir, config);
  }
  LlamaOptions o;
  o.reward_head = true;
  o.dtype = dtype;
  ZF_ASSIGN_OR_RETURN(LlamaModel model, MakeLlamaModel(config, o));
  ZF_ASSIGN_OR_RETURN(core::SafetensorsModel weights, core::SafetensorsModel::Open(dir));
  LlamaLoadReport report;
  ZF_RETURN_IF_ERROR(model->LoadWeights(weights, &report));
  if (report.score_head_initialized) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": the weights hold no score head (a causal LM, not a trained reward model)"));
  }
  model->eval();
  model->to(device);
  for (torch::Tensor& p : model->parameters()) p.requires_grad_(false);
  return std::unique_ptr<RewardModelScorer>(new RewardModelScorer(std::move(model), device));
}

absl::StatusOr<std::vector<double>> RewardModelScorer::Score(
    const std::vector<std::vector<int32_t>>& sequences, int64_t batch) {
  if (batch < 1) return absl::InvalidArgumentError("RewardModelScorer::Score: batch must be >= 1");
  const int64_t vocab = vocab_size();
  for (size_t i = 0; i < sequences.size(); ++i) {
    if (sequences[i].empty()) return absl::InvalidArgumentError(absl::StrCat("sequence ", i, " is empty"));
    for (int32_t id : sequences[i]) {
      if (id < 0 || id >= vocab) {
        return absl::InvalidArgumentError(absl::StrCat("sequence ", i, " holds token id ", id,
                                                       " outside the reward model's vocabulary [0, ", vocab,
                                                       ")"));
      }
    }
  }
  torch::NoGradGuard no_grad;
  std::vector<double> scores;
  scores.reserve(sequences.size());
  const int64_t pad = BatchPadId(model_->config());
  for (size_t from = 0; from < sequences.size(); from += static_cast<size_t>(batch)) {
    const size_t to = std::min(sequences.size(), from + static_cast<size_t>(batch));
    auto [ids, lengths] = Batch(sequences, from, to, pad, device_);
    const torch::Tensor s = model_->Scores(ids, lengths).to(torch::kFloat64).cpu();
    for (int64_t i = 0; i < s.size(0); ++i) scores.push_back(s[i].item<double>());
  }
  return scores;
}

int64_t RewardModelScorer::parameter_bytes() const { return model_->parameter_bytes(); }

}  // namespace zerofit::worker
