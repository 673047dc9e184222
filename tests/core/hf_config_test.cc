#include "core/hf_config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace zerofit::core {
namespace {

// Public config.json files, verbatim apart from whitespace.
constexpr const char* kLlama2_7b = R"({
  "architectures": ["LlamaForCausalLM"],
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 11008,
  "max_position_embeddings": 4096,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 32,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "tie_word_embeddings": false,
  "torch_dtype": "float16",
  "transformers_version": "4.31.0.dev0",
  "use_cache": true,
  "vocab_size": 32000
})";

constexpr const char* kMistral7b = R"({
  "architectures": ["MistralForCausalLM"],
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 32768,
  "model_type": "mistral",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05,
  "rope_theta": 10000.0,
  "sliding_window": 4096,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.34.0.dev0",
  "use_cache": true,
  "vocab_size": 32000
})";

constexpr const char* kQwen25_05b = R"({
  "architectures": ["Qwen2ForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151643,
  "hidden_act": "silu",
  "hidden_size": 896,
  "initializer_range": 0.02,
  "intermediate_size": 4864,
  "max_position_embeddings": 32768,
  "max_window_layers": 24,
  "model_type": "qwen2",
  "num_attention_heads": 14,
  "num_hidden_layers": 24,
  "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 32768,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.40.1",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";

// Llama-3.1-8B's rope_scaling and list-valued eos_token_id.
constexpr const char* kLlama31_8b = R"({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009],
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3"
  },
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.43.0.dev0",
  "use_cache": true,
  "vocab_size": 128256
})";

HfModelConfig MustParse(const std::string& text, const std::string& source = "config.json") {
  auto c = ParseHfConfig(text, source);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : HfModelConfig{};
}

// A small valid llama config with `extra` fields merged in (later keys override: nlohmann keeps the last).
std::string Tiny(const std::string& extra) {
  std::string s = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 100,
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4)";
  if (!extra.empty()) s += ", " + extra;
  return s + "}";
}

std::string ErrorOf(const std::string& text, const std::string& source = "tiny/config.json") {
  auto c = ParseHfConfig(text, source);
  return c.ok() ? std::string("OK") : std::string(c.status().message());
}

void ExpectSame(const HfModelConfig& a, const HfModelConfig& b) {
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.model_type, b.model_type);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_hidden_layers, b.num_hidden_layers);
  EXPECT_EQ(a.num_attention_heads, b.num_attention_heads);
  EXPECT_EQ(a.num_key_value_heads, b.num_key_value_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  ASSERT_EQ(a.rope_scaling.has_value(), b.rope_scaling.has_value());
  if (a.rope_scaling) {
    EXPECT_EQ(a.rope_scaling->type, b.rope_scaling->type);
    EXPECT_EQ(a.rope_scaling->factor, b.rope_scaling->factor);
    EXPECT_EQ(a.rope_scaling->low_freq_factor, b.rope_scaling->low_freq_factor);
    EXPECT_EQ(a.rope_scaling->high_freq_factor, b.rope_scaling->high_freq_factor);
    EXPECT_EQ(a.rope_scaling->original_max_position_embeddings,
              b.rope_scaling->original_max_position_embeddings);
  }
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.attention_bias, b.attention_bias);
  EXPECT_EQ(a.sliding_window, b.sliding_window);
  EXPECT_EQ(a.num_labels, b.num_labels);
  EXPECT_EQ(a.pad_token_id, b.pad_token_id);
  EXPECT_EQ(a.bos_token_id, b.bos_token_id);
  EXPECT_EQ(a.eos_token_id, b.eos_token_id);
  EXPECT_EQ(a.more_eos_token_ids, b.more_eos_token_ids);
  EXPECT_EQ(a.torch_dtype, b.torch_dtype);
  EXPECT_EQ(a.ParameterCount(), b.ParameterCount());
}

TEST(HfConfigTest, Llama2_7b) {
  const HfModelConfig c = MustParse(kLlama2_7b);
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_key_value_heads, 32);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.rope_theta, 10000.0);  // default
  EXPECT_FALSE(c.rope_scaling.has_value());
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.sliding_window.has_value());
  EXPECT_FALSE(c.is_sequence_classification());
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);
  EXPECT_FALSE(c.pad_token_id.has_value());
  EXPECT_EQ(c.torch_dtype, "float16");
  EXPECT_EQ(c.ParameterCount(), 6'738'415'616);
}

TEST(HfConfigTest, Mistral7b) {
  const HfModelConfig c = MustParse(kMistral7b);
  EXPECT_EQ(c.model_type, "mistral");
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.ParameterCount(), 7'241'732'096);
}

