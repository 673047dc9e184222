// The reward read-out against transformers: for each pad/eos setup, zerofit scores a right-padded batch of
// preference pairs, exports the model, and an independent re-implementation of transformers'
// GenericForSequenceClassification read-out (written from its source, driven only by the exported
// config.json and model.safetensors) must give the same scores; PreferenceSession trained on each setup must
// evaluate the loss the exported model gives under that read-out. The model is a tiny random Llama built from
// the field set of a real Llama 3.2 config.json.
#include "worker/torch/model/reward_readout.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "comm/local/local_communicator.h"
#include "core/hf_config.h"
#include "core/safetensors.h"
#include "tests/support/float_bounds.h"
#include "tests/support/temp_dir.h"
#include "worker/data/preference_dataset.h"
#include "worker/torch/model/llama_model.h"
#include "worker/torch/train/pair_tensors.h"
#include "worker/torch/train/preference_session.h"

namespace zerofit::worker {
namespace {

using zerofit::test_support::TempDir;

constexpr int64_t kBos = 1, kEos = 2, kVocab = 64;

// meta-llama/Llama-3.2-1B's config.json with its dimensions shrunk (and its eos list cut to one id).
constexpr const char* kLlamaConfig = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 1, "eos_token_id": 2, "head_dim": 8, "hidden_act": "silu", "hidden_size": 32,
  "initializer_range": 0.02, "intermediate_size": 64, "max_position_embeddings": 128, "mlp_bias": false,
  "model_type": "llama", "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 16, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "float32", "use_cache": true,
  "vocab_size": 64})";

core::HfModelConfig RewardConfig(std::optional<int64_t> pad) {
  auto c = core::ParseHfConfig(kLlamaConfig, "kLlamaConfig");
  EXPECT_TRUE(c.ok()) << c.status();
  c->pad_token_id = pad;
  c->num_labels = 1;
  return *c;
}

LlamaModel RandomRewardModel(const core::HfModelConfig& config) {
  LlamaOptions o;
  o.reward_head = true;
  auto m = MakeLlamaModel(config, o);
  EXPECT_TRUE(m.ok()) << m.status();
  torch::manual_seed(21);
  torch::NoGradGuard no_grad;
  for (auto& item : (*m)->named_parameters()) {
    const bool norm = item.key().find("norm.weight") != std::string::npos;
    item.value().copy_(norm ? 1 + 0.2 * torch::randn(item.value().sizes())
                            : 0.2 * torch::randn(item.value().sizes()));
  }
  (*m)->eval();
  return *m;
}

