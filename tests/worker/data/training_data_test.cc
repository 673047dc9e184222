// A run's data through LoadTrainingData: text and chat lines tokenized with the model directory's
// tokenizer.json give the ids a pre-tokenized file states, add_bos auto follows the template, the report is
// taken before truncation, and bad input names the file.
#include "worker/data/training_data.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "tests/worker/data/char_model_dir.h"
#include "tests/worker/data/test_support.h"
#include "worker/data/chat_response.h"
#include "worker/data/hf_tokenizer.h"

namespace zerofit::data {
namespace {

using testing::CharIds;
using testing::kCharBos;
using testing::kCharEos;
using testing::ScopedTempDir;

std::vector<int32_t> Cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class TrainingDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::WriteCharModelDir(dir_.path().string());
    auto config = core::LoadHfConfig(dir_.File("config.json"));
    ASSERT_TRUE(config.ok()) << config.status();
    config_ = *config;
  }
  DataSource Source(const std::string& train) {
    DataSource s;
    s.train = train;
    s.tokenizer_dir = TokenizerDirOf(dir_.path().string());
    return s;
  }
  ScopedTempDir dir_;
  core::HfModelConfig config_;
};

TEST_F(TrainingDataTest, TextLinesBecomeTheIdsOfTheirCharacters) {
  const std::string train = dir_.Write("train.jsonl",
                                       "{\"prompt\": \"12+7=\", \"chosen\": \"19\", \"rejected\": \"18\"}\n"
                                       "{\"prompt\": \"3+4=\", \"chosen\": \"7\", \"rejected\": \"8\"}\n");
  DataSource s = Source(train);
  s.test = train;
  auto d = LoadTrainingData(s, config_, 64);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->train.size(), 2u);
  EXPECT_TRUE(d->options.add_bos) << "tokenizer_config.json: add_bos_token true";
  EXPECT_EQ(d->train[0].prompt, Cat({kCharBos}, CharIds("12+7=")));
  EXPECT_EQ(d->train[0].chosen, Cat(CharIds("19"), {kCharEos}));
  EXPECT_EQ(d->train[0].rejected, Cat(CharIds("18"), {kCharEos}));
  EXPECT_EQ(d->test.size(), 2u);
  EXPECT_EQ(d->report.pairs, 2u);
  EXPECT_EQ(d->report.prompt.max, 6u);
}

TEST_F(TrainingDataTest, ChatLinesUseTheTemplateAndItsBos) {
  const std::string train = dir_.Write(
      "chat.jsonl",
      R"({"chosen": [{"role": "user", "content": "1+1="}, {"role": "assistant", "content": "2"}], )"
      R"("rejected": [{"role": "user", "content": "1+1="}, {"role": "assistant", "content": "3"}]})"
      "\n");
  auto d = LoadTrainingData(Source(train), config_, 64);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->options.add_bos) << "the template writes bos_token: auto must not add a second";
  // render(prompt, add_generation_prompt) = "<s>user: 1+1=\nassistant: "; the response part is the rest.
  EXPECT_EQ(d->train[0].prompt, Cat({kCharBos}, CharIds("user: 1+1=\nassistant: ")));
  EXPECT_EQ(d->train[0].chosen, CharIds("2\n")) << "no EOS after a chat rendering, as in TRL";
  for (const DataLint& l : d->report.lints) {
    if (l.name.find("BOS") != std::string::npos) {
      EXPECT_EQ(l.count, 0u) << l.name;
    }
  }
  DataSource forced = Source(train);
  forced.add_bos = true;
  auto doubled = LoadTrainingData(forced, config_, 64);
  ASSERT_TRUE(doubled.ok()) << doubled.status();
  bool seen = false;
  for (const DataLint& l : doubled->report.lints) {
    if (l.name == "prompts starting with a doubled BOS") {
      EXPECT_EQ(l.count, 1u);
      seen = true;
    }
  }
  EXPECT_TRUE(seen);
}

