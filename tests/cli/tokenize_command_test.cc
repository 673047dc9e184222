#include "cli/tokenize_command.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "text/chat_template.h"

namespace zerofit::cli {
namespace {

using Json = nlohmann::ordered_json;

const std::string kQwen = std::string(ZEROFIT_HF_TOKENIZERS_DIR) + "/qwen2.5";

struct Tokenized {
  absl::Status status;
  std::string output;
  size_t written = 0;
  size_t refused = 0;
  std::string first_error;
};

Tokenized RunWith(const text::TokenizerJson& tok, const text::ChatTemplate* chat, const std::string& input,
                  int threads, bool fail_fast = false) {
  std::istringstream in(input);
  std::ostringstream out;
  TokenizeOptions options;
  options.threads = threads;
  options.fail_fast = fail_fast;
  auto report = TokenizeJsonl(tok, chat, in, "in.jsonl", out, options);
  Tokenized t;
  t.status = report.status();
  if (report.ok()) {
    t.written = report->lines_written;
    t.refused = report->refused;
    t.first_error = report->first_error;
  }
  t.output = out.str();
  return t;
}

std::vector<Json> JsonLines(const std::string& text) {
  std::vector<Json> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(Json::parse(line));
  return lines;
}

class TokenizeCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kQwen + "/tokenizer.json")) GTEST_SKIP() << kQwen << " is missing";
    auto tok = text::TokenizerJson::FromFile(kQwen + "/tokenizer.json");
    ASSERT_TRUE(tok.ok()) << tok.status();
    tok_ = std::move(*tok);
    auto chat = text::ChatTemplate::FromTokenizerConfig(kQwen + "/tokenizer_config.json");
    ASSERT_TRUE(chat.ok()) << chat.status();
    chat_.emplace(std::move(*chat));
  }
  // The status of a --fail-fast run (the first refused line is an error).
  absl::Status Run(const std::string& input, std::string* output) {
    std::istringstream in(input);
    std::ostringstream out;
    TokenizeOptions options;
    options.fail_fast = true;
    auto report = TokenizeJsonl(*tok_, &*chat_, in, "in.jsonl", out, options);
    *output = out.str();
    return report.status();
  }

  std::unique_ptr<text::TokenizerJson> tok_;
  std::optional<text::ChatTemplate> chat_;
};

// The oracle's sample input: every output line is its input plus ids equal to text::TokenizerJson's.
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