// Pairs as the data loader builds them (BOS prompt response EOS). Content tokens are 3..63, plus on purpose:
// pad candidate 0 inside a prompt, EOS inside a prompt, and a response whose raw text already ends in EOS
// (so the row ends EOS EOS before its padding).
std::vector<data::PreferencePair> Pairs() {
  const std::vector<std::vector<std::vector<int32_t>>> raw = {
      {{5, 6, 7}, {8, 9}, {10, 11, 12, 13, 14}},
      {{15, 0, 16}, {17}, {18, 19, 20}},
      {{21, static_cast<int32_t>(kEos), 22, 23}, {24, 25, 26}, {27}},
      {{28}, {29, 30, static_cast<int32_t>(kEos)}, {31, 32, 33, 34, 35, 36, 37}},
  };
  data::PreferenceDataOptions o;
  o.max_length = 0;
  std::vector<data::PreferencePair> pairs;
  for (size_t i = 0; i < raw.size(); ++i)
    pairs.push_back(data::AssemblePreferencePair(raw[i][0], raw[i][1], raw[i][2], kBos, kEos, o, i + 1));
  return pairs;
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

// transformers' GenericForSequenceClassification.forward read-out, transcribed: `logits` [B, T, L] are the
// score head over every position, `config` the exported config.json. Returns pooled logits [B, L];
// nullopt where transformers raises ("Cannot handle batch sizes > 1 if no padding token is defined.").
std::optional<torch::Tensor> TransformersPooledLogits(const torch::Tensor& input_ids,
                                                      const torch::Tensor& logits,
                                                      const nlohmann::json& config) {
  const int64_t batch_size = input_ids.size(0);
  const bool no_pad = !config.contains("pad_token_id") || config["pad_token_id"].is_null();
  if (no_pad && batch_size != 1) return std::nullopt;
  torch::Tensor last_non_pad_token;
  if (no_pad) {
    last_non_pad_token = torch::full({batch_size}, -1, torch::kLong);
  } else {
    const int64_t pad_token_id = config["pad_token_id"].get<int64_t>();
    const torch::Tensor non_pad_mask = (input_ids != pad_token_id).to(torch::kInt32);
    const torch::Tensor token_indices = torch::arange(input_ids.size(-1), torch::kInt32);
    last_non_pad_token = (token_indices * non_pad_mask).argmax(-1);
  }
  // logits[arange(B), idx], with Python's negative indexing.
  last_non_pad_token = torch::remainder(last_non_pad_token.to(torch::kLong), input_ids.size(-1));
  return logits.index({torch::arange(batch_size), last_non_pad_token});
}

// Scores of `tokens` by the exported model in `dir`, through transformers' read-out: one padded batch with a
// pad id, row by row (each cut to its length, as transformers needs then) without one. [B].
torch::Tensor ExportedScores(const std::string& dir, const torch::Tensor& tokens,
                             const torch::Tensor& lengths) {
  const nlohmann::json json = ReadJson(dir + "/config.json");
  auto config = core::LoadHfConfig(dir + "/config.json");
  EXPECT_TRUE(config.ok()) << config.status();
  LlamaOptions o;
  o.reward_head = true;
  auto model = MakeLlamaModel(*config, o);
  EXPECT_TRUE(model.ok()) << model.status();
  auto weights = core::SafetensorsModel::Open(dir);
  EXPECT_TRUE(weights.ok()) << weights.status();
  EXPECT_TRUE((*model)->LoadWeights(*weights).ok());
  (*model)->eval();
  // The score head straight from the file, not from the loaded module.
  const core::StTensorInfo* info = weights->Find("score.weight");
  EXPECT_NE(info, nullptr);
  torch::Tensor score = torch::empty(info->shape, torch::kFloat32);
  EXPECT_TRUE(weights->Read("score.weight", score.data_ptr(), score.nbytes()).ok());
  auto pooled = [&](const torch::Tensor& ids) {
    const torch::Tensor logits = torch::matmul((*model)->Hidden(ids), score.t());
    std::optional<torch::Tensor> p = TransformersPooledLogits(ids, logits, json);
    EXPECT_TRUE(p.has_value()) << "transformers refuses this batch";
    return p ? p->squeeze(-1) : torch::zeros({ids.size(0)});
  };
  if (json.contains("pad_token_id")) return pooled(tokens);
  std::vector<torch::Tensor> rows;
  for (int64_t b = 0; b < tokens.size(0); ++b)
    rows.push_back(pooled(tokens[b].slice(0, 0, lengths[b].item<int64_t>()).unsqueeze(0)));
  return torch::cat(rows);
}

struct PadSetup {
  const char* name;
  std::optional<int64_t> pad;
};

void PrintTo(const PadSetup& s, std::ostream* os) { *os << s.name; }

class RewardReadoutTest : public ::testing::TestWithParam<PadSetup> {};

TEST_P(RewardReadoutTest, ExportedModelScoresLikeTraining) {
  const PadSetup setup = GetParam();
  const core::HfModelConfig config = RewardConfig(setup.pad);
  LlamaModel model = RandomRewardModel(config);
  const std::vector<data::PreferencePair> pairs = Pairs();
  auto batch = MakePairTensors(pairs, {0, 1, 2, 3}, BatchFormatOf(config, /*reward_model=*/true));
  ASSERT_TRUE(batch.ok()) << batch.status();
  torch::NoGradGuard no_grad;
  // Training reads the scores at the positions found on the host where the batch was built; the checking
  // Scores finds the same ones.
  const torch::Tensor trained = model->ScoresAt(batch->tokens, batch->readout);
  EXPECT_TRUE(torch::equal(trained, model->Scores(batch->tokens, batch->lengths)));

  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  ASSERT_TRUE(model->ExportHf(dir.path(), config).ok());
  const nlohmann::json json = ReadJson(dir.path() + "/config.json");
  EXPECT_EQ(json["architectures"], nlohmann::json::array({"LlamaForSequenceClassification"}));
  EXPECT_EQ(json["num_labels"], 1);
  EXPECT_EQ(json["eos_token_id"], kEos);
  if (setup.pad) {
    EXPECT_EQ(json["pad_token_id"], *setup.pad);
  } else {
    EXPECT_FALSE(json.contains("pad_token_id"));
  }

  const torch::Tensor exported = ExportedScores(dir.path(), batch->tokens, batch->lengths);
  ASSERT_EQ(exported.sizes(), trained.sizes());
  // Two float32 evaluations of one model (one padded batch against row by row), each within the float32
  // forward bound of the exact scores.
  const double bound = 2 * test_support::Float32ForwardBound(config, batch->tokens.size(1),
                                                             trained.abs().max().item<double>());
  EXPECT_LE((exported - trained).abs().max().item<double>(), bound)
      << "trained " << trained << " exported " << exported;
}

// Writes a data directory for PreferenceSession: config.json (kLlamaConfig with `pad`) and
// {train,test}_ids.jsonl with random content tokens (the loader adds BOS and EOS).
void WriteDataDir(const std::string& dir, std::optional<int64_t> pad, int pairs) {
  nlohmann::json config = nlohmann::json::parse(kLlamaConfig);
  if (pad) config["pad_token_id"] = *pad;
  std::ofstream(dir + "/config.json") << config.dump(2);
  torch::manual_seed(33);
  auto ids = [](int64_t n) {
    const torch::Tensor t = torch::randint(3, kVocab, {n}, torch::kLong);
    return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + n);
  };
  for (const char* split : {"train", "test"}) {
    std::ofstream out(dir + "/" + split + "_ids.jsonl");
    for (int i = 0; i < pairs; ++i) {
      out << nlohmann::json{{"prompt_ids", ids(1 + i % 4)},
                            {"chosen_ids", ids(1 + i % 3)},
                            {"rejected_ids", ids(1 + (i + 1) % 5)}}
                 .dump()
          << "\n";
    }
  }
}

