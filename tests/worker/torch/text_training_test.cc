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

}  // namespace
}  // namespace zerofit::worker
