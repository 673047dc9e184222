// Training on text: pairs tokenized in the training process with the model directory's tokenizer.json train
// exactly the model that the same pairs as token ids train, and evaluating during training leaves the
// trained model unchanged.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "comm/local/local_communicator.h"
#include "nlohmann/json.hpp"
#include "tests/worker/data/char_model_dir.h"
#include "tests/worker/data/test_support.h"
#include "worker/torch/train/named_step_metrics.h"
#include "worker/torch/train/preference_session.h"

namespace zerofit::worker {
namespace {

using data::testing::CharIds;
using data::testing::ScopedTempDir;

// `n` sums "a+b=" with the right answer chosen and an off-by-one answer rejected, as text and as ids.
void WritePairs(const ScopedTempDir& dir, const std::string& split, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::ofstream text(dir.File(split + ".jsonl")), ids(dir.File(split + "_ids.jsonl"));
  for (int i = 0; i < n; ++i) {
    const int a = static_cast<int>(rng() % 50), b = static_cast<int>(rng() % 50);
    const std::string prompt = std::to_string(a) + "+" + std::to_string(b) + "=";
    const std::string chosen = std::to_string(a + b), rejected = std::to_string(a + b + 1);
    text << nlohmann::json{{"prompt", prompt}, {"chosen", chosen}, {"rejected", rejected}}.dump() << "\n";
    ids << nlohmann::json{{"prompt_ids", CharIds(prompt)},
                          {"chosen_ids", CharIds(chosen)},
                          {"rejected_ids", CharIds(rejected)}}
               .dump()
        << "\n";
  }
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// SFT conversations of `turns` sums each ("a+b=" answered by the single-digit sum), written as `messages`
// lines to NAME.jsonl and, for one turn, as prompt-completion lines to NAME_pc.jsonl.
void WriteConversations(const ScopedTempDir& dir, const std::string& name, int n, int turns, uint32_t seed) {
  std::mt19937 rng(seed);
  std::ofstream messages(dir.File(name + ".jsonl")), pc(dir.File(name + "_pc.jsonl"));
  for (int i = 0; i < n; ++i) {
    nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
    for (int t = 0; t < turns; ++t) {
      const int a = static_cast<int>(rng() % 5), b = static_cast<int>(rng() % 5);
      msgs.push_back({{"role", "user"}, {"content", std::to_string(a) + "+" + std::to_string(b) + "="}});
      msgs.push_back({{"role", "assistant"}, {"content", std::to_string(a + b)}});
    }
    messages << nlohmann::ordered_json{{"messages", msgs}}.dump() << "\n";
    pc << nlohmann::ordered_json{{"prompt", {msgs[0]}}, {"completion", {msgs[1]}}}.dump() << "\n";
  }
}

class TextTrainingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data::testing::WriteCharModelDir(dir_.path().string());
    WritePairs(dir_, "train", 64, 7);
    WritePairs(dir_, "test", 32, 8);
  }
  PreferenceTrainOptions Options(const std::string& export_name) const {
    PreferenceTrainOptions o;
    o.task = PreferenceTrainOptions::Task::kReward;
    o.model_dir = dir_.path().string();
    o.steps = 6;
    o.global_batch = 16;
    o.gradient_accumulation = 2;
    o.schedule.peak_lr = 3e-3f;
    o.max_length = 32;
    o.export_dir = dir_.File(export_name);
    return o;
  }
  PreferenceTrainOptions FromText(const std::string& export_name) const {
    PreferenceTrainOptions o = Options(export_name);
    o.data.train = dir_.File("train.jsonl");
    o.data.test = dir_.File("test.jsonl");
    o.data.tokenizer_dir = data::TokenizerDirOf(dir_.path().string());
    return o;
  }
  ScopedTempDir dir_;
};

TEST_F(TextTrainingTest, TextTokenizedInTheTrainerTrainsTheSameModelAsTokenIds) {
  comm::LocalCommunicator comm;
  PreferenceTrainOptions ids = Options("from_ids");
  ids.data = data::DataSourceOfDirectory(dir_.path().string());
  auto a = TrainPreferences(FromText("from_text"), {}, &comm);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = TrainPreferences(ids, {}, &comm);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->after.metrics.pairs, 32);
  EXPECT_EQ(a->after.metrics.loss_sum, b->after.metrics.loss_sum);
  const std::string weights = ReadBytes(dir_.File("from_text/model.safetensors"));
  ASSERT_FALSE(weights.empty());
  EXPECT_TRUE(weights == ReadBytes(dir_.File("from_ids/model.safetensors")));
}

// A reward model's step is the mean over its pairs (SFT's over its scored tokens, below).
TEST_F(TextTrainingTest, ARewardStepIsTheMeanOverItsPairs) {
  comm::LocalCommunicator comm;
  std::vector<double> units;
  TrainHooks hooks;
  hooks.on_step = [&](const StepReport& r) {
    units.push_back(r.result.units);
    return absl::OkStatus();
  };
  ASSERT_TRUE(TrainPreferences(FromText("reward_units"), {}, &comm, hooks).ok());
  EXPECT_EQ(units, std::vector<double>(6, 16.0));
}