TEST(HfConfigTest, Qwen25_05b) {
  const HfModelConfig c = MustParse(kQwen25_05b);
  EXPECT_EQ(c.model_type, "qwen2");
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_TRUE(c.attention_bias);  // Qwen2's default
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_FALSE(c.sliding_window.has_value());  // use_sliding_window is false
  EXPECT_EQ(c.ParameterCount(), 494'032'768);
}

TEST(HfConfigTest, Llama31RopeScalingAndEosList) {
  const HfModelConfig c = MustParse(kLlama31_8b);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->type, "llama3");
  EXPECT_EQ(c.rope_scaling->factor, 8.0);
  EXPECT_EQ(c.rope_scaling->low_freq_factor, 1.0);
  EXPECT_EQ(c.rope_scaling->high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 8192);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.eos_token_id, 128001);  // first of the list
  EXPECT_EQ(c.more_eos_token_ids, (std::vector<int64_t>{128008, 128009}));
  // An export writes the whole list back: transformers' generate stops at <|eot_id|> (128009) only if it is
  // there (the first entry alone made a fine-tuned Llama 3.1 Instruct talk past the end of its turn).
  const nlohmann::ordered_json written = nlohmann::ordered_json::parse(HfConfigToJson(c));
  EXPECT_EQ(written["eos_token_id"], nlohmann::ordered_json::parse("[128001, 128008, 128009]"));
  EXPECT_TRUE(
      nlohmann::ordered_json::parse(HfConfigToJson(MustParse(kLlama2_7b)))["eos_token_id"].is_number());
  EXPECT_EQ(c.ParameterCount(), 8'030'261'248);  // Llama-3.1-8B
}

// transformers 5 moved rope_theta and rope_scaling into "rope_parameters" and writes "layer_types": a Qwen2
// config.json as transformers 5.17 saved it (scripts/make_generation_golden.py). Read with the top-level
// default, its rope_theta was 10000 instead of 1e6 and greedy generation left transformers' tokens.
TEST(HfConfigTest, Transformers5RopeParametersAndLayerTypes) {
  const std::string qwen2_v5 = R"({"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0,
    "bos_token_id": 1, "dtype": "float32", "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 32,
    "initializer_range": 0.02, "intermediate_size": 64, "layer_types": ["full_attention", "full_attention"],
    "max_position_embeddings": 64, "max_window_layers": 28, "model_type": "qwen2", "num_attention_heads": 4,
    "num_hidden_layers": 2, "num_key_value_heads": 2, "pad_token_id": null, "rms_norm_eps": 1e-06,
    "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"}, "sliding_window": null,
    "tie_word_embeddings": true, "transformers_version": "5.17.0", "use_cache": true,
    "use_sliding_window": false, "vocab_size": 64})";
  HfModelConfig c = MustParse(qwen2_v5);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_FALSE(c.rope_scaling.has_value());
  EXPECT_FALSE(c.sliding_window.has_value());
  EXPECT_EQ(c.torch_dtype, "float32");

  // Llama 3.1's scaling inside rope_parameters, as transformers 5 writes it.
  c = MustParse(Tiny(R"("rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
      "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})"));
  EXPECT_EQ(c.rope_theta, 500000.0);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->type, "llama3");
  EXPECT_EQ(c.rope_scaling->factor, 8.0);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 8192);
  // Both forms, agreeing (a config converted by hand keeps the old keys too).
  c = MustParse(Tiny(R"("rope_theta": 5e5, "rope_scaling": {"type": "linear", "factor": 2},
      "rope_parameters": {"rope_type": "linear", "factor": 2, "rope_theta": 5e5})"));
  EXPECT_EQ(c.rope_theta, 5e5);
  EXPECT_EQ(c.rope_scaling->type, "linear");

  // A Qwen2 window that layer_types applies to no layer (max_window_layers past the last) is no window.
  const std::string qwen2_window = R"({"model_type": "qwen2", "vocab_size": 10, "hidden_size": 16,
    "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "use_sliding_window": true,
    "sliding_window": 8, "layer_types": )";
  EXPECT_FALSE(MustParse(qwen2_window + R"(["full_attention", "full_attention"]})").sliding_window);
  EXPECT_EQ(MustParse(qwen2_window + R"(["sliding_attention", "sliding_attention"]})").sliding_window, 8);
  EXPECT_NE(
      ErrorOf(qwen2_window + R"(["full_attention", "sliding_attention"]})")
          .find("field 'layer_types': 1 of 2 layers use a sliding window and the others full attention"),
      std::string::npos);
}

