#include "cli/data_check_command.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace zerofit::cli {
namespace {

class DataCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = std::string(ZEROFIT_HF_TOKENIZERS_DIR) + "/qwen2.5";
    if (!std::filesystem::exists(dir + "/tokenizer.json")) GTEST_SKIP() << dir << " is missing";
    auto tok = data::HfTokenizer::Load(dir);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tok_ = std::move(*tok);
    path_ = (std::filesystem::temp_directory_path() / ("data_check_" + std::to_string(::getpid()) + ".jsonl"))
                .string();
  }
  void TearDown() override { std::filesystem::remove(path_); }
  void Write(const std::string& s) { std::ofstream(path_) << s; }
  const data::DataLint& Lint(const data::DataReport& r, const std::string& prefix) {
    for (const data::DataLint& l : r.lints) {
      if (l.name.rfind(prefix, 0) == 0) return l;
    }
    ADD_FAILURE() << "no lint " << prefix;
    return r.lints[0];
  }

  std::unique_ptr<data::HfTokenizer> tok_;
  std::string path_;
};

TEST_F(DataCheckTest, CountsLengthsTruncationAndLints) {
  // Pair 3 repeats its response; pair 2 is long enough to be truncated at max_length 8.
  Write(
      "{\"prompt\": \"1+1=\", \"chosen\": \"2\", \"rejected\": \"3\"}\n"
      "{\"prompt\": \"Tell me a story\", \"chosen\": \"Once upon a time there was a cat who\", \"rejected\": "
      "\"No\"}\n"
      "{\"prompt\": \"x\", \"chosen\": \"same\", \"rejected\": \"same\"}\n");
  data::PreferenceDataOptions o;
  o.add_bos = false;
  o.max_length = 8;
  o.max_prompt_length = 4;
  auto r = CheckPreferenceData(path_, *tok_, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->pairs, 3u);
  EXPECT_EQ(r->truncated_pairs, 1u);
  EXPECT_GT(r->sequence.max, 8u);
  EXPECT_EQ(Lint(*r, "pairs with chosen == rejected").count, 1u);
  EXPECT_EQ(Lint(*r, "responses that lose their EOS").count, 1u);  // only the long chosen
  EXPECT_EQ(Lint(*r, "prompts starting with a doubled BOS").count, 0u);
  EXPECT_EQ(Lint(*r, "pad == eos").count, 0u);  // Qwen pads with <|endoftext|>, ends with <|im_end|>
  const std::string text = data::FormatDataReport(*r, path_, false);
  EXPECT_NE(text.find("truncated at max_length 8: 1 of 3 pairs"), std::string::npos) << text;
  EXPECT_NE(text.find("-> remove them"), std::string::npos) << text;
  EXPECT_NE(data::FormatDataReport(*r, path_, true).find("\"truncated_pairs\": 1"), std::string::npos);
}

TEST_F(DataCheckTest, LoadErrorsNameFileAndLine) {
  Write("{\"prompt\": \"x\", \"chosen\": \"a\", \"rejected\": \"b\"}\n{\"prompt\": 3}\n");
  data::PreferenceDataOptions o;
  o.add_bos = false;
  auto r = CheckPreferenceData(path_, *tok_, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find(path_ + ":2: field 'prompt'"), std::string::npos)
      << r.status();
}

// --sft: SFT examples in TRL's formats (Qwen2.5's chat template for messages), counted as examples, with no
// rejected response to lint; --prompts and --sft together are refused.
TEST_F(DataCheckTest, SftFilesAreCountedAsExamples) {
  Write(
      "{\"messages\": [{\"role\": \"user\", \"content\": \"2+2?\"}, {\"role\": \"assistant\", "
      "\"content\": \"4\"}]}\n"
      "{\"prompt\": \"Tell me a story\", \"completion\": \"Once upon a time there was a cat who\"}\n"
      "{\"text\": \"same\"}\n");
  DataCheckFlags flags;
  flags.file = path_;
  flags.tokenizer_dir = std::string(ZEROFIT_HF_TOKENIZERS_DIR) + "/qwen2.5";
  flags.max_length = 8;
  flags.max_prompt_length = 4;
  flags.sft = true;
  auto text = RunDataCheck(flags);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find(": 3 examples (add_bos false"), std::string::npos) << *text;
  EXPECT_NE(text->find("truncated at max_length 8: 2 of 3 examples"), std::string::npos) << *text;
  EXPECT_EQ(text->find("chosen == rejected"), std::string::npos) << *text;
  flags.max_prompt_length = 0;  // the default: half of --max-length, as training (256 had refused 8)
  EXPECT_TRUE(RunDataCheck(flags).ok());
  flags.sft = false;
  auto as_pairs = RunDataCheck(flags);
  ASSERT_FALSE(as_pairs.ok());
  EXPECT_NE(as_pairs.status().message().find(path_ + ":1: an SFT example"), std::string::npos)
      << as_pairs.status();
  flags.sft = flags.prompts = true;
  EXPECT_FALSE(RunDataCheck(flags).ok());
  // --assistant-only-loss: the text lines have no assistant turn to score, and the first is named.
  flags.prompts = false;
  flags.assistant_only_loss = true;
  auto assistant_only = RunDataCheck(flags);
  ASSERT_FALSE(assistant_only.ok());
  EXPECT_NE(assistant_only.status().message().find(path_ + ":2: field 'completion': assistant_only_loss"),
            std::string::npos)
      << assistant_only.status();
  flags.sft = false;
  EXPECT_NE(RunDataCheck(flags).status().message().find("add --sft"), std::string::npos);
}

