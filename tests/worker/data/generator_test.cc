// Runs the example generator (examples/make_arith_prefs.cc) as a program, as a user would, and checks that
// everything it writes loads with zerofit_data.
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/worker/data/test_support.h"
#include "worker/data/preference_dataset.h"
#include "worker/data/sentencepiece_tokenizer.h"

namespace zerofit::data {
namespace {

using testing::ScopedTempDir;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs the generator with `args`; returns its exit code and puts stdout+stderr in *log.
int RunGenerator(const ScopedTempDir& dir, const std::string& args, std::string* log) {
  const std::string log_path = dir.File("generator.log");
  const std::string cmd =
      std::string("'") + ZEROFIT_MAKE_ARITH_PREFS + "' " + args + " > '" + log_path + "' 2>&1";
  const int status = std::system(cmd.c_str());
  *log = ReadFile(log_path);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

struct TextLine {
  std::string prompt, chosen, rejected;
};

std::vector<TextLine> ReadTextJsonl(const std::string& path) {
  std::vector<TextLine> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    out.push_back({j.at("prompt"), j.at("chosen"), j.at("rejected")});
  }
  return out;
}

// "12+7=" -> {7, 12}: a+b and b+a are the same problem.
std::pair<long, long> Problem(const std::string& prompt) {
  const size_t plus = prompt.find('+');
  const long a = std::stol(prompt.substr(0, plus));
  const long b = std::stol(prompt.substr(plus + 1, prompt.size() - plus - 2));
  return {std::min(a, b), std::max(a, b)};
}

TEST(GeneratorTest, WritesLoadableDeterministicData) {
  ScopedTempDir dir;
  const std::string flags = " --train 300 --test 50 --max-operand 30 --ids";
  std::string log;
  ASSERT_EQ(RunGenerator(dir, "--out '" + dir.File("a") + "' --seed 11" + flags, &log), 0) << log;
  EXPECT_NE(log.find("train.jsonl      300 pairs"), std::string::npos) << log;
  ASSERT_EQ(RunGenerator(dir, "--out '" + dir.File("b") + "' --seed=11" + flags, &log), 0) << log;
  ASSERT_EQ(RunGenerator(dir, "--out '" + dir.File("c") + "' --seed 12" + flags, &log), 0) << log;

  // Same seed, byte-identical files (the tokenizer included); another seed, other data.
  for (const char* name : {"train.jsonl", "test.jsonl", "train_ids.jsonl", "test_ids.jsonl", "corpus.txt",
                           "tokenizer.model", "config.json"}) {
    const std::string a = ReadFile(dir.File(std::string("a/") + name));
    EXPECT_FALSE(a.empty()) << name;
    EXPECT_EQ(a, ReadFile(dir.File(std::string("b/") + name))) << name;
  }
  EXPECT_NE(ReadFile(dir.File("a/train.jsonl")), ReadFile(dir.File("c/train.jsonl")));

  // The tokenizer loads and round-trips the task's text.
  auto tok = SentencePieceTokenizer::Load(dir.File("a/tokenizer.model"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  for (const std::string text : {"12+7=19", "0+0=0", "30+29=59"}) {
    auto ids = (*tok)->Encode(text);
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(ids->size(), text.size()) << "digits and symbols are single pieces";
    auto back = (*tok)->Decode(*ids);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, text);
  }

  // config.json: the tiny Llama, sized to the tokenizer.
  const nlohmann::json config = nlohmann::json::parse(ReadFile(dir.File("a/config.json")));
  EXPECT_EQ(config.at("architectures"), nlohmann::json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(config.at("model_type"), "llama");
  EXPECT_EQ(config.at("vocab_size"), (*tok)->vocab_size());
  EXPECT_EQ(config.at("hidden_size"), 64);
  EXPECT_EQ(config.at("intermediate_size"), 176);
  EXPECT_EQ(config.at("num_hidden_layers"), 2);
  EXPECT_EQ(config.at("num_attention_heads"), 4);
  EXPECT_EQ(config.at("num_key_value_heads"), 2);
  EXPECT_EQ(config.at("max_position_embeddings"), 64);
  EXPECT_EQ(config.at("rms_norm_eps"), 1e-5);
  EXPECT_EQ(config.at("rope_theta"), 10000.0);
  EXPECT_EQ(config.at("tie_word_embeddings"), false);
  EXPECT_EQ(config.at("bos_token_id"), (*tok)->bos_id());
  EXPECT_EQ(config.at("eos_token_id"), (*tok)->eos_id());
  EXPECT_EQ(config.at("pad_token_id"), (*tok)->pad_id());

  // Text and pre-tokenized files load to the same pairs.
  auto text_pairs = LoadPreferenceJsonl(dir.File("a/train.jsonl"), tok->get(), PreferenceDataOptions{});
  ASSERT_TRUE(text_pairs.ok()) << text_pairs.status();
  PreferenceDataOptions id_options;
  id_options.bos_id = (*tok)->bos_id();
  id_options.eos_id = (*tok)->eos_id();
  id_options.vocab_size = (*tok)->vocab_size();
  auto id_pairs = LoadPreferenceJsonl(dir.File("a/train_ids.jsonl"), nullptr, id_options);
  ASSERT_TRUE(id_pairs.ok()) << id_pairs.status();
  ASSERT_EQ(text_pairs->size(), 300u);
  ASSERT_EQ(id_pairs->size(), 300u);
  for (size_t i = 0; i < 300; ++i) {
    EXPECT_EQ((*text_pairs)[i].prompt, (*id_pairs)[i].prompt);
    EXPECT_EQ((*text_pairs)[i].chosen, (*id_pairs)[i].chosen);
    EXPECT_EQ((*text_pairs)[i].rejected, (*id_pairs)[i].rejected);
  }
  ASSERT_TRUE(LoadPreferenceJsonl(dir.File("a/test_ids.jsonl"), nullptr, id_options).ok());

  // The task: chosen is the sum, rejected is wrong; no test problem is in train.
  const std::vector<TextLine> train = ReadTextJsonl(dir.File("a/train.jsonl"));
  const std::vector<TextLine> test = ReadTextJsonl(dir.File("a/test.jsonl"));
  ASSERT_EQ(test.size(), 50u);
  std::set<std::pair<long, long>> train_problems;
  for (const TextLine& t : train) {
    const auto [a, b] = Problem(t.prompt);
    EXPECT_LE(b, 30);
    EXPECT_EQ(t.chosen, std::to_string(a + b)) << t.prompt;
    EXPECT_NE(t.rejected, t.chosen) << t.prompt;
    EXPECT_TRUE(t.rejected.size() == 1 || t.rejected[0] != '0') << t.rejected;
    EXPECT_TRUE(train_problems.insert({a, b}).second) << "duplicate problem " << t.prompt;
  }
  for (const TextLine& t : test) {
    EXPECT_EQ(train_problems.count(Problem(t.prompt)), 0u) << "test problem in train: " << t.prompt;
  }
  const std::string corpus = ReadFile(dir.File("a/corpus.txt"));
  EXPECT_EQ(std::count(corpus.begin(), corpus.end(), '\n'), 300);
  EXPECT_EQ(corpus.substr(0, corpus.find('\n')), train[0].prompt + train[0].chosen);
}

// --wrong near: every wrong answer is off by 1 to 9 (so its units digit is wrong) and keeps the padded width;
// the problems, corpus and tokenizer are those of the default (mixed) wrong answers.
TEST(GeneratorTest, NearWrongAnswersAreOffByOneToNine) {
  ScopedTempDir dir;
  const std::string flags = " --train 300 --test 50 --max-operand 99 --pad --rejections 3 --ids";
  std::string log;
  ASSERT_EQ(RunGenerator(dir, "--out '" + dir.File("mixed") + "'" + flags, &log), 0) << log;
  ASSERT_EQ(RunGenerator(dir, "--out '" + dir.File("near") + "' --wrong near" + flags, &log), 0) << log;
  for (const char* name : {"corpus.txt", "tokenizer.model", "config.json"}) {
    EXPECT_EQ(ReadFile(dir.File(std::string("mixed/") + name)),
              ReadFile(dir.File(std::string("near/") + name)))
        << name;
  }
  size_t mixed_same_units = 0, mixed_pairs = 0;
  for (const TextLine& t : ReadTextJsonl(dir.File("mixed/train.jsonl"))) {
    ++mixed_pairs;
    if (t.chosen.back() == t.rejected.back()) ++mixed_same_units;
  }
  EXPECT_GT(mixed_same_units, mixed_pairs / 5) << "the mixed kinds often keep the units digit";
  std::set<long> offsets;
  for (const char* split : {"near/train.jsonl", "near/test.jsonl"}) {
    for (const TextLine& t : ReadTextJsonl(dir.File(split))) {
      ASSERT_EQ(t.chosen.size(), 3u) << t.prompt;
      ASSERT_EQ(t.rejected.size(), 3u) << t.prompt << " " << t.rejected;
      const long off = std::stol(t.rejected) - std::stol(t.chosen);
      EXPECT_TRUE(off != 0 && off >= -9 && off <= 9) << t.prompt << " " << t.rejected;
      EXPECT_NE(t.chosen.back(), t.rejected.back()) << t.prompt << " " << t.rejected;
      offsets.insert(off);
    }
  }
  EXPECT_EQ(offsets.size(), 18u) << "every offset -9..-1, 1..9 occurs";
  EXPECT_EQ(RunGenerator(dir, "--out '" + dir.File("x") + "' --wrong far", &log), 2);
  EXPECT_NE(log.find("--wrong must be mixed or near, got 'far'"), std::string::npos) << log;
}

TEST(GeneratorTest, ExplainsBadRequests) {
  ScopedTempDir dir;
  std::string log;
  EXPECT_EQ(RunGenerator(dir, "--train 10", &log), 2);
  EXPECT_NE(log.find("--out DIR is required"), std::string::npos) << log;
  EXPECT_EQ(RunGenerator(dir, "--out '" + dir.File("x") + "' --trian 10", &log), 2);
  EXPECT_NE(log.find("unknown flag '--trian'"), std::string::npos) << log;
  // Operands 0..3 give only 10 distinct problems.
  EXPECT_EQ(RunGenerator(dir, "--out '" + dir.File("x") + "' --max-operand 3 --train 8 --test 3", &log), 1);
  EXPECT_NE(log.find("give only 10 distinct problems"), std::string::npos) << log;
  // All of them is fine (the small-space path draws without replacement).
  EXPECT_EQ(RunGenerator(dir, "--out '" + dir.File("x") + "' --max-operand 3 --train 8 --test 2", &log), 0)
      << log;
}

}  // namespace
}  // namespace zerofit::data