TEST(HfConfigTest, DefaultsAndVariants) {
  // No architectures: the model type picks the causal LM; defaults as in transformers.
  HfModelConfig c = MustParse(R"({"model_type": "qwen2", "vocab_size": 10, "hidden_size": 16,
      "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2})");
  EXPECT_EQ(c.architecture, "Qwen2ForCausalLM");
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.max_position_embeddings, 32768);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.tie_word_embeddings);

  c = MustParse(Tiny(""));
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_FALSE(c.attention_bias);
  // pad_token_id -1 (old Llama conversions) means none, as transformers reads it.
  c = MustParse(Tiny(R"("pad_token_id": -1)"));
  EXPECT_FALSE(c.pad_token_id.has_value());
  c = MustParse(Tiny(R"("attention_bias": true)"));
  EXPECT_TRUE(c.attention_bias);
  // Explicit head_dim need not divide hidden_size (Mistral-Nemo style).
  c = MustParse(Tiny(R"("num_attention_heads": 3, "num_key_value_heads": 1, "head_dim": 32)"));
  EXPECT_EQ(c.head_dim, 32);
  // Old-style "type" key; "default" means no scaling.
  c = MustParse(Tiny(R"("rope_scaling": {"type": "linear", "factor": 2})"));
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->type, "linear");
  EXPECT_EQ(c.rope_scaling->factor, 2.0);
  c = MustParse(Tiny(R"("rope_scaling": {"rope_type": "default"})"));
  EXPECT_FALSE(c.rope_scaling.has_value());
  // Mistral: sliding_window defaults to 4096; null disables it.
  const std::string mistral = R"({"model_type": "mistral", "vocab_size": 10, "hidden_size": 16,
      "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2)";
  c = MustParse(mistral + "}");
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.architecture, "MistralForCausalLM");
  c = MustParse(mistral + R"(, "sliding_window": null})");
  EXPECT_FALSE(c.sliding_window.has_value());
  // Newer transformers write "dtype".
  c = MustParse(Tiny(R"("dtype": "bfloat16")"));
  EXPECT_EQ(c.torch_dtype, "bfloat16");
}

