#include "cli/tokenize_command.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace zerofit::cli {
namespace {

using Json = nlohmann::ordered_json;

const std::string kQwen = std::string(ZEROFIT_HF_TOKENIZERS_DIR) + "/qwen2.5";

class TokenizeCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kQwen + "/tokenizer.json")) GTEST_SKIP() << kQwen << " is missing";
    auto tok = text::Tokenizer::FromFile(kQwen + "/tokenizer.json");
    ASSERT_TRUE(tok.ok()) << tok.status();
    tok_ = std::move(*tok);
    auto chat = text::ChatTemplate::FromTokenizerConfig(kQwen + "/tokenizer_config.json");
    ASSERT_TRUE(chat.ok()) << chat.status();
    chat_.emplace(std::move(*chat));
  }
  absl::Status Run(const std::string& input, std::string* output) {
    std::istringstream in(input);
    std::ostringstream out;
    absl::Status s = TokenizeJsonl(*tok_, &*chat_, in, "in.jsonl", out);
    *output = out.str();
    return s;
  }

  std::unique_ptr<text::Tokenizer> tok_;
  std::optional<text::ChatTemplate> chat_;
};

// The oracle's sample input: every output line is its input plus ids equal to text::Tokenizer's.
TEST_F(TokenizeCommandTest, SampleInputMatchesTextTokenizer) {
  const std::string path = std::string(ZEROFIT_HF_TOKENIZERS_DIR) + "/oracle/sample_input.jsonl";
  std::ifstream file(path);
  if (!file) GTEST_SKIP() << path << " is missing";
  std::stringstream buf;
  buf << file.rdbuf();
  std::string out;
  ASSERT_TRUE(Run(buf.str(), &out).ok()) << Run(buf.str(), &out);
  std::istringstream in_lines(buf.str()), out_lines(out);
  std::string in_line, out_line;
  int compared = 0;
  while (std::getline(in_lines, in_line)) {
    if (in_line.find_first_not_of(" \t\r") == std::string::npos) continue;
    ASSERT_TRUE(std::getline(out_lines, out_line));
    const Json input = Json::parse(in_line), got = Json::parse(out_line);
    for (auto& [k, v] : input.items()) EXPECT_EQ(got.at(k), v) << "input key " << k << " kept";
    if (input.contains("text")) {
      auto want = tok_->Encode(input["text"].get<std::string>(), input.value("add_special_tokens", true));
      ASSERT_TRUE(want.ok());
      EXPECT_EQ(got.at("ids").get<std::vector<int32_t>>(), *want) << in_line;
      EXPECT_EQ(got.at("tokens").size(), want->size());
    } else {
      text::ChatTemplateOptions o;
      o.add_generation_prompt = input.value("add_generation_prompt", false);
      if (input.contains("tools")) o.tools = input["tools"];
      auto rendered = chat_->Render(input["messages"], o);
      ASSERT_TRUE(rendered.ok()) << rendered.status();
      EXPECT_EQ(got.at("rendered").get<std::string>(), *rendered);
      EXPECT_EQ(got.at("ids").get<std::vector<int32_t>>(), *tok_->Encode(*rendered, false));
    }
    ++compared;
  }
  EXPECT_GT(compared, 10);
  EXPECT_FALSE(std::getline(out_lines, out_line)) << "extra output line";
}

// Ids from the JavaScript oracle (tests/text/golden, written by make_golden.mjs).
TEST_F(TokenizeCommandTest, TextLinesMatchTheGoldenOracleIds) {
  std::ifstream golden(std::string(ZEROFIT_TEXT_GOLDEN_DIR) + "/qwen2.5.jsonl");
  if (!golden) GTEST_SKIP() << "golden file missing";
  std::string line, input, want_ids;
  for (int n = 0; n < 300 && std::getline(golden, line); ++n) {
    Json g = Json::parse(line);
    Json in = {{"text", g["text"]}, {"add_special_tokens", g["add_special_tokens"]}};
    input += in.dump() + "\n";
    want_ids += g["ids"].dump() + "\n";
  }
  std::string out;
  ASSERT_TRUE(Run(input, &out).ok());
  std::istringstream out_lines(out), want_lines(want_ids);
  std::string o, w;
  while (std::getline(want_lines, w)) {
    ASSERT_TRUE(std::getline(out_lines, o));
    EXPECT_EQ(Json::parse(o)["ids"], Json::parse(w)) << o;
  }
}

TEST_F(TokenizeCommandTest, ErrorsNameFileAndLine) {
  std::string out;
  absl::Status s = Run("{\"text\": \"a\"}\n\n{\"nope\": 1}\n", &out);
  EXPECT_NE(std::string(s.message()).find("in.jsonl:3: expected \"text\""), std::string::npos) << s;
  s = Run("{\"text\": \"a\"}\n{\"text\": \"b", &out);
  EXPECT_NE(std::string(s.message()).find("in.jsonl:2: invalid JSON"), std::string::npos) << s;
  s = Run("{\"text\": \"a\", \"add_special_tokens\": 1}\n", &out);
  EXPECT_NE(std::string(s.message()).find("in.jsonl:1: field 'add_special_tokens'"), std::string::npos) << s;
  s = Run("{\"messages\": [], \"add_generation_prompt\": true}\n", &out);
  EXPECT_NE(std::string(s.message()).find("in.jsonl:1: chat template"), std::string::npos) << s;
}

TEST_F(TokenizeCommandTest, MessagesGetRenderedAndIds) {
  std::string out;
  ASSERT_TRUE(
      Run("{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"add_generation_prompt\": true}\n",
          &out)
          .ok());
  Json got = Json::parse(out);
  EXPECT_EQ(got["rendered"].get<std::string>().substr(got["rendered"].get<std::string>().size() - 22),
            "<|im_start|>assistant\n");
  EXPECT_EQ(got["ids"].get<std::vector<int32_t>>(), *tok_->Encode(got["rendered"].get<std::string>(), false));
}

}  // namespace
}  // namespace zerofit::cli
