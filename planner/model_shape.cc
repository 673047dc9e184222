#include "planner/model_shape.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/safetensors.h"
#include "core/status_macros.h"

namespace zerofit::planner {
namespace {

core::HfModelConfig Llama(std::string name, int64_t vocab, int64_t hidden, int64_t inter, int64_t layers,
                          int64_t heads, int64_t kv_heads, double rope_theta, bool tie, bool bias,
                          std::string model_type) {
  core::HfModelConfig c;
  c.architecture = std::move(name);
  c.model_type = std::move(model_type);
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.intermediate_size = inter;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv_heads;
  c.head_dim = hidden / heads;
  c.rope_theta = rope_theta;
  c.tie_word_embeddings = tie;
  c.attention_bias = bias;
  return c;
}

struct Preset {
  const char* name;
  core::HfModelConfig config;
};

// The published config.json values of each model (Hugging Face hub), as the planner needs them.
std::vector<Preset> Presets() {
  return {
      {"Mistral-7B",
       Llama("MistralForCausalLM", 32000, 4096, 14336, 32, 32, 8, 10000.0, false, false, "mistral")},
      {"Llama-2-7B",
       Llama("LlamaForCausalLM", 32000, 4096, 11008, 32, 32, 32, 10000.0, false, false, "llama")},
      {"Llama-3-8B",
       Llama("LlamaForCausalLM", 128256, 4096, 14336, 32, 32, 8, 500000.0, false, false, "llama")},
      {"Qwen2.5-0.5B",
       Llama("Qwen2ForCausalLM", 151936, 896, 4864, 24, 14, 2, 1000000.0, true, true, "qwen2")},
      {"Qwen2.5-7B",
       Llama("Qwen2ForCausalLM", 152064, 3584, 18944, 28, 28, 4, 1000000.0, false, true, "qwen2")},
  };
}

}  // namespace

int64_t ModelShape::LayerParameters() const {
  const int64_t h = hidden_size;
  int64_t n = h * q_size() + 2 * h * kv_size() + q_size() * h + 3 * h * intermediate_size + 2 * h;
  if (attention_bias) n += q_size() + 2 * kv_size();
  return n;
}

int64_t ModelShape::BackboneParameters() const {
  return EmbeddingParameters() + num_layers * LayerParameters() + hidden_size;
}

int64_t ModelShape::LoraParameters(int64_t rank) const {
  const int64_t h = hidden_size;
  const int64_t per_layer = rank * ((h + q_size()) + 2 * (h + kv_size()) + (q_size() + h));
  return num_layers * per_layer;
}

int64_t ModelShape::LargestTensor() const {
  return std::max({EmbeddingParameters(), hidden_size * intermediate_size, hidden_size * q_size()});
}

std::vector<int64_t> ModelShape::TrainableTensors(bool reward_head, int64_t lora_rank) const {
  const int64_t h = hidden_size;
  std::vector<int64_t> t;
  const bool lora = lora_rank > 0;
  if (!lora) t.push_back(EmbeddingParameters());
  for (int64_t l = 0; l < num_layers; ++l) {
    // self_attn: q, k, v, o (weight, bias, lora_A, lora_B each); mlp: gate, up, down; the two norms.
    const int64_t outs[4] = {q_size(), kv_size(), kv_size(), h};
    const int64_t ins[4] = {h, h, h, q_size()};
    for (int k = 0; k < 4; ++k) {
      if (lora) {
        t.push_back(lora_rank * ins[k]);
        t.push_back(outs[k] * lora_rank);
        continue;
      }
      t.push_back(outs[k] * ins[k]);
      if (attention_bias && k < 3) t.push_back(outs[k]);
    }
    if (!lora) {
      for (int k = 0; k < 3; ++k) t.push_back(h * intermediate_size);
      t.push_back(h);
      t.push_back(h);
    }
  }
  if (!lora) t.push_back(h);  // final norm
  if (reward_head) {
    t.push_back(h);
  } else if (!lora && !tie_word_embeddings) {
    t.push_back(vocab_size * h);
  }
  return t;
}

absl::StatusOr<ModelShape> ModelShapeFromConfig(const core::HfModelConfig& c, const std::string& name) {
  auto bad = [&](const char* field, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": field '", field, "' ", why));
  };
  if (c.vocab_size <= 0) return bad("vocab_size", "must be positive");
  if (c.hidden_size <= 0) return bad("hidden_size", "must be positive");
  if (c.intermediate_size <= 0) return bad("intermediate_size", "must be positive");
  if (c.num_hidden_layers <= 0) return bad("num_hidden_layers", "must be positive");
  if (c.num_attention_heads <= 0) return bad("num_attention_heads", "must be positive");
  if (c.num_key_value_heads <= 0 || c.num_attention_heads % c.num_key_value_heads != 0) {
    return bad("num_key_value_heads", "must be positive and divide num_attention_heads");
  }
  ModelShape s;
  s.name = name;
  s.source = "config.json";
  s.vocab_size = c.vocab_size;
  s.hidden_size = c.hidden_size;
  s.intermediate_size = c.intermediate_size;
  s.num_layers = c.num_hidden_layers;
  s.num_heads = c.num_attention_heads;
  s.num_kv_heads = c.num_key_value_heads;
  s.head_dim = c.head_dim > 0 ? c.head_dim : c.hidden_size / c.num_attention_heads;
  s.tie_word_embeddings = c.tie_word_embeddings;
  s.attention_bias = c.attention_bias;
  core::HfModelConfig causal = c;
  causal.architecture = "LlamaForCausalLM";  // count the lm_head variant; reward models add a score head
  causal.head_dim = s.head_dim;
  s.parameter_count = causal.ParameterCount();
  if (s.parameter_count != s.PolicyParameters()) {
    return absl::InternalError(absl::StrCat(name, ": parameter count ", s.parameter_count,
                                            " disagrees with the planner's per-part count ",
                                            s.PolicyParameters()));
  }
  return s;
}