// --out naming the input (itself, through a link or a hard link) would empty it before it is read: it was a
// run that "succeeded" with an empty file where the data had been. Refused, the input left as it was.
TEST_F(TokenizeCommandTest, AnOutputThatIsTheInputIsRefusedAndTheInputKept) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("zerofit_tokenize_same_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string data = "{\"text\": \"Hello world\"}\n";
  const std::string in = (dir / "in.jsonl").string();
  std::ofstream(in) << data;
  std::filesystem::create_symlink(in, dir / "link.jsonl");
  std::filesystem::create_hard_link(in, dir / "hard.jsonl");
  TokenizeFlags flags;
  flags.tokenizer_dir = kQwen;
  flags.in = in;
  for (const char* out : {"in.jsonl", "link.jsonl", "hard.jsonl"}) {
    flags.out = (dir / out).string();
    const absl::Status s = RunTokenize(flags).status();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << out << ": " << s;
    EXPECT_NE(s.message().find("is the input (--in " + in + ")"), std::string::npos) << s;
    std::ifstream kept(in);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), data) << out;
  }
  flags.out = (dir / "ids.jsonl").string();  // another file: written
  ASSERT_TRUE(RunTokenize(flags).ok());
  std::ifstream ids(flags.out);
  EXPECT_NE(std::string(std::istreambuf_iterator<char>(ids), {}).find("\"ids\":[9707,1879]"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

// Issue 29: a refused line is written as the oracle writes it (its input plus "error" naming FILE:LINE, or
// {"input": line} when it is not a JSON object), and the lines after it are still tokenized.
TEST_F(TokenizeCommandTest, RefusedLinesAreWrittenWithAnErrorAndTheRunGoesOn) {
  const std::string input =
      "{\"text\": \"a\"}\n\n{\"nope\": 1}\nnot json\n5\n{\"text\": \"a\", \"add_special_tokens\": "
      "1}\n{\"text\": \"b\"}";
  const Tokenized t = RunWith(*tok_, &*chat_, input, 1);
  ASSERT_TRUE(t.status.ok()) << t.status;
  EXPECT_EQ(t.written, 6u);
  EXPECT_EQ(t.refused, 4u);
  EXPECT_EQ(t.first_error, "in.jsonl:3: expected \"text\" (a string) or \"messages\" (a list)");
  const std::vector<Json> out = JsonLines(t.output);
  ASSERT_EQ(out.size(), 6u) << t.output;
  EXPECT_FALSE(out[0].contains("error"));
  EXPECT_EQ(out[1], (Json{{"nope", 1}, {"error", t.first_error}}));
  EXPECT_EQ(out[2]["input"], "not json");
  EXPECT_EQ(out[2]["error"].get<std::string>().rfind("in.jsonl:4: invalid JSON", 0), 0u) << out[2];
  EXPECT_EQ(out[3], (Json{{"input", "5"}, {"error", "in.jsonl:5: expected a JSON object, got number"}}));
  EXPECT_EQ(out[4], (Json{{"text", "a"},
                          {"add_special_tokens", 1},
                          {"error", "in.jsonl:6: field 'add_special_tokens': expected a boolean"}}));
  EXPECT_EQ(out[5]["text"], "b");
  EXPECT_EQ(out[5]["ids"].get<std::vector<int32_t>>(), *tok_->Encode("b", true));
  // The last line has no newline and is fine; a cut-off bad last line keeps its hint in its error field.
  const std::vector<Json> cut = JsonLines(RunWith(*tok_, &*chat_, "{\"text\": \"b", 1).output);
  ASSERT_EQ(cut.size(), 1u);
  EXPECT_NE(cut[0]["error"].get<std::string>().find("was the file cut off?"), std::string::npos) << cut[0];
  // Invalid UTF-8 in a bad line is replaced, so the error line is still JSON.
  const std::vector<Json> bad_utf8 = JsonLines(RunWith(*tok_, &*chat_, "\xff\xfe\n", 1).output);
  ASSERT_EQ(bad_utf8.size(), 1u);
  EXPECT_EQ(bad_utf8[0]["input"], "\xef\xbf\xbd\xef\xbf\xbd");
}

// Issue 29's case: Mistral's template raises on a user turn after a user turn. That conversation is
// written with the template's error, and the conversations after it are rendered and tokenized; with
// --fail-fast the run stops there, the line before it written.
TEST(TokenizeRefusedTest, MistralRefusedConversationDoesNotStopTheRun) {
  const std::string dir = std::string(ZEROFIT_HF_TOKENIZERS_DIR) + "/mistral-v0.3";
  if (!std::filesystem::exists(dir + "/tokenizer.json")) GTEST_SKIP() << dir << " is missing";
  auto tok = text::TokenizerJson::FromFile(dir + "/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto chat = text::ChatTemplate::FromTokenizerConfig(dir + "/tokenizer_config.json");
  ASSERT_TRUE(chat.ok()) << chat.status();
  const Json good = {
      {"messages", {{{"role", "user"}, {"content", "Hi"}}, {{"role", "assistant"}, {"content", "Yo"}}}}};
  const Json twice = {
      {"messages", {{{"role", "user"}, {"content", "a"}}, {{"role", "user"}, {"content", "b"}}}}};
  const Json last = {{"messages", {{{"role", "user"}, {"content", "c"}}}}};
  const std::string input = good.dump() + "\n" + twice.dump() + "\n" + last.dump() + "\n";
  const Tokenized t = RunWith(**tok, &*chat, input, 2);
  ASSERT_TRUE(t.status.ok()) << t.status;
  EXPECT_EQ(t.written, 3u);
  EXPECT_EQ(t.refused, 1u);
  EXPECT_EQ(t.first_error.rfind("in.jsonl:2: chat template: ", 0), 0u) << t.first_error;
  const std::vector<Json> out = JsonLines(t.output);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[1]["messages"], twice["messages"]);
  EXPECT_EQ(out[1]["error"], t.first_error);
  EXPECT_FALSE(out[1].contains("ids"));
  for (const Json* line : {&out[0], &out[2]}) {
    ASSERT_TRUE(line->contains("rendered")) << *line;
    EXPECT_EQ((*line)["ids"].get<std::vector<int32_t>>(),
              *(*tok)->Encode((*line)["rendered"].get<std::string>(), false));
  }
  const Tokenized stopped = RunWith(**tok, &*chat, input, 2, /*fail_fast=*/true);
  EXPECT_EQ(stopped.status.message(), t.first_error);
  EXPECT_EQ(stopped.output, out[0].dump(-1, ' ', false) + "\n");
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

// --chat-template: GPT-2 (no template of its own) renders conversations with Qwen's, as a job with
// data.chat_template reads them; a named template that does not exist stops the run before a line is read.
TEST(TokenizeChatTemplateTest, AReplacementTemplateRendersTheConversations) {
  const std::string hf = ZEROFIT_HF_TOKENIZERS_DIR;
  if (!std::filesystem::exists(hf + "/gpt2/tokenizer.json") || !std::filesystem::exists(hf + "/qwen2.5"))
    GTEST_SKIP() << "shared tokenizers are missing";
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                                    ("zerofit_tokenize_template_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string in = (dir / "in.jsonl").string();
  std::ofstream(in) << R"({"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": true})"
                       "\n";
  TokenizeFlags flags;
  flags.tokenizer_dir = hf + "/gpt2";
  flags.in = in;
  flags.out = (dir / "out.jsonl").string();
  flags.chat_template = hf + "/qwen2.5";
  auto report = RunTokenize(flags);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->refused, 0u);
  auto qwen = text::ChatTemplate::FromDirectory(hf + "/qwen2.5");
  ASSERT_TRUE(qwen.ok()) << qwen.status();
  text::ChatTemplateOptions gen;
  gen.add_generation_prompt = true;
  const Json line = Json::parse(ReadFile(flags.out));
  EXPECT_EQ(line["rendered"], *qwen->Render(Json::parse(R"([{"role": "user", "content": "Hi"}])"), gen));

  flags.chat_template = (dir / "absent.jinja").string();
  auto missing = RunTokenize(flags);
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  std::filesystem::remove_all(dir);
}

// The text corpus of the golden tests, repeated past one chunk of lines (4096), with chat lines mixed in
// (refused for gpt2, which has no template: written with an "error" field, the first one reported).
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
    auto tok = text::TokenizerJson::FromFile(dir + "/tokenizer.json");
    ASSERT_TRUE(tok.ok()) << tok.status();
    auto chat = text::ChatTemplate::FromTokenizerConfig(dir + "/tokenizer_config.json");
    const text::ChatTemplate* chat_ptr = chat.ok() ? &*chat : nullptr;
    const Tokenized serial = RunWith(**tok, chat_ptr, input, 1);
    ASSERT_TRUE(serial.status.ok()) << name << ": " << serial.status;
    EXPECT_EQ(serial.written, 12u * 399u) << name;
    if (chat_ptr != nullptr) {
      EXPECT_EQ(serial.refused, 0u) << name << ": " << serial.first_error;
    } else {
      EXPECT_EQ(serial.refused, 12u);
      EXPECT_EQ(serial.first_error.rfind("in.jsonl:400: field 'messages'", 0), 0u) << serial.first_error;
    }
    for (int threads : {2, 3, 0}) {
      const Tokenized parallel = RunWith(**tok, chat_ptr, input, threads);
      EXPECT_EQ(parallel.status, serial.status) << name << ", " << threads << " threads";
      EXPECT_EQ(parallel.written, serial.written) << name << ", " << threads << " threads";
      EXPECT_EQ(parallel.refused, serial.refused) << name << ", " << threads << " threads";
      EXPECT_EQ(parallel.first_error, serial.first_error) << name << ", " << threads << " threads";
      EXPECT_TRUE(parallel.output == serial.output) << name << ", " << threads << " threads";
    }
    ++tested;
  }
  if (tested == 0) GTEST_SKIP() << ZEROFIT_HF_TOKENIZERS_DIR << " has none of the tokenizers";
}

// --fail-fast, errors at late lines (in the second chunk): the lowest bad line is reported, with everything
// before it written, whatever the thread count; a cut-off last line keeps its hint. Without it, both lines
// are written with their errors and the run goes on to the end, the same for every thread count.
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
  const Tokenized serial = RunWith(*tok_, &*chat_, input, 1, /*fail_fast=*/true);
  EXPECT_EQ(serial.status.message().rfind("in.jsonl:4500: ", 0), 0u) << serial.status;
  EXPECT_EQ(JsonLines(serial.output).size(), 4499u);
  for (int threads : {2, 4}) {
    const Tokenized parallel = RunWith(*tok_, &*chat_, input, threads, /*fail_fast=*/true);
    EXPECT_EQ(parallel.status, serial.status);
    EXPECT_TRUE(parallel.output == serial.output);
  }
  const Tokenized going_on = RunWith(*tok_, &*chat_, input, 1);
  ASSERT_TRUE(going_on.status.ok()) << going_on.status;
  EXPECT_EQ(going_on.written, 6000u);
  EXPECT_EQ(going_on.refused, 2u);
  EXPECT_EQ(going_on.first_error.rfind("in.jsonl:4500: ", 0), 0u) << going_on.first_error;
  const std::vector<Json> out = JsonLines(going_on.output);
  ASSERT_EQ(out.size(), 6000u);
  EXPECT_EQ(out[4499]["error"].get<std::string>().rfind("in.jsonl:4500: ", 0), 0u) << out[4499];
  EXPECT_EQ(out[4999]["error"].get<std::string>().rfind("in.jsonl:5000: invalid JSON", 0), 0u) << out[4999];
  EXPECT_EQ(out[5999]["text"], "line 6000 of the file");
  EXPECT_FALSE(out[5999].contains("error"));
  for (int threads : {2, 4}) {
    const Tokenized parallel = RunWith(*tok_, &*chat_, input, threads);
    EXPECT_EQ(parallel.status, going_on.status);
    EXPECT_EQ(parallel.refused, going_on.refused);
    EXPECT_EQ(parallel.first_error, going_on.first_error);
    EXPECT_TRUE(parallel.output == going_on.output);
  }
  const std::string cut = "{\"text\": \"a\"}\n{\"text\": \"b";
  const Tokenized serial_cut = RunWith(*tok_, &*chat_, cut, 1, /*fail_fast=*/true);
  EXPECT_NE(serial_cut.status.message().find("was the file cut off?"), std::string::npos);
  EXPECT_EQ(RunWith(*tok_, &*chat_, cut, 3, /*fail_fast=*/true).status, serial_cut.status);
  EXPECT_NE(RunWith(*tok_, &*chat_, cut, 1).first_error.find("was the file cut off?"), std::string::npos);
}

}  // namespace
}  // namespace zerofit::cli
