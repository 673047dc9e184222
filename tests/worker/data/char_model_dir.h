// A tiny Hugging Face model directory for tests that need no downloaded files: a character-level BPE
// tokenizer.json (no merges: one token per character, so the ids of a text are known without running the
// tokenizer), tokenizer_config.json with <s>/</s>, add_bos_token and a chat template that writes bos_token,
// and a two-layer Llama config.json over that vocabulary.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace zerofit::data::testing {

// Ids 0 and 1 are <s> and </s>; then these characters in order.
inline const std::string& CharModelAlphabet() {
  static const std::string kChars = " 0123456789+-=:\nabcdefghijklmnopqrstuvwxyz";
  return kChars;
}

inline constexpr int32_t kCharBos = 0, kCharEos = 1;

inline int32_t CharModelVocabSize() { return static_cast<int32_t>(CharModelAlphabet().size()) + 2; }

// The ids of `text` (characters of the alphabet only), found without the tokenizer.
inline std::vector<int32_t> CharIds(const std::string& text) {
  std::vector<int32_t> ids;
  for (char c : text) ids.push_back(static_cast<int32_t>(CharModelAlphabet().find(c)) + 2);
  return ids;
}

// A chat_template.jinja for the char model directory (it replaces tokenizer_config.json's template) that
// shows what reaches it besides the messages: "tools:N\n" when tools are given, "mode:M\n" for the
// template variable `mode` (chat_template_kwargs), then the same lines as the config's template.
inline void WriteCharTemplateWithExtras(const std::string& dir) {
  std::ofstream(dir + "/chat_template.jinja", std::ios::binary)
      << "{{ bos_token }}{% if tools %}tools:{{ tools|length }}\n{% endif %}{% if mode %}mode:{{ mode }}\n{% "
         "endif %}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}{% if "
         "add_generation_prompt %}assistant: {% endif %}";
}

inline void WriteCharModelDir(const std::string& dir) {
  nlohmann::ordered_json vocab = {{"<s>", 0}, {"</s>", 1}};
  for (size_t i = 0; i < CharModelAlphabet().size(); ++i) {
    vocab[std::string(1, CharModelAlphabet()[i])] = static_cast<int>(i) + 2;
  }
  auto added = [](int id, const char* content) {
    return nlohmann::ordered_json{{"id", id},        {"content", content}, {"single_word", false},
                                  {"lstrip", false}, {"rstrip", false},    {"normalized", false},
                                  {"special", true}};
  };
  const nlohmann::ordered_json tokenizer = {
      {"version", "1.0"},
      {"added_tokens", {added(0, "<s>"), added(1, "</s>")}},
      {"normalizer", nullptr},
      {"pre_tokenizer", nullptr},
      {"post_processor", nullptr},
      {"decoder", nullptr},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::ordered_json::array()}}}};
  std::ofstream(dir + "/tokenizer.json") << tokenizer.dump(1);
  const nlohmann::ordered_json config = {
      {"bos_token", "<s>"},
      {"eos_token", "</s>"},
      {"add_bos_token", true},
      {"chat_template",
       "{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
       "{% if add_generation_prompt %}assistant: {% endif %}"}};
  std::ofstream(dir + "/tokenizer_config.json") << config.dump(1);
  const nlohmann::ordered_json model = {{"architectures", {"LlamaForCausalLM"}},
                                        {"model_type", "llama"},
                                        {"vocab_size", CharModelVocabSize()},
                                        {"hidden_size", 32},
                                        {"intermediate_size", 64},
                                        {"num_hidden_layers", 2},
                                        {"num_attention_heads", 4},
                                        {"num_key_value_heads", 2},
                                        {"max_position_embeddings", 128},
                                        {"rms_norm_eps", 1e-6},
                                        {"bos_token_id", kCharBos},
                                        {"eos_token_id", kCharEos},
                                        {"tie_word_embeddings", false}};
  std::ofstream(dir + "/config.json") << model.dump(1);
}

}  // namespace zerofit::data::testing
