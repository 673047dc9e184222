// A reward model as a GRPO reward source (issue 32): a directory zerofit exported (ExportHf of a reward
// model: config.json with LlamaForSequenceClassification / num_labels 1, and model.safetensors), loaded
// once in the training process and scoring token sequences (prompt + completion, in the policy's
// vocabulary) in batches, without gradients. A frozen copy: its parameters never reach an optimizer.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/torch/model/llama_model.h"

namespace zerofit::worker {

class RewardModelScorer {
 public:
  // Errors name the directory: a missing or unreadable config.json or model.safetensors, a config that is
  // not a one-label reward model, a tensor that does not fit.
  static absl::StatusOr<std::unique_ptr<RewardModelScorer>> Load(const std::string& dir, torch::Device device,
                                                                 torch::ScalarType dtype = torch::kFloat32);

  // One score per sequence, `batch` sequences per forward (right-padded with the model's pad id).
  absl::StatusOr<std::vector<double>> Score(const std::vector<std::vector<int32_t>>& sequences,
                                            int64_t batch = 16);

  int64_t vocab_size() const { return model_->config().vocab_size; }
  int64_t parameter_bytes() const;

 private:
  explicit RewardModelScorer(LlamaModel model, torch::Device device)
      : model_(std::move(model)), device_(device) {}
  LlamaModel model_;
  torch::Device device_;
};

}  // namespace zerofit::worker
