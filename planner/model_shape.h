// The shape of a Llama-family decoder as the planner needs it: sizes, exact parameter counts per part, and
// where the numbers came from. Built from a Hugging Face config.json, a model directory (safetensors headers
// give the exact parameter count without reading any weights), or a built-in preset.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/hf_config.h"

namespace zerofit::planner {

struct ModelShape {
  std::string name;    // preset name or the path it was loaded from
  std::string source;  // "preset", "config.json" or "safetensors headers (N tensors)"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  // The causal LM's exact parameter count (from config.json arithmetic or the checkpoint's headers).
  int64_t parameter_count = 0;

  int64_t q_size() const { return num_heads * head_dim; }
  int64_t kv_size() const { return num_kv_heads * head_dim; }
  int64_t EmbeddingParameters() const { return vocab_size * hidden_size; }
  int64_t LayerParameters() const;
  int64_t LmHeadParameters() const { return tie_word_embeddings ? 0 : vocab_size * hidden_size; }
  // Backbone (embedding, layers, final norm): what a reward model and a policy share.
  int64_t BackboneParameters() const;
  // A reward model: the backbone plus a score head of one label (LlamaForSequenceClassification).
  int64_t RewardModelParameters() const { return BackboneParameters() + hidden_size; }
  int64_t PolicyParameters() const { return BackboneParameters() + LmHeadParameters(); }
  // LoRA adapters of rank r on q_proj, k_proj, v_proj and o_proj of every layer (A: r x in, B: out x r).
  int64_t LoraParameters(int64_t rank) const;
  // The largest single tensor (its gradient is the largest one autograd materialises at once).
  int64_t LargestTensor() const;
  // Element counts of the trainable tensors in registration order (as LibTorch's named_parameters lists
  // them for worker/torch/model/llama_model.h): a reward model ends in score.weight, a policy in
  // lm_head.weight unless tied; with lora_rank > 0 only the adapters (and the score head) train.
  std::vector<int64_t> TrainableTensors(bool reward_head, int64_t lora_rank) const;
};

// Checks the config describes a model the planner can size (positive sizes, heads divide).
absl::StatusOr<ModelShape> ModelShapeFromConfig(const core::HfModelConfig& config, const std::string& name);

// `model` is a preset name (PresetNames(), case-insensitive), a config.json path, or a model directory
// holding config.json (and optionally *.safetensors, whose headers then give the exact parameter count).
absl::StatusOr<ModelShape> LoadModelShape(const std::string& model);

std::vector<std::string> PresetNames();
absl::StatusOr<core::HfModelConfig> PresetConfig(const std::string& name);

}  // namespace zerofit::planner