// SFT's "messages" lines: the template's BOS starts the completion, so auto add_bos adds none and the lint
// finds the BOS it expects there.
TEST_F(TrainingDataTest, SftConversationsKeepTheTemplatesBos) {
  const std::string train = dir_.Write(
      "sft.jsonl",
      R"({"messages": [{"role": "user", "content": "1+1="}, {"role": "assistant", "content": "2"}]})"
      "\n");
  DataSource s = Source(train);
  s.sft = true;
  auto d = LoadTrainingData(s, config_, 64);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->options.add_bos) << "the template writes bos_token: auto must not add a second";
  EXPECT_TRUE(d->train[0].prompt.empty());
  EXPECT_EQ(d->train[0].chosen, Cat({kCharBos}, CharIds("user: 1+1=\nassistant: 2\n")))
      << "no EOS after a chat rendering, as in TRL";
  EXPECT_TRUE(d->train[0].rejected.empty());
  for (const DataLint& l : d->report.lints) {
    if (l.name.find("BOS") != std::string::npos) {
      EXPECT_EQ(l.count, 0u) << l.name;
    }
    // This template writes no eos_token: the model would never learn to stop, and the lint says so.
    if (l.name.find("never hold the EOS") != std::string::npos) {
      EXPECT_EQ(l.count, 1u) << l.name;
    }
  }
  EXPECT_EQ(d->report.chat_rendered, 1u);
  s.add_bos = true;
  auto doubled = LoadTrainingData(s, config_, 64);
  ASSERT_TRUE(doubled.ok()) << doubled.status();
  for (const DataLint& l : doubled->report.lints) {
    if (l.name == "prompts starting with a doubled BOS") {
      EXPECT_EQ(l.count, 1u);
    }
  }
}

// A conversational pair's and an assistant-only SFT conversation's `tools` and `chat_template_kwargs` reach
// every rendering of the line (the prompt, the prompt + response it is cut from, the assistant's turns).
TEST_F(TrainingDataTest, ToolsAndChatTemplateKwargsReachEveryRenderingOfTheLine) {
  testing::WriteCharTemplateWithExtras(dir_.path().string());
  const std::string extras = R"("tools": [{"name": "add"}], "chat_template_kwargs": {"mode": "x"})";
  const std::string pairs =
      dir_.Write("tools.jsonl", R"({"prompt": [{"role": "user", "content": "1+1="}], )"
                                R"("chosen": [{"role": "assistant", "content": "2"}], )"
                                R"("rejected": [{"role": "assistant", "content": "3"}], )" +
                                    extras + "}\n");
  auto d = LoadTrainingData(Source(pairs), config_, 64);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->train[0].prompt, Cat({kCharBos}, CharIds("tools:1\nmode:x\nuser: 1+1=\nassistant: ")));
  EXPECT_EQ(d->train[0].chosen, CharIds("2\n"));
  EXPECT_EQ(d->train[0].rejected, CharIds("3\n"));

  const std::string sft =
      dir_.Write("sft_tools.jsonl", R"({"messages": [{"role": "user", "content": "1+1="}, )"
                                    R"({"role": "assistant", "content": "2"}], )" +
                                        extras + "}\n");
  DataSource s = Source(sft);
  s.sft = true;
  s.assistant_only_loss = true;
  auto e = LoadTrainingData(s, config_, 64);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->train[0].prompt, Cat({kCharBos}, CharIds("tools:1\nmode:x\nuser: 1+1=\nassistant: ")));
  EXPECT_EQ(e->train[0].chosen, CharIds("2\n"));

  const std::string bad = dir_.Write("bad_tools.jsonl", R"({"chosen": "2", "rejected": "3", "tools": {}})"
                                                        "\n");
  auto refused = LoadTrainingData(Source(bad), config_, 64);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(std::string(refused.status().message()).find(bad + ":1: field 'tools': expected a list"),
            std::string::npos)
      << refused.status();
}