// The trainer end to end: a few reward-model steps, then its held-out loss must equal the Bradley-Terry loss
// of the exported model's scores under transformers' read-out.
TEST_P(RewardReadoutTest, TrainedSessionExportsWhatItEvaluates) {
  const PadSetup setup = GetParam();
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  constexpr int kPairs = 8;
  WriteDataDir(dir.path(), setup.pad, kPairs);
  PreferenceTrainOptions o;
  o.task = PreferenceTrainOptions::Task::kReward;
  o.model_dir = dir.path();
  o.data = data::DataSourceOfDirectory(dir.path());
  o.schedule.peak_lr = 1e-2f;
  comm::LocalCommunicator comm;
  auto session = PreferenceSession::Create(o, {}, &comm);
  ASSERT_TRUE(session.ok()) << session.status();
  for (int64_t step = 1; step <= 3; ++step) {
    auto r = (*session)->Step(step, {{0, 1, 2, 3}, {4, 5, 6, 7}});
    ASSERT_TRUE(r.ok()) << r.status();
  }
  auto eval = (*session)->Evaluate();
  ASSERT_TRUE(eval.ok()) << eval.status();
  ASSERT_TRUE((*session)->Export(dir.path() + "/export").ok());

  data::PreferenceDataOptions dopt;
  dopt.bos_id = kBos;
  dopt.eos_id = kEos;
  dopt.vocab_size = kVocab;
  auto pairs = data::LoadPreferenceJsonl(dir.path() + "/test_ids.jsonl", nullptr, dopt);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  std::vector<uint64_t> all(kPairs);
  for (int i = 0; i < kPairs; ++i) all[i] = i;
  // Padded with the exported config's own pad id (transformers' user pads with the tokenizer's).
  auto exported_config = core::LoadHfConfig(dir.path() + "/export/config.json");
  ASSERT_TRUE(exported_config.ok()) << exported_config.status();
  BatchFormat format;
  format.pad_id = BatchPadId(*exported_config);
  auto batch = MakePairTensors(*pairs, all, format);
  ASSERT_TRUE(batch.ok()) << batch.status();
  torch::NoGradGuard no_grad;
  const torch::Tensor s = ExportedScores(dir.path() + "/export", batch->tokens, batch->lengths);
  const double loss = torch::softplus(s.slice(0, kPairs) - s.slice(0, 0, kPairs)).sum().item<double>();
  // Each pair's loss softplus(s_r - s_c) moves by at most |d s_r| + |d s_c| (its slope is below 1), each
  // score within twice the float32 forward bound of the trainer's; plus the float32 sum of kPairs terms.
  const double score_bound = 2 * test_support::Float32ForwardBound(*exported_config, batch->tokens.size(1),
                                                                   s.abs().max().item<double>());
  EXPECT_NEAR(loss, eval->metrics.loss_sum,
              kPairs * (2 * score_bound + std::ldexp(1.0, -24) * std::max(1.0, loss)));
}

