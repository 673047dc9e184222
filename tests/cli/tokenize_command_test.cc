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

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream buf;
  buf << file.rdbuf();
  return buf.str();
}

struct Tokenized {
  absl::Status status;
  std::string output;
  size_t written = 0;
};

Tokenized RunWith(const text::Tokenizer& tok, const text::ChatTemplate* chat, const std::string& input,
                  int threads) {
  std::istringstream in(input);
  std::ostringstream out;
  Tokenized t;
  t.status = TokenizeJsonl(tok, chat, in, "in.jsonl", out, &t.written, threads);
  t.output = out.str();
  return t;
}

// The text corpus of the golden tests, repeated past one chunk of lines (4096), with chat lines mixed in
// (an error for gpt2, which has no template: the error must then be the first one, as serially).
std::string ParallelCorpus() {
  const std::string corpus = ReadFile(std::string(ZEROFIT_TEXT_GOLDEN_DIR) + "/../corpus.jsonl");
  std::string input;
  for (int i = 0; i < 12; ++i) {
    input += corpus;
    input += "\n";  // a blank line
    input += R"({"messages": [{"role": "user", "content": "Hi )" + std::to_string(i) +
             R"("}], "add_generation_prompt": true})"
             "\n";
  }
  return input;
}

// Every thread count writes byte-identical output to the serial run's, on all five shared tokenizers.
TEST(TokenizeParallelTest, ParallelOutputEqualsSerialOnTheRealTokenizers) {
  const std::string input = ParallelCorpus();
  int tested = 0;
  for (const char* name : {"qwen2.5", "mistral-v0.3", "tinyllama", "gpt2", "smollm2"}) {
    const std::string dir = std::string(ZEROFIT_HF_TOKENIZERS_DIR) + "/" + name;
    if (!std::filesystem::exists(dir + "/tokenizer.json")) continue;
    auto tok = text::Tokenizer::FromFile(dir + "/tokenizer.json");
    ASSERT_TRUE(tok.ok()) << tok.status();
    auto chat = text::ChatTemplate::FromTokenizerConfig(dir + "/tokenizer_config.json");
    const text::ChatTemplate* chat_ptr = chat.ok() ? &*chat : nullptr;
    const Tokenized serial = RunWith(**tok, chat_ptr, input, 1);
    if (chat_ptr != nullptr) {
      ASSERT_TRUE(serial.status.ok()) << name << ": " << serial.status;
      EXPECT_EQ(serial.written, 12u * 399u) << name;
    } else {
      EXPECT_NE(serial.status.message().find("in.jsonl:400: "), std::string::npos) << serial.status;
    }
    for (int threads : {2, 3, 0}) {
      const Tokenized parallel = RunWith(**tok, chat_ptr, input, threads);
      EXPECT_EQ(parallel.status, serial.status) << name << ", " << threads << " threads";
      EXPECT_EQ(parallel.written, serial.written) << name << ", " << threads << " threads";
      EXPECT_TRUE(parallel.output == serial.output) << name << ", " << threads << " threads";
    }
    ++tested;
  }
  if (tested == 0) GTEST_SKIP() << ZEROFIT_HF_TOKENIZERS_DIR << " has none of the tokenizers";
}

// Errors at late lines (in the second chunk): the lowest bad line is reported, with everything before it
// written, whatever the thread count; a cut-off last line keeps its hint.
TEST_F(TokenizeCommandTest, ParallelReportsTheLowestBadLineLikeSerial) {
  std::string input;
  for (int i = 1; i <= 6000; ++i) {
    if (i == 4500) {
      input += "{\"text\": 5}\n";
    } else if (i == 5000) {
      input += "not json\n";
    } else {
      input += R"({"text": "line )" + std::to_string(i) +
               R"( of the file"})"
               "\n";
    }
  }
  const Tokenized serial = RunWith(*tok_, &*chat_, input, 1);
  EXPECT_EQ(serial.status.message().rfind("in.jsonl:4500: ", 0), 0u) << serial.status;
  for (int threads : {2, 4}) {
    const Tokenized parallel = RunWith(*tok_, &*chat_, input, threads);
    EXPECT_EQ(parallel.status, serial.status);
    EXPECT_TRUE(parallel.output == serial.output);
  }
  const std::string cut = "{\"text\": \"a\"}\n{\"text\": \"b";
  const Tokenized serial_cut = RunWith(*tok_, &*chat_, cut, 1);
  EXPECT_NE(serial_cut.status.message().find("was the file cut off?"), std::string::npos);
  EXPECT_EQ(RunWith(*tok_, &*chat_, cut, 3).status, serial_cut.status);
}

}  // namespace
}  // namespace zerofit::cli