// A template whose generation prompt is not where the reply goes: the response cannot be cut from the
// rendering, and the reader and a reward model's reply say so (chat_response.h, one cut for both).
TEST_F(TrainingDataTest, AResponseTheTemplateCannotCutIsRefusedByName) {
  std::ofstream(dir_.File("chat_template.jinja"))
      << "{% for m in messages %}{{ m['content'] }}{% endfor %}{% if add_generation_prompt %}=={% endif %}";
  const std::string pairs =
      dir_.Write("uncut.jsonl", R"({"prompt": [{"role": "user", "content": "1+1"}], )"
                                R"("chosen": [{"role": "assistant", "content": "2"}], )"
                                R"("rejected": [{"role": "assistant", "content": "3"}]})"
                                "\n");
  auto refused = LoadTrainingData(Source(pairs), config_, 64);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(
      std::string(refused.status().message())
          .find(pairs + ":1: field 'chosen': the chat template's rendering of prompt + response does not "
                        "start with its rendering of the prompt"),
      std::string::npos)
      << refused.status();
  EXPECT_NE(std::string(refused.status().message()).find("(write text rendered by hand instead)"),
            std::string::npos);
  auto tok = HfTokenizer::Load(dir_.path().string());
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto reply = ChatReplyIds(**tok, R"([{"role": "user", "content": "1+1"}])", ChatExtras{}, "2");
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kFailedPrecondition) << reply.status();
}

// data.eos_token and data.chat_template (TRL's eos_token, chat_template_path): the appended EOS and the
// template's eos_token are the named token, and a conversation renders with the named template.
TEST_F(TrainingDataTest, TokenizerOverridesChangeTheEosAndTheTemplate) {
  const std::string text =
      dir_.Write("eos.jsonl", "{\"prompt\": \"1+1=\", \"chosen\": \"2\", \"rejected\": \"3\"}\n");
  DataSource s = Source(text);
  s.tokenizer_overrides.eos_token = "\n";
  auto d = LoadTrainingData(s, config_, 64);
  ASSERT_TRUE(d.ok()) << d.status();
  const int32_t newline = CharIds("\n")[0];
  EXPECT_EQ(d->train[0].chosen, Cat(CharIds("2"), {newline}));
  EXPECT_EQ(d->options.eos_id, newline);

  const std::string chat = dir_.Write("turns.jsonl", R"({"prompt": [{"role": "user", "content": "1+1"}], )"
                                                     R"("chosen": [{"role": "assistant", "content": "2"}], )"
                                                     R"("rejected": [{"role": "assistant", "content": "3"}]})"
                                                     "\n");
  // The template ends each turn with a newline, as Qwen's ends it with <|im_end|>: a model whose EOS is
  // another token never learns to stop, until the end of turn is made the EOS.
  const std::string jinja =
      dir_.Write("turns.jinja", "{% for m in messages %}{{ m['content'] }}\n{% endfor %}");
  auto template_without_eos = [](const TrainingData& t) {
    for (const DataLint& l : t.report.lints) {
      if (l.name == "chat-rendered responses that never hold the EOS token") return l.count;
    }
    return size_t{999};
  };
  DataSource own_eos = Source(chat);
  own_eos.tokenizer_overrides.chat_template = jinja;
  auto plain = LoadTrainingData(own_eos, config_, 64);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->train[0].prompt, Cat({kCharBos}, CharIds("1+1\n")));
  EXPECT_EQ(plain->train[0].chosen, CharIds("2\n"));  // a chat rendering: no EOS appended
  EXPECT_EQ(template_without_eos(*plain), 2u);

  DataSource both = own_eos;
  both.tokenizer_overrides.eos_token = "\n";
  auto turns = LoadTrainingData(both, config_, 64);
  ASSERT_TRUE(turns.ok()) << turns.status();
  EXPECT_EQ(turns->train[0].prompt, plain->train[0].prompt);
  EXPECT_EQ(turns->train[0].chosen, plain->train[0].chosen);
  EXPECT_EQ(template_without_eos(*turns), 0u);

  // Token ids only: nothing to change, and the job is told so rather than silently ignoring the fields.
  DataSource ids = DataSourceOfDirectory(dir_.path().string());
  ids.tokenizer_overrides.chat_template = jinja;
  auto refused = LoadTrainingData(ids, config_, 64);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("data.eos_token and data.chat_template change a tokenizer"),
            std::string::npos)
      << refused.status();
}