std::vector<std::string> PresetNames() {
  std::vector<std::string> names;
  for (const Preset& p : Presets()) names.push_back(p.name);
  return names;
}

absl::StatusOr<core::HfModelConfig> PresetConfig(const std::string& name) {
  for (const Preset& p : Presets()) {
    if (absl::EqualsIgnoreCase(p.name, name)) return p.config;
  }
  return absl::NotFoundError(
      absl::StrCat("unknown model preset '", name, "' (presets: ", absl::StrJoin(PresetNames(), ", "), ")"));
}

absl::StatusOr<ModelShape> LoadModelShape(const std::string& model) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(model, ec)) {
    auto preset = PresetConfig(model);
    if (!preset.ok()) {
      return absl::NotFoundError(absl::StrCat("--model '", model,
                                              "' is neither a file, a directory nor a preset (",
                                              absl::StrJoin(PresetNames(), ", "), ")"));
    }
    ZF_ASSIGN_OR_RETURN(ModelShape s, ModelShapeFromConfig(*preset, model));
    s.source = "preset";
    for (const Preset& p : Presets()) {
      if (absl::EqualsIgnoreCase(p.name, model)) s.name = p.name;
    }
    return s;
  }
  const bool dir = fs::is_directory(model, ec);
  const std::string config_path = dir ? (fs::path(model) / "config.json").string() : model;
  ZF_ASSIGN_OR_RETURN(core::HfModelConfig config, core::LoadHfConfig(config_path));
  ZF_ASSIGN_OR_RETURN(ModelShape s, ModelShapeFromConfig(config, config_path));
  s.name = model;
  if (!dir) return s;
  bool has_weights = fs::exists(fs::path(model) / "model.safetensors", ec) ||
                     fs::exists(fs::path(model) / "model.safetensors.index.json", ec);
  if (!has_weights) return s;
  // The checkpoint's headers are the ground truth (only the headers are read).
  ZF_ASSIGN_OR_RETURN(core::SafetensorsModel weights, core::SafetensorsModel::Open(model));
  int64_t total = 0;
  bool has_score = false;
  const std::vector<std::string> names = weights.names();
  for (const std::string& n : names) {
    total += weights.Find(n)->numel();
    has_score = has_score || n == "score.weight";
  }
  // A reward-model checkpoint has score.weight instead of lm_head: report the causal-LM count the shape
  // describes, so that the planner can add the head the task needs.
  if (has_score) total = total - config.num_labels * s.hidden_size + s.LmHeadParameters();
  if (total != s.parameter_count) {
    return absl::InvalidArgumentError(absl::StrCat(
        model, ": the safetensors headers hold ", total, " parameters but config.json describes ",
        s.parameter_count, " (a config that does not match its weights)"));
  }
  s.source = absl::StrCat("safetensors headers (", names.size(), " tensors)");
  return s;
}

}  // namespace zerofit::planner