TEST_F(TextTrainingTest, EvaluationDuringTrainingDoesNotChangeTheModel) {
  comm::LocalCommunicator comm;
  PreferenceTrainOptions with_eval = FromText("with_eval");
  with_eval.eval_every = 2;
  with_eval.eval_max_samples = 20;
  std::vector<int64_t> evaluated;
  bool started = false;
  TrainHooks hooks;
  hooks.on_start = [&](const PreferenceSession& session, const EvalReport& before) {
    started = true;
    EXPECT_EQ(session.data_report().pairs, 64u);
    EXPECT_EQ(before.metrics.pairs, 20) << "eval_max_samples";
    return absl::OkStatus();
  };
  hooks.on_step = [&](const StepReport& r) {
    if (r.eval) {
      evaluated.push_back(r.step);
      EXPECT_EQ(r.eval->metrics.pairs, 20);
    }
    return absl::OkStatus();
  };
  auto a = TrainPreferences(with_eval, {}, &comm, hooks);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(started);
  EXPECT_EQ(evaluated, (std::vector<int64_t>{1, 3, 5})) << "after steps 2, 4 and 6 (0-based 1, 3, 5)";
  auto b = TrainPreferences(FromText("without_eval"), {}, &comm);
  ASSERT_TRUE(b.ok()) << b.status();
  const std::string weights = ReadBytes(dir_.File("with_eval/model.safetensors"));
  ASSERT_FALSE(weights.empty());
  EXPECT_TRUE(weights == ReadBytes(dir_.File("without_eval/model.safetensors")));
}

// assistant_only_loss through the trainer, and SFT's per-token mean. A one-turn conversation trains exactly
// the model its prompt-completion twin trains (both score the assistant's turn alone), and each step of
// two-turn conversations scores the assistant's tokens only: per conversation its two answers with the
// template's "\n" after each (4 tokens; no EOS is appended to a chat rendering, as in TRL), where the whole
// conversation would be 48.
TEST_F(TextTrainingTest, SftAssistantOnlyLossScoresTheAssistantsTurns) {
  WriteConversations(dir_, "one", 64, 1, 11);
  WriteConversations(dir_, "two", 64, 2, 12);
  comm::LocalCommunicator comm;
  auto sft = [&](const std::string& file, bool assistant_only, const std::string& export_name) {
    PreferenceTrainOptions o = FromText(export_name);
    o.task = PreferenceTrainOptions::Task::kSft;
    o.data.train = dir_.File(file);
    o.data.test = dir_.File(file);
    o.data.assistant_only_loss = assistant_only;
    o.max_length = 64;  // nothing truncated: a two-turn conversation is 49 tokens
    return o;
  };
  auto a = TrainPreferences(sft("one.jsonl", true, "messages"), {}, &comm);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = TrainPreferences(sft("one_pc.jsonl", false, "prompt_completion"), {}, &comm);
  ASSERT_TRUE(b.ok()) << b.status();
  const std::string weights = ReadBytes(dir_.File("messages/model.safetensors"));
  ASSERT_FALSE(weights.empty());
  EXPECT_TRUE(weights == ReadBytes(dir_.File("prompt_completion/model.safetensors")));

  std::vector<double> scored, whole;
  auto count = [](std::vector<double>* out) {
    TrainHooks hooks;
    hooks.on_step = [out](const StepReport& r) {
      out->push_back(r.metrics.response_tokens);
      // The step's gradient is the mean over these tokens (TRL's), counted on the host as on the device,
      // and the loss every line and sink shows is that mean.
      EXPECT_EQ(r.result.units, r.metrics.response_tokens) << "step " << r.step;
      const metrics::StepMetrics named =
          NamedStepMetrics(r, PreferenceTrainOptions::Task::kSft, HostSample{});
      EXPECT_EQ(named.Get(metrics::metric_names::kLoss), r.metrics.loss_sum / r.metrics.response_tokens)
          << "step " << r.step;
      return absl::OkStatus();
    };
    return hooks;
  };
  ASSERT_TRUE(TrainPreferences(sft("two.jsonl", true, "two_turns"), {}, &comm, count(&scored)).ok());
  ASSERT_TRUE(TrainPreferences(sft("two.jsonl", false, "two_whole"), {}, &comm, count(&whole)).ok());
  EXPECT_EQ(scored, std::vector<double>(6, 16 * 4.0)) << "16 conversations a step";
  // Without assistant_only_loss every token after the template's "<s>" (which has no prediction) is scored:
  // "user: a+b=\nassistant: c\n" twice.
  EXPECT_EQ(whole, std::vector<double>(6, 16 * 48.0));
}

}  // namespace
}  // namespace zerofit::worker