TEST_F(TrainingDataTest, TruncationIsReportedAndApplied) {
  const std::string train = dir_.Write(
      "long.jsonl", "{\"prompt\": \"123456789+1=\", \"chosen\": \"123456790\", \"rejected\": \"1\"}\n");
  auto d = LoadTrainingData(Source(train), config_, 12);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->report.truncated_pairs, 1u);
  EXPECT_EQ(d->report.sequence.max, 1u + 12u + 9u + 1u) << "measured before truncation";
  const PreferencePair& p = d->train[0];
  EXPECT_EQ(p.prompt.size(), 6u) << "max_prompt_length defaults to max_length / 2";
  EXPECT_EQ(p.prompt[0], kCharBos) << "BOS is kept";
  EXPECT_EQ(p.prompt.size() + p.chosen.size(), 12u);
  EXPECT_NE(p.chosen.back(), kCharEos) << "a cut response loses its EOS";
}

TEST_F(TrainingDataTest, TokenIdFilesNeedNoTokenizer) {
  const std::string train =
      dir_.Write("train_ids.jsonl", "{\"prompt_ids\": [3], \"chosen_ids\": [4], \"rejected_ids\": [5]}\n");
  dir_.Write("test_ids.jsonl", "{\"prompt_ids\": [3], \"chosen_ids\": [5], \"rejected_ids\": [4]}\n");
  auto d = LoadTrainingData(DataSourceOfDirectory(dir_.path().string()), config_, 64);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->train[0].prompt, (std::vector<int32_t>{kCharBos, 3}));
  EXPECT_EQ(d->test[0].chosen, (std::vector<int32_t>{5, kCharEos}));
  auto pad_lint = [](const TrainingData& t) { return t.report.lints.at(0); };
  EXPECT_EQ(pad_lint(*d).name, "pad == eos in the tokenizer config");
  EXPECT_EQ(pad_lint(*d).count, 1u) << "config.json names no pad token";
  config_.pad_token_id = 5;
  auto padded = LoadTrainingData(DataSourceOfDirectory(dir_.path().string()), config_, 64);
  ASSERT_TRUE(padded.ok()) << padded.status();
  EXPECT_EQ(pad_lint(*padded).count, 0u) << "config.json's pad_token_id differs from EOS";
}

TEST_F(TrainingDataTest, ErrorsNameTheFileAndWhatToChange) {
  const std::string text =
      dir_.Write("t.jsonl", "{\"prompt\": \"1\", \"chosen\": \"2\", \"rejected\": \"3\"}\n");
  DataSource no_tok;
  no_tok.train = text;
  auto a = LoadTrainingData(no_tok, config_, 64);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find(text + ":1: "), std::string::npos) << a.status();
  EXPECT_NE(a.status().message().find("tokenizer"), std::string::npos) << a.status();

  core::HfModelConfig small = config_;
  small.vocab_size = 10;
  auto b = LoadTrainingData(Source(text), small, 64);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("vocab_size is 10"), std::string::npos) << b.status();

  auto c = LoadTrainingData(Source(dir_.File("missing.jsonl")), config_, 64);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("missing.jsonl"), std::string::npos) << c.status();

  EXPECT_FALSE(ParseAddBos("maybe", "data.add_bos").ok());
  EXPECT_EQ(*ParseAddBos("auto", "x"), std::nullopt);
  EXPECT_EQ(TokenizerDirOf(dir_.File("nowhere")), "");
}

}  // namespace
}  // namespace zerofit::data
