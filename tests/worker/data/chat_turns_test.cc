// The assistant turns of a conversation, cut out of the chat template's rendering (SFT's
// assistant_only_loss): exactly for Qwen2.5's template, as invariants for every shared template, and the
// templates that write a turn differently once more messages follow are named, not mis-cut.
#include "worker/data/chat_turns.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "worker/data/hf_tokenizer.h"

namespace zerofit::data {
namespace {

using json_line::Json;

const std::string kSource = "t.jsonl";

Json Messages(const char* text) { return Json::parse(text); }

std::unique_ptr<HfTokenizer> LoadShared(const std::string& name) {
  const std::string dir = std::string(ZEROFIT_HF_TOKENIZERS_DIR) + "/" + name;
  if (!std::filesystem::exists(dir + "/tokenizer.json")) return nullptr;
  auto tok = HfTokenizer::Load(dir);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? std::move(*tok) : nullptr;
}

std::string Joined(const std::vector<ChatSpan>& spans) {
  std::string all;
  for (const ChatSpan& s : spans) all += s.text;
  return all;
}

const char* const kTwoTurns = R"([{"role":"system","content":"Be brief."},{"role":"user","content":"2+2?"},
    {"role":"assistant","content":"4"},{"role":"user","content":"and 3+5?"},{"role":"assistant","content":"8"}])";

TEST(ChatTurnsTest, QwensAssistantTurnsAreTheirContentAndEndOfTurn) {
  auto tok = LoadShared("qwen2.5");
  if (tok == nullptr) GTEST_SKIP() << "the shared tokenizers are missing";
  const Json msgs = Messages(kTwoTurns);
  auto spans = ChatSpans(msgs, "messages", tok.get(), json_line::Where{kSource, 1});
  ASSERT_TRUE(spans.ok()) << spans.status();
  ASSERT_EQ(spans->size(), 4u);
  EXPECT_EQ((*spans)[0].text,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ((*spans)[1].text, "4<|im_end|>\n");
  EXPECT_EQ((*spans)[2].text, "<|im_start|>user\nand 3+5?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ((*spans)[3].text, "8<|im_end|>\n");
  for (size_t i = 0; i < spans->size(); ++i) EXPECT_EQ((*spans)[i].assistant, i % 2 == 1) << i;
  EXPECT_EQ(Joined(*spans), *tok->RenderChat(msgs.dump(), false));
}

// Every shared template with a chat template: the spans join to the rendering, there is one assistant span
// per assistant message, starting with its content, and no other span holds an assistant's content.
TEST(ChatTurnsTest, EverySharedTemplateIsCutIntoItsTurns) {
  const Json msgs = Messages(R"([{"role":"user","content":"2+2?"},{"role":"assistant","content":"four"},
      {"role":"user","content":"and 3+5?"},{"role":"assistant","content":"eight"}])");
  int checked = 0;
  for (const char* name : {"qwen2.5", "mistral-v0.3", "tinyllama", "smollm2"}) {
    auto tok = LoadShared(name);
    if (tok == nullptr) continue;
    auto spans = ChatSpans(msgs, "messages", tok.get(), json_line::Where{kSource, 1});
    ASSERT_TRUE(spans.ok()) << name << ": " << spans.status();
    EXPECT_EQ(Joined(*spans), *tok->RenderChat(msgs.dump(), false)) << name;
    std::vector<std::string> assistant;
    for (const ChatSpan& s : *spans) {
      if (s.assistant) assistant.push_back(s.text);
      if (!s.assistant) {
        EXPECT_EQ(s.text.find("four"), std::string::npos) << name << ": " << s.text;
        EXPECT_EQ(s.text.find("eight"), std::string::npos) << name << ": " << s.text;
      }
    }
    ASSERT_EQ(assistant.size(), 2u) << name;
    // What the template writes before the content (Mistral: a space) belongs to the turn; no other message.
    EXPECT_LE(assistant[0].find("four"), 1u) << name << ": " << assistant[0];
    EXPECT_LE(assistant[1].find("eight"), 1u) << name << ": " << assistant[1];
    EXPECT_EQ(assistant[0].find("3+5"), std::string::npos) << name << ": " << assistant[0];
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "the shared tokenizers are missing";
}

// Mistral v0.3's template writes the system message into the LAST user message, so the rendering of the
// first turns is not a prefix of the whole: the turn that cannot be found is named.
TEST(ChatTurnsTest, ATemplateThatRewritesEarlierTurnsIsNamed) {
  auto tok = LoadShared("mistral-v0.3");
  if (tok == nullptr) GTEST_SKIP() << "the shared tokenizers are missing";
  auto spans = ChatSpans(Messages(kTwoTurns), "messages", tok.get(), json_line::Where{kSource, 7});
  ASSERT_FALSE(spans.ok());
  EXPECT_NE(spans.status().message().find("t.jsonl:7: field 'messages': message 2 (assistant): the chat "
                                          "template's rendering of messages 0..1 with the generation prompt "
                                          "is not a prefix"),
            std::string::npos)
      << spans.status();
}

TEST(ChatTurnsTest, ConversationsWithoutAPromptOrAssistantTurn) {
  auto tok = LoadShared("qwen2.5");
  if (tok == nullptr) GTEST_SKIP() << "the shared tokenizers are missing";
  const json_line::Where w{kSource, 3};
  auto first = ChatSpans(Messages(R"([{"role":"assistant","content":"hi"}])"), "messages", tok.get(), w);
  ASSERT_FALSE(first.ok());
  EXPECT_NE(first.status().message().find("t.jsonl:3: field 'messages': message 0 is the assistant's"),
            std::string::npos)
      << first.status();
  auto none = ChatSpans(Messages(R"([{"role":"user","content":"hi"}])"), "messages", tok.get(), w);
  ASSERT_TRUE(none.ok()) << none.status();
  ASSERT_EQ(none->size(), 1u);
  EXPECT_FALSE((*none)[0].assistant);
}

}  // namespace
}  // namespace zerofit::data
