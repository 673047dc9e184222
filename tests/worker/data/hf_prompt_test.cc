// GRPO prompt files read with a Hugging Face tokenizer (worker/data/prompt_dataset.h): text prompts get the
// tokenizer's BOS, chat prompts ("messages", or TRL's list of messages under "prompt") are rendered with the
// chat template and its generation prompt (the template writes BOS itself, so no second one), on the
// character-level model directory of char_model_dir.h, whose ids are known without running the tokenizer.
#include <gtest/gtest.h>

#include "nlohmann/json.hpp"
#include "tests/worker/data/char_model_dir.h"
#include "tests/worker/data/test_support.h"
#include "worker/data/hf_tokenizer.h"
#include "worker/data/prompt_dataset.h"

namespace zerofit::data {
namespace {

TEST(HfPromptTest, TextAndChatPromptsWithTheModelsTokenizer) {
  testing::ScopedTempDir dir;
  testing::WriteCharModelDir(dir.path().string());
  absl::StatusOr<std::unique_ptr<HfTokenizer>> tok = HfTokenizer::Load(dir.path().string());
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::string path =
      dir.Write("prompts.jsonl",
                "{\"prompt\": \"2+3=\", \"answer\": \"5\"}\n"
                "{\"messages\": [{\"role\": \"user\", \"content\": \"2+3=\"}], \"answer\": \"5\"}\n"
                "{\"prompt\": [{\"role\": \"user\", \"content\": \"2+3=\"}], \"answer\": 5}\n");
  PromptDataOptions o;
  absl::StatusOr<PromptData> d = LoadPrompts(path, tok->get(), o);
  ASSERT_TRUE(d.ok()) << d.status();
  std::vector<int32_t> text = {testing::kCharBos};
  for (int32_t id : testing::CharIds("2+3=")) text.push_back(id);
  EXPECT_EQ(d->prompts[0].ids, text);
  EXPECT_TRUE(d->prompts[0].messages_json.empty()) << "a text prompt";
  EXPECT_FALSE(d->prompts[1].messages_json.empty()) << "a chat prompt";
  std::vector<int32_t> chat = {testing::kCharBos};  // the template's {{ bos_token }}
  for (int32_t id : testing::CharIds("user: 2+3=\nassistant: ")) chat.push_back(id);
  EXPECT_EQ(d->prompts[1].ids, chat);
  EXPECT_EQ(d->prompts[1].answer.value_or(""), "5");
  EXPECT_EQ(d->prompts[2].ids, chat) << "TRL's conversational prompt: messages under \"prompt\"";
  EXPECT_EQ(d->prompts[2].answer.value_or(""), "5");
  const std::string bad = dir.Write("bad.jsonl", "{\"prompt\": {\"role\": \"user\"}}\n");
  absl::StatusOr<PromptData> refused = LoadPrompts(bad, tok->get(), o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(
      refused.status().message().find(
          "bad.jsonl:1: field 'prompt': expected a string or a list of {role, content} messages, got object"),
      std::string::npos)
      << refused.status();
}

// TRL's `tools` and `chat_template_kwargs` columns reach the chat template of a prompt, as
// apply_chat_template(tools=..., **chat_template_kwargs) passes them; tools may be a JSON string of the list.
TEST(HfPromptTest, ToolsAndChatTemplateKwargsReachTheTemplate) {
  testing::ScopedTempDir dir;
  testing::WriteCharModelDir(dir.path().string());
  testing::WriteCharTemplateWithExtras(dir.path().string());
  absl::StatusOr<std::unique_ptr<HfTokenizer>> tok = HfTokenizer::Load(dir.path().string());
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::string user = R"([{"role": "user", "content": "2+3="}])";
  const std::string path = dir.Write(
      "prompts.jsonl", "{\"prompt\": " + user +
                           ", \"tools\": [{\"name\": \"add\"}, {\"name\": \"sub\"}], \"answer\": 5}\n" +
                           "{\"prompt\": " + user +
                           ", \"tools\": \"[{}, {}]\", \"chat_template_kwargs\": {\"mode\": \"x\"}}\n" +
                           "{\"prompt\": " + user + ", \"tools\": null}\n");
  absl::StatusOr<PromptData> d = LoadPrompts(path, tok->get(), PromptDataOptions{});
  ASSERT_TRUE(d.ok()) << d.status();
  auto ids = [](const std::string& text) {
    std::vector<int32_t> out = {testing::kCharBos};
    for (int32_t id : testing::CharIds(text)) out.push_back(id);
    return out;
  };
  EXPECT_EQ(d->prompts[0].ids, ids("tools:2\nuser: 2+3=\nassistant: "));
  EXPECT_EQ(d->prompts[1].ids, ids("tools:2\nmode:x\nuser: 2+3=\nassistant: "));
  EXPECT_EQ(d->prompts[2].ids, ids("user: 2+3=\nassistant: "));
  // Kept for a reward model's rendering of the completions (chat_response.h).
  EXPECT_EQ(nlohmann::ordered_json::parse(d->prompts[0].messages_json), nlohmann::ordered_json::parse(user));
  EXPECT_EQ(nlohmann::ordered_json::parse(d->prompts[1].chat_extras.kwargs_json)["mode"], "x");
  EXPECT_FALSE(d->prompts[0].chat_extras.tools_json.empty());
  EXPECT_TRUE(d->prompts[2].chat_extras.tools_json.empty());
  for (const auto& [line, want] : std::vector<std::pair<std::string, std::string>>{
           {"{\"prompt\": " + user + ", \"tools\": 5}", "bad.jsonl:1: field 'tools': expected a list"},
           {"{\"prompt\": " + user + ", \"chat_template_kwargs\": [1]}",
            "bad.jsonl:1: field 'chat_template_kwargs': expected an object"},
           {"{\"prompt\": " + user + ", \"tools\": \"not json\"}",
            "bad.jsonl:1: field 'prompt': chat template: tools:"}}) {
    const std::string bad = dir.Write("bad.jsonl", line + "\n");
    absl::StatusOr<PromptData> refused = LoadPrompts(bad, tok->get(), PromptDataOptions{});
    ASSERT_FALSE(refused.ok()) << line;
    EXPECT_NE(std::string(refused.status().message()).find(want), std::string::npos) << refused.status();
  }
}

}  // namespace
}  // namespace zerofit::data
