// A Hugging Face `config.json` for the decoder families zerofit trains (LlamaForCausalLM,
// MistralForCausalLM, Qwen2ForCausalLM and their *ForSequenceClassification heads), as a plain struct.
// Parsing validates every field it uses; errors name the file and the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zerofit::core {

struct RopeScaling {
  std::string type;  // "linear", "dynamic", "llama3" ("default"/absent: no scaling)
  double factor = 1.0;
  // llama3 only
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct HfModelConfig {
  std::string architecture;  // architectures[0], e.g. "LlamaForCausalLM"
  std::string model_type;    // "llama", "mistral", "qwen2"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // defaults to num_attention_heads
  int64_t head_dim = 0;             // defaults to hidden_size / num_attention_heads
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  std::optional<RopeScaling> rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;            // q/k/v projections carry a bias (Qwen2: true)
  std::optional<int64_t> sliding_window;  // keys j <= i - window masked (Qwen2: refused)
  int64_t num_labels = 1;                 // *ForSequenceClassification
  std::optional<int64_t> pad_token_id, bos_token_id, eos_token_id;  // a list-valued id: its first entry
  // A list-valued eos_token_id's other entries (Llama 3.1: [128001, 128008, 128009] is 128001 and these two),
  // written back as the list: transformers' generate stops at every one, so an export must keep them all.
  std::vector<int64_t> more_eos_token_ids;
  std::string torch_dtype;  // as written ("bfloat16", "float32", ...), informational

  bool is_sequence_classification() const;
  // Exact parameter count of the model this config describes (embedding, layers, final norm, head).
  int64_t ParameterCount() const;
};

// `source` names the file in error messages.
absl::StatusOr<HfModelConfig> ParseHfConfig(const std::string& json_text, const std::string& source);
absl::StatusOr<HfModelConfig> LoadHfConfig(const std::string& path);
// The JSON text of `config` in Hugging Face's format (for exporting a trained model).
std::string HfConfigToJson(const HfModelConfig& config);

}  // namespace zerofit::core