// --eos-token and --chat-template check the data as a job with data.eos_token and data.chat_template reads
// it: GPT-2, which has no template, reads conversations with Qwen's (but cannot take Qwen's <|im_end|> as its
// EOS: not in its vocabulary); Qwen's template ends turns with <|im_end|>, so making <|endoftext|> the EOS
// leaves chat renderings without one, and the lint says so.
TEST_F(DataCheckTest, TheTokenizerOverridesAreCheckedAsTheJobReadsThem) {
  const std::string hf = ZEROFIT_HF_TOKENIZERS_DIR;
  if (!std::filesystem::exists(hf + "/gpt2/tokenizer.json")) GTEST_SKIP() << "gpt2 is missing";
  Write(R"({"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]})"
        "\n");
  DataCheckFlags flags;
  flags.file = path_;
  flags.sft = true;
  flags.json = true;
  flags.tokenizer_dir = hf + "/gpt2";
  flags.overrides.eos_token = "<|endoftext|>";  // this copy of GPT-2's config names no EOS
  auto bare = RunDataCheck(flags);
  ASSERT_FALSE(bare.ok());
  EXPECT_NE(bare.status().message().find("conversational data needs one"), std::string::npos)
      << bare.status();
  flags.overrides.chat_template = hf + "/qwen2.5";
  auto templated = RunDataCheck(flags);
  ASSERT_TRUE(templated.ok()) << templated.status();
  flags.overrides.eos_token = "<|im_end|>";
  auto unknown = RunDataCheck(flags);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("eos_token \"<|im_end|>\" is not a token of " + hf + "/gpt2"),
            std::string::npos)
      << unknown.status();

  auto lint = [](const std::string& json) {
    const nlohmann::json report = nlohmann::json::parse(json);
    for (const auto& l : report["lints"]) {
      if (l["check"] == "chat-rendered responses that never hold the EOS token") return l["count"].get<int>();
    }
    return -1;
  };
  flags.tokenizer_dir = hf + "/qwen2.5";
  flags.overrides = {};
  auto own = RunDataCheck(flags);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(lint(*own), 0);
  flags.overrides.eos_token = "<|endoftext|>";
  auto other = RunDataCheck(flags);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(lint(*other), 1);
}

// --prompts: a GRPO prompt file, measured as the run would read it (text and chat with Qwen2.5's template),
// and a bad line named by file, line and field.
TEST_F(DataCheckTest, PromptFilesAreCountedAndBadLinesNamed) {
  Write(
      "{\"prompt\": \"What is 12+7?\", \"answer\": \"19\"}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"What is 2+2?\"}], \"answer\": 4}\n"
      "{\"prompt\": \"no answer here\"}\n");
  auto text = CheckPromptData(path_, *tok_, /*max_prompt_length=*/8, /*add_bos=*/false, false);
  ASSERT_TRUE(text.ok()) << text.status();
  // The chat prompt (Qwen's default system message, the user turn, the generation prompt) is the longest and
  // is cut to its last 8 tokens.
  EXPECT_NE(text->find(": 3 prompts, 2 with an answer; longest 8 tokens; 1 truncated to their last 8"),
            std::string::npos)
      << *text;
  auto json = CheckPromptData(path_, *tok_, 512, false, true);
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->find("\"truncated\":0"), std::string::npos) << *json;
  // A path with a quote and a backslash still gives valid JSON, naming it.
  const std::string odd = path_ + "\"odd\\.jsonl";
  std::filesystem::copy_file(path_, odd);
  auto odd_json = CheckPromptData(odd, *tok_, 512, false, true);
  std::filesystem::remove(odd);
  ASSERT_TRUE(odd_json.ok()) << odd_json.status();
  const auto parsed = nlohmann::json::parse(*odd_json, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(parsed.is_discarded()) << *odd_json;
  EXPECT_EQ(parsed["file"], odd);
  EXPECT_EQ(parsed["prompts"], 3);
  Write("{\"prompt\": \"x\"}\n{\"prompt\": \"y\", \"answer\": [1]}\n");
  auto bad = CheckPromptData(path_, *tok_, 8, false, false);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(path_ + ":2: field 'answer'"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace zerofit::cli
