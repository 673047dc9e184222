// The tiny Llama-family configuration the LibTorch model tests build their random models from: hidden 32,
// 2 layers, 4 heads with 2 kv heads (grouped-query attention), head_dim 8, vocab 50. "qwen2" adds Qwen2's
// attention biases and tied LM head; any other model_type keeps Llama's architecture name.
#pragma once

#include <string>

#include "core/hf_config.h"

namespace zerofit::test_support {

inline core::HfModelConfig TinyLlamaConfig(const std::string& model_type = "llama") {
  core::HfModelConfig c;
  c.model_type = model_type;
  c.architecture = model_type == "qwen2" ? "Qwen2ForCausalLM" : "LlamaForCausalLM";
  c.vocab_size = 50;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = 64;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 10000.0;
  if (model_type == "qwen2") {
    c.attention_bias = true;
    c.tie_word_embeddings = true;
  }
  return c;
}

}  // namespace zerofit::test_support
