// Fuzz target: preference JSONL parsing (text, pre-tokenized and conversational lines), with a byte-level
// fake tokenizer whose chat template is a small real one, on two threads (the parallel path), and without
// a tokenizer. Seeds: corpus/preference_jsonl.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "text/chat_template.h"
#include "worker/data/preference_dataset.h"
#include "worker/data/tokenizer.h"

namespace {

// Ids: byte + 3; 0 pad, 1 BOS, 2 EOS.
class ByteTokenizer final : public zerofit::data::Tokenizer {
 public:
  ByteTokenizer()
      : chat_(*zerofit::text::ChatTemplate::Parse(
            "{% if tools %}<|tools|>{{ tools|tojson }}\n{% endif %}{% if mode %}<|mode|>{{ mode }}\n{% endif "
            "%}"
            "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")) {}
  absl::StatusOr<std::vector<int32_t>> Encode(const std::string& text) const override {
    std::vector<int32_t> ids;
    for (unsigned char c : text) ids.push_back(static_cast<int32_t>(c) + 3);
    return ids;
  }
  absl::StatusOr<std::string> Decode(const std::vector<int32_t>& ids) const override {
    std::string s;
    for (int32_t id : ids) {
      if (id < 0 || id >= vocab_size()) return absl::InvalidArgumentError("id out of range");
      if (id >= 3) s.push_back(static_cast<char>(id - 3));
    }
    return s;
  }
  absl::StatusOr<std::string> RenderChat(const std::string& messages_json, bool add_generation_prompt,
                                         const zerofit::data::ChatExtras& extras) const override {
    zerofit::text::ChatTemplateOptions options;
    options.add_generation_prompt = add_generation_prompt;
    options.limits.max_steps = 1 << 16;
    // The line's tools and kwargs (ChatExtrasOf checked their types): the template sees them.
    if (!extras.tools_json.empty()) options.tools = nlohmann::ordered_json::parse(extras.tools_json);
    if (!extras.kwargs_json.empty()) options.extra = nlohmann::ordered_json::parse(extras.kwargs_json);
    return chat_.Render(nlohmann::ordered_json::parse(messages_json), options);
  }
  int32_t bos_id() const override { return 1; }
  int32_t eos_id() const override { return 2; }
  int32_t pad_id() const override { return 0; }
  int32_t vocab_size() const override { return 259; }

 private:
  zerofit::text::ChatTemplate chat_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace zerofit::data;
  static const ByteTokenizer* const tok = new ByteTokenizer();  // immutable, shared by all inputs
  const std::string contents(reinterpret_cast<const char*>(data), size);
  PreferenceDataOptions options;
  options.max_length = 64;
  options.max_prompt_length = 32;
  options.threads = 2;
  PreferenceDataStats stats;
  (void)ParsePreferenceJsonl(contents, "fuzz.jsonl", tok, options, &stats);
  options.sft = true;  // the same lines as SFT examples (sft_example.h)
  (void)ParsePreferenceJsonl(contents, "fuzz.jsonl", tok, options, &stats);
  options.assistant_only_loss = true;  // their assistant turns (chat_turns.h): one flag per chosen token
  auto turns = ParsePreferenceJsonl(contents, "fuzz.jsonl", tok, options, &stats);
  for (const PreferencePair& p : turns.ok() ? *turns : std::vector<PreferencePair>{}) {
    if (!p.chosen_scored.empty() && p.chosen_scored.size() != p.chosen.size()) __builtin_trap();
  }
  PreferenceDataOptions no_tok;
  no_tok.threads = 1;
  no_tok.max_length = 0;
  no_tok.bos_id = 1;
  no_tok.eos_id = 2;
  no_tok.vocab_size = 259;
  (void)ParsePreferenceJsonl(contents, "fuzz.jsonl", nullptr, no_tok);
  no_tok.sft = true;
  (void)ParsePreferenceJsonl(contents, "fuzz.jsonl", nullptr, no_tok);
  return 0;
}