INSTANTIATE_TEST_SUITE_P(PadEosSetups, RewardReadoutTest,
                         ::testing::Values(PadSetup{"pad_differs_from_eos", 0}, PadSetup{"pad_is_eos", kEos},
                                           PadSetup{"no_pad", std::nullopt}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(RewardReadoutPositionsTest, PadEqualToEosReadsTheTokenBeforeTheTrailingEos) {
  // BOS a EOS b EOS | EOS EOS: the last token that is not EOS is b (the EOS inside the row does not count).
  const torch::Tensor ids =
      torch::tensor(std::vector<int64_t>{kBos, 5, kEos, 6, kEos, kEos, kEos}).view({1, 7});
  EXPECT_EQ(RewardReadoutPositions(ids, torch::tensor({5}, torch::kLong), kEos).item<int64_t>(), 3);
  // The same row padded with a pad id of its own: the EOS that ends it is read.
  const torch::Tensor padded = torch::tensor(std::vector<int64_t>{kBos, 5, kEos, 6, kEos, 0, 0}).view({1, 7});
  EXPECT_EQ(RewardReadoutPositions(padded, torch::tensor({5}, torch::kLong), 0).item<int64_t>(), 4);
  EXPECT_EQ(RewardReadoutPositions(ids, torch::tensor({5}, torch::kLong), std::nullopt).item<int64_t>(), 4);
}

TEST(RewardReadoutPositionsTest, RefusesPaddingTransformersWouldRead) {
  const torch::Tensor ids = torch::tensor(std::vector<int64_t>{kBos, 5, kEos, 9, 9}).view({1, 5});
  EXPECT_THROW(RewardReadoutPositions(ids, torch::tensor({3}, torch::kLong), 0), c10::Error);
  const torch::Tensor all_pad = torch::zeros({1, 3}, torch::kLong);
  EXPECT_THROW(RewardReadoutPositions(all_pad, torch::tensor({2}, torch::kLong), 0), c10::Error);
}

TEST(RewardReadoutPositionsTest, ABatchTheRuleRefusesIsRefusedWhereItIsBuiltNamingItsPairs) {
  // pad == EOS: pair 1's chosen row is BOS-less EOS EOS, no token a score could be read from.
  std::vector<data::PreferencePair> pairs(2);
  pairs[0].prompt = {kBos, 5};
  pairs[0].chosen = {6, kEos};
  pairs[0].rejected = {7, kEos};
  pairs[1].prompt = {kEos};
  pairs[1].chosen = {kEos};
  pairs[1].rejected = {8, kEos};
  const BatchFormat format = BatchFormatOf(RewardConfig(kEos), /*reward_model=*/true);
  const auto refused = MakePairTensors(pairs, {0, 1}, format);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("pairs [0, 1]"), std::string::npos) << refused.status();
  EXPECT_NE(refused.status().message().find("no token other than pad_token_id"), std::string::npos)
      << refused.status();
  // The same pairs build for a task that reads no score.
  BatchFormat pad_only;
  pad_only.pad_id = format.pad_id;
  EXPECT_TRUE(MakePairTensors(pairs, {0, 1}, pad_only).ok());
  const auto fine = MakePairTensors(pairs, {0}, format);
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_TRUE(torch::equal(fine->readout, torch::tensor({2, 2}, torch::kLong)));  // the tokens before EOS
}

TEST(RewardReadoutConfigTest, PadOutsideTheVocabularyIsRefused) {
  core::HfModelConfig config = RewardConfig(kVocab);
  LlamaOptions o;
  o.reward_head = true;
  const absl::StatusOr<LlamaModel> m = MakeLlamaModel(config, o);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("pad_token_id"), std::string::npos) << m.status();
}

TEST(RewardReadoutConfigTest, ExportRefusesAnotherPadId) {
  LlamaModel model = RandomRewardModel(RewardConfig(kEos));
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const absl::Status s = model->ExportHf(dir.path(), RewardConfig(0));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("pad_token_id"), std::string::npos) << s;
}

}  // namespace
}  // namespace zerofit::worker
