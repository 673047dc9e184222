// Text and conversational preference pairs read with a Hugging Face tokenizer (qwen2.5; skipped when the
// shared tokenizers are missing).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "worker/data/hf_tokenizer.h"
#include "worker/data/preference_dataset.h"

namespace zerofit::data {
namespace {

using Ids = std::vector<int32_t>;

class HfPreferenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = std::string(ZEROFIT_HF_TOKENIZERS_DIR) + "/qwen2.5";
    if (!std::filesystem::exists(dir + "/tokenizer.json")) GTEST_SKIP() << dir << " is missing";
    auto tok = HfTokenizer::Load(dir);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tok_ = std::move(*tok);
    options_.add_bos = false;  // Qwen has no BOS
    options_.max_length = 0;
  }
  absl::StatusOr<std::vector<PreferencePair>> Parse(const std::string& jsonl) {
    return ParsePreferenceJsonl(jsonl, "t.jsonl", tok_.get(), options_);
  }
  Ids Enc(const std::string& s) { return *tok_->Encode(s); }
  std::string Render(const nlohmann::ordered_json& msgs, bool gen) {
    text::ChatTemplateOptions o;
    o.add_generation_prompt = gen;
    return *tok_->chat_template()->Render(msgs, o);
  }
  Ids WithEos(Ids ids) {
    ids.push_back(tok_->eos_id());
    return ids;
  }
  void ExpectError(const std::string& jsonl, const std::string& want) {
    auto got = Parse(jsonl);
    ASSERT_FALSE(got.ok()) << jsonl;
    EXPECT_NE(std::string(got.status().message()).find(want), std::string::npos) << got.status();
  }

  std::unique_ptr<HfTokenizer> tok_;
  PreferenceDataOptions options_;
};

TEST_F(HfPreferenceTest, TextPairsUseTheTokenizerWithoutSpecials) {
  auto pairs = Parse("{\"prompt\": \"12+7=\", \"chosen\": \" 19\", \"rejected\": \" 18\"}\n");
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  EXPECT_EQ((*pairs)[0].prompt, Enc("12+7="));
  EXPECT_EQ((*pairs)[0].chosen, WithEos(Enc(" 19")));
}

TEST_F(HfPreferenceTest, ConversationalWithExplicitPrompt) {
  const nlohmann::ordered_json prompt =
      nlohmann::ordered_json::parse(R"([{"role":"user","content":"2+2?"}])");
  const nlohmann::ordered_json chosen =
      nlohmann::ordered_json::parse(R"([{"role":"assistant","content":"4"}])");
  const nlohmann::ordered_json rejected =
      nlohmann::ordered_json::parse(R"([{"role":"assistant","content":"5"}])");
  nlohmann::ordered_json line = {{"prompt", prompt}, {"chosen", chosen}, {"rejected", rejected}};
  auto pairs = Parse(line.dump() + "\n");
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  const std::string p = Render(prompt, true);
  nlohmann::ordered_json all = prompt;
  all.push_back(chosen[0]);
  const std::string full = Render(all, false);
  ASSERT_EQ(full.compare(0, p.size(), p), 0);
  EXPECT_EQ((*pairs)[0].prompt, Enc(p));
  EXPECT_EQ((*pairs)[0].chosen, WithEos(Enc(full.substr(p.size()))));
  EXPECT_EQ(full.substr(p.size()), "4<|im_end|>\n");
}

TEST_F(HfPreferenceTest, ConversationalImplicitPromptIsTheSharedPrefix) {
  const std::string implicit =
      R"({"chosen": [{"role":"user","content":"2+2?"},{"role":"assistant","content":"4"}],)"
      R"( "rejected": [{"role":"user","content":"2+2?"},{"role":"assistant","content":"5"}]})";
  const std::string explicit_prompt =
      R"({"prompt": [{"role":"user","content":"2+2?"}], "chosen": [{"role":"assistant","content":"4"}],)"
      R"( "rejected": [{"role":"assistant","content":"5"}]})";
  auto a = Parse(implicit + "\n");
  auto b = Parse(explicit_prompt + "\n");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*a)[0].prompt, (*b)[0].prompt);
  EXPECT_EQ((*a)[0].chosen, (*b)[0].chosen);
  EXPECT_EQ((*a)[0].rejected, (*b)[0].rejected);
}

TEST_F(HfPreferenceTest, MalformedConversationsNameFileLineAndField) {
  ExpectError(
      "\n{\"prompt\": [{\"role\":\"user\",\"content\":\"x\"}], \"chosen\": [], \"rejected\": "
      "[{\"role\":\"assistant\",\"content\":\"y\"}]}\n",
      "t.jsonl:2: field 'chosen': no response messages");
  ExpectError(
      "{\"prompt\": [{\"content\":\"x\"}], \"chosen\": [{\"role\":\"assistant\",\"content\":\"a\"}], "
      "\"rejected\": [{\"role\":\"assistant\",\"content\":\"y\"}]}\n",
      "t.jsonl:1: field 'prompt': message 0");
  ExpectError(
      "{\"chosen\": [{\"role\":\"user\",\"content\":\"a\"}], \"rejected\": "
      "[{\"role\":\"user\",\"content\":\"b\"}]}\n",
      "t.jsonl:1: field 'prompt': missing, and chosen and rejected share no leading messages");
  ExpectError(
      "{\"prompt\": \"x\", \"chosen\": [{\"role\":\"assistant\",\"content\":\"a\"}], "
      "\"rejected\": [{\"role\":\"assistant\",\"content\":\"y\"}]}\n",
      "t.jsonl:1: field 'prompt': expected a list of messages");
  ExpectError("{\"prompt\": \"x\", \"chosen\": \"\", \"rejected\": \"y\"}\n",
              "t.jsonl:1: field 'chosen': empty");
}

TEST_F(HfPreferenceTest, EmptyBlankAndCutFilesAreErrorsWithLine) {
  ExpectError("", "t.jsonl:1: empty file");
  ExpectError("\n  \n\n", "t.jsonl:3: no preference pairs (all 3 lines are blank)");
  ExpectError("{\"prompt\": \"x\", \"chosen\": \"a\", \"rejected\": \"b\"}\n{\"prompt\": \"x\", \"cho",
              "t.jsonl:2: invalid JSON");
  ExpectError("{\"prompt\": \"x\", \"chosen\": \"a\", \"rejected\": \"b\"}\n{\"prompt\": \"x\", \"cho",
              "was the file cut off");
}

}  // namespace
}  // namespace zerofit::data