TEST(HfConfigTest, SequenceClassification) {
  std::string text = kLlama2_7b;
  text.replace(text.find("LlamaForCausalLM"), 16, "LlamaForSequenceClassification");
  text.insert(text.rfind('}'),
              R"(, "id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}, "pad_token_id": 0)");
  const HfModelConfig c = MustParse(text);
  EXPECT_TRUE(c.is_sequence_classification());
  EXPECT_EQ(c.num_labels, 1);
  EXPECT_EQ(c.pad_token_id, 0);
  // The lm_head (32000 x 4096) is replaced by a 1 x 4096 score head.
  EXPECT_EQ(c.ParameterCount(), 6'738'415'616 - 32000LL * 4096 + 4096);

  // transformers' default is two labels.
  HfModelConfig d =
      MustParse(Tiny(R"("architectures": ["Qwen2ForSequenceClassification"], "model_type": "qwen2")"));
  EXPECT_EQ(d.num_labels, 2);
  d = MustParse(Tiny(R"("architectures": ["MistralForSequenceClassification"], "model_type": "mistral",
      "num_labels": 3)"));
  EXPECT_EQ(d.num_labels, 3);
}

TEST(HfConfigTest, ErrorsNameFileAndField) {
  struct Case {
    std::string text;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {Tiny(R"("num_key_value_heads": 3)"),
       "tiny/config.json: field 'num_key_value_heads': 3 does not divide num_attention_heads 4"},
      {Tiny(R"("num_attention_heads": 5)"),
       "tiny/config.json: field 'num_attention_heads': 5 does not divide hidden_size 64"},
      {R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 100, "intermediate_size": 128,
          "num_hidden_layers": 2, "num_attention_heads": 4})",
       "tiny/config.json: field 'hidden_size' is missing"},
      {Tiny(R"("hidden_size": "64")"),
       "tiny/config.json: field 'hidden_size': expected an integer, got string \"64\""},
      {Tiny(R"("hidden_size": 64.5)"), "field 'hidden_size': expected an integer, got number 64.5"},
      {Tiny(R"("num_hidden_layers": 0)"), "field 'num_hidden_layers': must be a positive integer, got 0"},
      {Tiny(R"("vocab_size": -5)"), "field 'vocab_size': must be a positive integer, got -5"},
      {Tiny(R"("vocab_size": 18446744073709551615)"),
       "field 'vocab_size': 18446744073709551615 is out of range"},
      {Tiny(R"("architectures": ["GPT2LMHeadModel"])"),
       "field 'architectures': unsupported architecture 'GPT2LMHeadModel' (supported: LlamaForCausalLM, "
       "LlamaForSequenceClassification, MistralForCausalLM, MistralForSequenceClassification, "
       "Qwen2ForCausalLM, Qwen2ForSequenceClassification)"},
      {Tiny(R"("architectures": "LlamaForCausalLM")"), "field 'architectures': expected a list of strings"},
      {Tiny(R"("model_type": "qwen2")"),
       "field 'model_type': 'qwen2' does not match architecture 'LlamaForCausalLM' (expects 'llama')"},
      {R"({"model_type": "gpt2", "vocab_size": 1})", "field 'model_type': unsupported model type 'gpt2'"},
      {R"({"vocab_size": 1})", "fields 'architectures' and 'model_type' are both missing"},
      {Tiny(R"("rms_norm_eps": 0)"), "field 'rms_norm_eps': must be positive, got 0"},
      {Tiny(R"("rope_theta": "big")"), "field 'rope_theta': expected a number, got string"},
      {Tiny(R"("tie_word_embeddings": "yes")"),
       "field 'tie_word_embeddings': expected a boolean, got string"},
      {Tiny(R"("torch_dtype": 16)"), "field 'torch_dtype': expected a string, got number"},
      {Tiny(R"("rope_scaling": {"type": "linear"})"), "field 'rope_scaling.factor' is missing"},
      {Tiny(R"("rope_scaling": {"rope_type": "dynamic", "factor": 0})"),
       "field 'rope_scaling.factor': must be positive, got 0"},
      {Tiny(R"("rope_scaling": {"rope_type": "llama3", "factor": 8, "high_freq_factor": 4,
          "original_max_position_embeddings": 8192})"),
       "field 'rope_scaling.low_freq_factor' is missing"},
      {Tiny(
           R"("rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 4, "high_freq_factor": 4,
          "original_max_position_embeddings": 8192})"),
       "field 'rope_scaling.high_freq_factor': 4 must exceed low_freq_factor 4"},
      {Tiny(R"("rope_scaling": {"rope_type": "yarn", "factor": 4})"),
       "field 'rope_scaling.rope_type': unsupported type 'yarn' (supported: default, linear, dynamic, "
       "llama3)"},
      {Tiny(R"("rope_scaling": {"factor": 4})"), "field 'rope_scaling': has neither 'rope_type' nor 'type'"},
      {Tiny(R"("rope_scaling": 2)"), "field 'rope_scaling': expected an object or null, got number"},
      {Tiny(R"("rope_parameters": {"rope_type": "yarn", "rope_theta": 1e6, "factor": 4})"),
       "field 'rope_parameters.rope_type': unsupported type 'yarn'"},
      {Tiny(R"("rope_parameters": {"rope_type": "default", "rope_theta": -1})"),
       "field 'rope_parameters.rope_theta': must be positive, got -1"},
      {Tiny(R"("rope_theta": 1e4, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6})"),
       "field 'rope_parameters.rope_theta': 1e+06 disagrees with the top-level rope_theta 10000"},
      {Tiny(
           R"("rope_scaling": {"type": "linear", "factor": 2}, "rope_parameters": {"rope_type": "default"})"),
       "field 'rope_parameters': disagrees with field 'rope_scaling'"},
      {Tiny(R"("rope_parameters": {"full_attention": {"rope_type": "default"}})"),
       "field 'rope_parameters': has neither 'rope_type' nor 'type'"},
      {Tiny(R"("layer_types": ["full_attention"])"), "field 'layer_types': has 1 entries for 2 layers"},
      {Tiny(R"("layer_types": ["full_attention", "chunked_attention"])"),
       "field 'layer_types': entry \"chunked_attention\" is not"},
      {Tiny(R"("layer_types": ["sliding_attention", "sliding_attention"])"),
       "field 'layer_types': says sliding_attention but the config gives no sliding_window"},
      {Tiny(R"("hidden_act": "gelu")"), "field 'hidden_act': 'gelu' is not supported"},
      {Tiny(R"("mlp_bias": true)"), "field 'mlp_bias': true is not supported"},
      {Tiny(R"("id2label": {"0": "a", "1": "b"}, "num_labels": 3)"),
       "field 'num_labels': 3 disagrees with id2label, which has 2 entries"},
      {Tiny(R"("eos_token_id": "</s>")"), "field 'eos_token_id': expected an integer, got string"},
      {Tiny(R"("hidden_size": 4611686018427387904, "intermediate_size": 4611686018427387904)"),
       "field 'hidden_size': 4611686018427387904 exceeds the limit of 262144"},
      // Sizes are bounded before anything is allocated from them (zerofit plan died of bad_alloc).
      {Tiny(R"("num_hidden_layers": 2147483648)"),
       "field 'num_hidden_layers': 2147483648 exceeds the limit of 4096"},
      {Tiny(R"("max_position_embeddings": 4611686018427387904)"),
       "field 'max_position_embeddings': 4611686018427387904 exceeds the limit of 16777216"},
      {Tiny(R"("vocab_size": 1000000000)"), "field 'vocab_size': 1000000000 exceeds the limit of 16777216"},
      {Tiny(R"("rope_theta": 1e400)"), "not valid JSON"},
      // Fields zerofit does not use are still typed.
      {Tiny(R"("initializer_range": "abc")"),
       "field 'initializer_range': expected a number, got string \"abc\""},
      {Tiny(R"("initializer_range": [0.02])"), "field 'initializer_range': expected a number, got array"},
      {Tiny(R"("use_cache": 1)"), "field 'use_cache': expected a boolean, got number"},
      {Tiny(R"("model_type": "")"), "field 'model_type': is empty"},
      // Token ids lie in the vocabulary (vocab_size is 100 here).
      {Tiny(R"("bos_token_id": 100)"),
       "field 'bos_token_id': 100 is not a token id of the vocabulary [0, vocab_size = 100)"},
      {Tiny(R"("bos_token_id": -1)"), "field 'bos_token_id': -1 is not a token id"},
      {Tiny(R"("eos_token_id": [2, 1000])"), "field 'eos_token_id': entry 1: 1000 is not a token id"},
      {Tiny(R"("pad_token_id": 1000000000000)"), "field 'pad_token_id': 1000000000000 is not a token id"},
      {Tiny(R"("pad_token_id": -2)"), "field 'pad_token_id': -2 is not a token id"},

      {"{\"hidden_size\": ", "tiny/config.json: not valid JSON"},
      {"[1]", "tiny/config.json: expected a JSON object, got array"},
  };
  for (const Case& c : cases) {
    const std::string msg = ErrorOf(c.text);
    EXPECT_EQ(msg.rfind("tiny/config.json: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.text << "\n got: " << msg;
  }
  // JSON nesting is bounded before parsing: 100,000 levels overflowed the stack when an error dumped them.
  EXPECT_EQ(ErrorOf(Tiny("\"x\": " + std::string(100000, '[') + std::string(100000, ']'))),
            "tiny/config.json:2: JSON nested deeper than 64 levels");
}

TEST(HfConfigTest, ToJsonRoundTrip) {
  std::vector<std::string> texts = {
      kLlama2_7b,
      kMistral7b,
      kQwen25_05b,
      kLlama31_8b,
      Tiny(R"("architectures": ["LlamaForSequenceClassification"], "num_labels": 1,
                                           "rope_scaling": {"type": "dynamic", "factor": 2.5}, "pad_token_id": 0)"),
      R"({"model_type": "mistral", "vocab_size": 10, "hidden_size": 16,
                                        "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                                        "sliding_window": null, "head_dim": 4})",
      R"({"model_type": "qwen2", "vocab_size": 10, "hidden_size": 16,
                                        "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                                        "use_sliding_window": true, "sliding_window": 128,
                                        "architectures": ["Qwen2ForSequenceClassification"], "num_labels": 4})"};
  for (const std::string& text : texts) {
    const HfModelConfig a = MustParse(text);
    const std::string json = HfConfigToJson(a);
    auto b = ParseHfConfig(json, "exported/config.json");
    ASSERT_TRUE(b.ok()) << b.status() << "\n" << json;
    ExpectSame(a, *b);
    EXPECT_NE(json.find("\"architectures\""), std::string::npos);
    EXPECT_NE(json.find("\"model_type\""), std::string::npos);
  }
}

TEST(HfConfigTest, LoadFromFileOrDirectory) {
  namespace fs = std::filesystem;
  std::string tmpl = (fs::temp_directory_path() / "zerofit_cfg_XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const fs::path dir = tmpl;
  {
    std::ofstream out(dir / "config.json");
    out << kQwen25_05b;
  }
  auto c = LoadHfConfig(dir.string());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ParameterCount(), 494'032'768);
  c = LoadHfConfig((dir / "config.json").string());
  ASSERT_TRUE(c.ok()) << c.status();
  {
    std::ofstream out(dir / "config.json");
    out << Tiny(R"("num_key_value_heads": 3)");
  }
  c = LoadHfConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find((dir / "config.json").string() + ": field 'num_key_value_heads'"),
            std::string::npos)
      << c.status();
  c = LoadHfConfig((dir / "missing.json").string());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("missing.json"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace zerofit::core
