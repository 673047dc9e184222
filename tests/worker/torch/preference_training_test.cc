// Reward-model and DPO training end to end on the synthetic arithmetic task, through ZeRO-2 (+ offload) on
// the MPI ranks of the test (run with 2): learning happens, the three DPO reference strategies agree, and the
// exported Hugging Face model reproduces the trained scores.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include "comm/communicator_factory.h"
#include "core/hf_config.h"
#include "core/safetensors.h"
#include "core/status_macros.h"
#include "tests/support/mpi_test_env.h"
#include "worker/torch/train/named_step_metrics.h"
#include "worker/torch/train/preference_session.h"

namespace zerofit::worker {
namespace {

std::unique_ptr<comm::Communicator> MakeComm() {
  torch::set_num_threads(1);  // one intra-op thread per rank: the ranks already fill the cores
  comm::CommOptions options;
  options.timeout = absl::Seconds(60);  // a failing rank must not keep the others waiting for minutes
  auto c = comm::CreateHostCommunicator(testing::MpiEnv(), options);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

// Rank 0 generates the data set into a directory all ranks share (named after mpiexec, the ranks' parent,
// and `name`); zero-padded to fixed widths unless `pad` is false (then answers differ in length).
std::string MakeData(comm::Communicator& comm, const std::string& flags = "--train 4000 --test 400",
                     const std::string& name = "", bool pad = true) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("zerofit_prefs_" + std::to_string(getppid()) + name))
          .string();
  if (comm.rank() == 0) {
    const std::string cmd = std::string(ZEROFIT_MAKE_ARITH_PREFS) + " --out " + dir + " " + flags +
                            " --max-operand 99 --ids" + (pad ? " --pad" : "") + " > /dev/null";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  EXPECT_TRUE(comm.Barrier(absl::Seconds(60)).ok());
  return dir;
}

PreferenceTrainOptions Base(const std::string& dir) {
  PreferenceTrainOptions o;
  o.model_dir = dir;
  o.data = data::DataSourceOfDirectory(dir);
  o.global_batch = 32;
  o.gradient_accumulation = 2;
  o.schedule.peak_lr = 3e-3f;
  o.offload = true;
  return o;
}

// One CPU AdamW thread per rank, held-out pairs in batches of 100.
RuntimeOptions Runtime() {
  RuntimeOptions r;
  r.offload_threads = 1;
  r.eval_batch = 100;
  return r;
}

// Supervised fine-tuning on the chosen answers, exported to dir/sft: where DPO and reward models start.
absl::StatusOr<TrainReport> TrainSft(const std::string& dir, int64_t steps, comm::Communicator* comm) {
  PreferenceTrainOptions sft = Base(dir);
  sft.task = PreferenceTrainOptions::Task::kSft;
  sft.global_batch = 64;
  sft.gradient_accumulation = 1;
  sft.steps = steps;
  sft.export_dir = dir + "/sft";
  auto report = TrainPreferences(sft, Runtime(), comm);
  ZF_RETURN_IF_ERROR(comm->Barrier(absl::Seconds(60)));
  return report;
}

TEST(PreferenceTrainingTest, RewardModelLearnsAndItsExportReproducesTheScores) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string dir = MakeData(*comm);
  PreferenceTrainOptions o = Base(dir);
  o.task = PreferenceTrainOptions::Task::kReward;
  o.steps = 120;
  o.model.activation_checkpointing = true;
  o.export_dir = dir + "/export";
  auto report = TrainPreferences(o, Runtime(), comm.get());
  ASSERT_TRUE(report.ok()) << report.status();
  if (comm->rank() == 0) {
    std::printf("reward: held-out accuracy %.3f -> %.3f, loss %.4f -> %.4f\n", report->before.accuracy(),
                report->after.accuracy(), report->before.metrics.loss_sum / report->before.metrics.pairs,
                report->after.metrics.loss_sum / report->after.metrics.pairs);
  }
  EXPECT_LT(report->after.metrics.loss_sum, report->before.metrics.loss_sum);
  EXPECT_GT(report->after.accuracy(), report->before.accuracy());
  ASSERT_TRUE(comm->Barrier(absl::Seconds(60)).ok());
  // The export is a LlamaForSequenceClassification with one label that our loader reads back.
  auto config = core::LoadHfConfig(dir + "/export/config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, "LlamaForSequenceClassification");
  EXPECT_EQ(config->num_labels, 1);
  auto weights = core::SafetensorsModel::Open(dir + "/export");
  ASSERT_TRUE(weights.ok()) << weights.status();
  EXPECT_NE(weights->Find("score.weight"), nullptr);
  // Loading it and evaluating reproduces the trained model's held-out loss.
  PreferenceTrainOptions again = Base(dir);
  again.task = PreferenceTrainOptions::Task::kReward;
  again.steps = 0;
  again.init_weights = dir + "/export";
  auto re = TrainPreferences(again, Runtime(), comm.get());
  ASSERT_TRUE(re.ok()) << re.status();
  EXPECT_NEAR(re->before.metrics.loss_sum, report->after.metrics.loss_sum,
              1e-3 * report->after.metrics.loss_sum);
  EXPECT_EQ(re->before.metrics.correct, report->after.metrics.correct);
  EXPECT_TRUE(comm->Barrier(absl::Seconds(60)).ok());
  if (comm->rank() == 0) std::filesystem::remove_all(dir);
}

TEST(PreferenceTrainingTest, DpoReferenceStrategiesGiveTheSameTraining) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string dir = MakeData(*comm);
  std::vector<TrainReport> reports;
  for (ReferenceStrategy s :
       {ReferenceStrategy::kResident, ReferenceStrategy::kOffloaded, ReferenceStrategy::kPrecomputed}) {
    PreferenceTrainOptions o = Base(dir);
    o.task = PreferenceTrainOptions::Task::kDpo;
    o.steps = 15;
    o.reference = s;
    o.dpo.beta = 0.1;
    auto r = TrainPreferences(o, Runtime(), comm.get());
    ASSERT_TRUE(r.ok()) << ReferenceStrategyName(s) << ": " << r.status();
    if (comm->rank() == 0) {
      std::printf(
          "dpo %-11s: held-out implicit-reward accuracy %.3f -> %.3f, loss %.5f -> %.5f, reference on device "
          "%zu B\n",
          ReferenceStrategyName(s), r->before.accuracy(), r->after.accuracy(),
          r->before.metrics.loss_sum / r->before.metrics.pairs,
          r->after.metrics.loss_sum / r->after.metrics.pairs, r->reference_device_bytes);
    }
    // The policy starts equal to the reference: h = 0 for every pair, loss log 2.
    // The reference is the initial policy (loss log 2 before training); the adapters train away from it.
    EXPECT_NEAR(r->before.metrics.loss_sum / r->before.metrics.pairs, std::log(2.0), 1e-5);
    EXPECT_NE(r->after.metrics.loss_sum, r->before.metrics.loss_sum);
    reports.push_back(*r);
  }
  EXPECT_GT(reports[0].reference_device_bytes, 0u);
  EXPECT_EQ(reports[1].reference_device_bytes, 0u);
  EXPECT_EQ(reports[2].reference_device_bytes, 0u);
  for (size_t i = 1; i < reports.size(); ++i) {
    EXPECT_NEAR(reports[i].after.metrics.loss_sum, reports[0].after.metrics.loss_sum,
                1e-4 * reports[0].after.metrics.loss_sum);
  }
  EXPECT_TRUE(comm->Barrier(absl::Seconds(60)).ok());
  if (comm->rank() == 0) std::filesystem::remove_all(dir);
}

// SimPO (dpo loss_type simpo, TRL's CPOTrainer with cpo_alpha 0) keeps no reference model at all: none is
// built (its reference strategy is left at the default, resident, which would hold a copy on the device: 0
// bytes there), and training lowers the held-out loss and raises the accuracy.
TEST(PreferenceTrainingTest, SimpoTrainsWithoutAReference) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string dir = MakeData(*comm);
  PreferenceTrainOptions o = Base(dir);
  o.task = PreferenceTrainOptions::Task::kDpo;
  o.steps = 15;
  o.dpo.loss = DpoOptions::Loss::kSimpo;
  o.dpo.beta = 2.0;
  o.dpo.simpo_gamma = 0.5;
  auto r = TrainPreferences(o, Runtime(), comm.get());
  ASSERT_TRUE(r.ok()) << r.status();
  if (comm->rank() == 0) {
    std::printf("simpo: held-out accuracy %.3f -> %.3f, loss %.5f -> %.5f, reference on device %zu B\n",
                r->before.accuracy(), r->after.accuracy(),
                r->before.metrics.loss_sum / r->before.metrics.pairs,
                r->after.metrics.loss_sum / r->after.metrics.pairs, r->reference_device_bytes);
  }
  EXPECT_EQ(r->reference_device_bytes, 0u);
  EXPECT_LT(r->after.metrics.loss_sum, r->before.metrics.loss_sum);
  EXPECT_GT(r->after.accuracy(), r->before.accuracy());
  EXPECT_TRUE(comm->Barrier(absl::Seconds(60)).ok());
  if (comm->rank() == 0) std::filesystem::remove_all(dir);
}

// ORPO (loss_type orpo) and CPO (reference_free with rpo_alpha 1, sigmoid) keep no reference model, and
// training lowers the held-out loss (the odds-ratio or preference term plus the chosen responses' NLL per
// token), lowers that NLL and raises the accuracy.
TEST(PreferenceTrainingTest, OrpoAndCpoTrainWithoutAReference) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string dir = MakeData(*comm);
  for (const char* name : {"orpo", "cpo"}) {
    SCOPED_TRACE(name);
    PreferenceTrainOptions o = Base(dir);
    o.task = PreferenceTrainOptions::Task::kDpo;
    o.steps = 15;
    o.dpo.loss = std::string(name) == "orpo" ? DpoOptions::Loss::kOrpo : DpoOptions::Loss::kSigmoid;
    o.dpo.reference_free = std::string(name) == "cpo";
    o.dpo.rpo_alpha = std::string(name) == "cpo" ? 1.0 : 0.0;
    o.dpo.beta = std::string(name) == "orpo" ? 1.0 : 0.5;
    auto r = TrainPreferences(o, Runtime(), comm.get());
    ASSERT_TRUE(r.ok()) << r.status();
    auto nll = [](const EvalReport& e) {
      return e.metrics.nll_sum / std::max(e.metrics.response_tokens, 1.0);
    };
    if (comm->rank() == 0) {
      std::printf(
          "%s: held-out accuracy %.3f -> %.3f, loss %.5f -> %.5f, nll per chosen token %.5f -> %.5f\n", name,
          r->before.accuracy(), r->after.accuracy(), MeanLoss(r->before.metrics, false),
          MeanLoss(r->after.metrics, false), nll(r->before), nll(r->after));
    }
    EXPECT_EQ(r->reference_device_bytes, 0u);
    EXPECT_GT(r->before.metrics.response_tokens, r->before.metrics.pairs) << "the chosen tokens are counted";
    EXPECT_LT(MeanLoss(r->after.metrics, false), MeanLoss(r->before.metrics, false));
    EXPECT_LT(nll(r->after), nll(r->before));
    EXPECT_GT(r->after.accuracy(), r->before.accuracy());
  }
  EXPECT_TRUE(comm->Barrier(absl::Seconds(60)).ok());
  if (comm->rank() == 0) std::filesystem::remove_all(dir);
}

// A weighted NLL (rpo_alpha) is a mean per chosen token of the whole step across ranks and micro-batches
// (objectives.h, BackwardLoss): the same 16 pairs split one micro-batch per rank, two per rank, or 12 on
// one rank and 4 on the other give the same first step, read as its gradient norm and loss. Taking each
// rank's or micro-batch's own tokens would weigh the NLL differently in each split.
TEST(PreferenceTrainingTest, TheNllTermIsTheSameWhateverTheSplitOfTheStep) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  // Unpadded: sums of 1 to 3 digits, so the chosen responses' lengths, and each part's tokens, differ.
  const std::string dir = MakeData(*comm, "--train 64 --test 16", "_split", /*pad=*/false);
  const int rank = comm->rank();
  struct Split {
    const char* name;
    std::vector<std::vector<uint64_t>> micro[2];  // each rank's micro-batches
  };
  auto range = [](uint64_t from, uint64_t to) {
    std::vector<uint64_t> ids;
    for (uint64_t i = from; i < to; ++i) ids.push_back(i);
    return ids;
  };
  const Split splits[] = {
      {"8 + 8", {{range(0, 8)}, {range(8, 16)}}},
      {"4 + 4 each", {{range(0, 4), range(4, 8)}, {range(8, 12), range(12, 16)}}},
      {"12 + 4", {{range(0, 12)}, {range(12, 16)}}},
  };
  std::vector<std::pair<double, double>> seen;  // grad norm, loss
  for (const Split& s : splits) {
    PreferenceTrainOptions o = Base(dir);
    o.task = PreferenceTrainOptions::Task::kDpo;
    o.dpo.reference_free = true;
    o.dpo.rpo_alpha = 2.0;
    o.global_batch = 16;
    o.gradient_accumulation = static_cast<int>(s.micro[0].size());
    o.steps = 1;
    auto session = PreferenceSession::Create(o, Runtime(), comm.get());
    ASSERT_TRUE(session.ok()) << session.status();
    absl::StatusOr<StepReport> sr = (*session)->Step(0, s.micro[rank]);
    ASSERT_TRUE(sr.ok()) << sr.status();
    ASSERT_EQ(sr->metrics.pairs, 16);
    seen.emplace_back(sr->result.grad_norm, MeanLoss(sr->metrics, false));
    if (rank == 0)
      std::printf("%s: grad norm %.7g, loss %.7g\n", s.name, seen.back().first, seen.back().second);
  }
  // float32 rounding of the same sums in other orders and padded shapes stays far below 1e-5 relative;
  // each rank taking its own tokens moves the 12 + 4 split's gradient norm by about 1e-3.
  for (size_t i = 1; i < seen.size(); ++i) {
    EXPECT_NEAR(seen[i].first, seen[0].first, 1e-5 * seen[0].first) << splits[i].name;
    EXPECT_NEAR(seen[i].second, seen[0].second, 1e-5 * seen[0].second) << splits[i].name;
  }
  EXPECT_TRUE(comm->Barrier(absl::Seconds(60)).ok());
  if (comm->rank() == 0) std::filesystem::remove_all(dir);
}

// DPO with LoRA scores its reference with the policy's own base, adapters disabled (lora-base, as TRL does
// with a PEFT model): no copy of the weights anywhere, and the same training bit for bit as with a resident
// copy of the initial policy (whose adapters are B = 0, so they add exact zeros). Adapter dropout is on: the
// reference forward must not apply it (the copy runs in eval mode; the base skips the adapters).
TEST(PreferenceTrainingTest, DpoWithLoraScoresItsReferenceWithTheBaseNotACopy) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string dir = MakeData(*comm, "--train 400 --test 100", "_lora");
  std::vector<TrainReport> reports;
  for (ReferenceStrategy s : {ReferenceStrategy::kResident, ReferenceStrategy::kLoraBase}) {
    PreferenceTrainOptions o = Base(dir);
    o.task = PreferenceTrainOptions::Task::kDpo;
    o.steps = 6;
    o.reference = s;
    o.model.lora.rank = 4;
    o.model.lora.dropout = 0.1;
    o.model.lora.target_modules = {"q_proj", "v_proj", "up_proj"};
    o.export_dir = dir + "/" + ReferenceStrategyName(s);
    auto r = TrainPreferences(o, Runtime(), comm.get());
    ASSERT_TRUE(r.ok()) << ReferenceStrategyName(s) << ": " << r.status();
    // The reference is the initial policy (loss log 2 before training); the adapters train away from it.
    EXPECT_NEAR(r->before.metrics.loss_sum / r->before.metrics.pairs, std::log(2.0), 1e-5);
    EXPECT_NE(r->after.metrics.loss_sum, r->before.metrics.loss_sum);
    reports.push_back(*r);
  }
  EXPECT_GT(reports[0].reference_device_bytes, 0u);
  EXPECT_EQ(reports[1].reference_device_bytes, 0u);
  EXPECT_EQ(reports[1].after.metrics.loss_sum, reports[0].after.metrics.loss_sum);
  EXPECT_EQ(reports[1].after.metrics.correct, reports[0].after.metrics.correct);
  ASSERT_TRUE(comm->Barrier(absl::Seconds(60)).ok());
  if (comm->rank() == 0) {
    auto read = [](const std::string& path) {
      std::ifstream in(path, std::ios::binary);
      return std::string(std::istreambuf_iterator<char>(in), {});
    };
    const std::string resident = read(dir + "/resident/model.safetensors");
    EXPECT_FALSE(resident.empty());
    EXPECT_TRUE(resident == read(dir + "/lora-base/model.safetensors"));
  }
  // Without adapters there is no base to score with.
  PreferenceTrainOptions full = Base(dir);
  full.task = PreferenceTrainOptions::Task::kDpo;
  full.reference = ReferenceStrategy::kLoraBase;
  const absl::Status refused = TrainPreferences(full, Runtime(), comm.get()).status();
  EXPECT_NE(refused.message().find("this policy has none"), std::string::npos) << refused;
  EXPECT_TRUE(comm->Barrier(absl::Seconds(60)).ok());
  if (comm->rank() == 0) std::filesystem::remove_all(dir);
}

// An SFT step forwards the completions alone: from the pair file (chosen = completion, rejected read and
// dropped) and from the same examples as TRL prompt-completion lines, the steps are bit-identical, and every
// step's tokens are the examples' prompt + completion tokens, not twice that.
TEST(PreferenceTrainingTest, SftForwardsTheCompletionsAloneFromPairsOrPromptCompletionLines) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string dir = MakeData(*comm, "--train 300 --test 100", "_sft_lines");
  // The generator pads its operands: every line has the same lengths (checked while converting).
  size_t example_tokens = 0;
  if (comm->rank() == 0) {
    for (const char* split : {"train", "test"}) {
      std::ifstream in(dir + "/" + split + "_ids.jsonl");
      std::ofstream out(dir + "/" + split + "_sft.jsonl");
      for (std::string line; std::getline(in, line);) {
        const size_t cut = line.find(",\"rejected_ids\"");
        ASSERT_NE(cut, std::string::npos) << line;
        std::string sft = line.substr(0, cut) + "}";
        sft.replace(sft.find("\"chosen_ids\""), 12, "\"completion_ids\"");
        out << sft << "\n";
        // Two id lists: one comma between them, one fewer than ids within each; then BOS and EOS.
        const size_t tokens = std::count(sft.begin(), sft.end(), ',') + 1 + 2;
        if (example_tokens == 0) example_tokens = tokens;
        ASSERT_EQ(tokens, example_tokens) << sft;
      }
    }
  }
  ASSERT_TRUE(comm->Barrier(absl::Seconds(60)).ok());
  if (comm->rank() != 0) {  // the lengths rank 0 checked, from the first line
    std::ifstream in(dir + "/train_sft.jsonl");
    std::string line;
    ASSERT_TRUE(std::getline(in, line));
    example_tokens = std::count(line.begin(), line.end(), ',') + 1 + 2;
  }
  auto run = [&](const std::string& train, const std::string& test) {
    PreferenceTrainOptions o = Base(dir);
    o.task = PreferenceTrainOptions::Task::kSft;
    o.data.train = dir + "/" + train;
    o.data.test = dir + "/" + test;
    o.steps = 3;
    std::vector<PairMetrics> steps;
    TrainHooks hooks;
    hooks.on_step = [&](const StepReport& sr) {
      steps.push_back(sr.metrics);
      return absl::OkStatus();
    };
    auto r = TrainPreferences(o, Runtime(), comm.get(), hooks);
    EXPECT_TRUE(r.ok()) << r.status();
    return steps;
  };
  const std::vector<PairMetrics> pairs = run("train_ids.jsonl", "test_ids.jsonl");
  const std::vector<PairMetrics> lines = run("train_sft.jsonl", "test_sft.jsonl");
  ASSERT_EQ(pairs.size(), 3u);
  ASSERT_EQ(lines.size(), 3u);
  for (size_t i = 0; i < pairs.size(); ++i) {
    EXPECT_EQ(pairs[i].loss_sum, lines[i].loss_sum) << "step " << i;
    EXPECT_EQ(pairs[i].response_tokens, lines[i].response_tokens) << "step " << i;
    EXPECT_EQ(pairs[i].pairs, 32.0);
    EXPECT_EQ(pairs[i].sequence_tokens, 32.0 * static_cast<double>(example_tokens))
        << "step " << i << ": the rejected rows were forwarded too";
    EXPECT_EQ(lines[i].sequence_tokens, pairs[i].sequence_tokens);
  }
  EXPECT_TRUE(comm->Barrier(absl::Seconds(60)).ok());
  if (comm->rank() == 0) std::filesystem::remove_all(dir);
}

// TRL's margin column reaches a reward model's loss (and only its loss): the same held-out pairs with a
// margin of 1 each give the same scores (accuracy, margin sum) and a higher loss, since -log sigmoid(d - 1)
// > -log sigmoid(d) for every pair.
TEST(PreferenceTrainingTest, ARewardModelsLossReadsThePairsMargins) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string dir = MakeData(*comm, "--train 300 --test 100", "_margins");
  if (comm->rank() == 0) {
    std::ifstream in(dir + "/test_ids.jsonl");
    std::ofstream out(dir + "/test_margin.jsonl");
    for (std::string line; std::getline(in, line);)
      out << line.substr(0, line.rfind('}')) << ", \"margin\": 1}\n";
  }
  ASSERT_TRUE(comm->Barrier(absl::Seconds(60)).ok());
  auto before = [&](const std::string& test) {
    PreferenceTrainOptions o = Base(dir);
    o.task = PreferenceTrainOptions::Task::kReward;
    o.data.test = dir + "/" + test;
    o.steps = 1;
    auto r = TrainPreferences(o, Runtime(), comm.get());
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->before.metrics : PairMetrics{};
  };
  const PairMetrics plain = before("test_ids.jsonl");
  const PairMetrics margined = before("test_margin.jsonl");
  EXPECT_EQ(margined.pairs, 100);
  EXPECT_EQ(margined.correct, plain.correct);
  EXPECT_EQ(margined.margin_sum, plain.margin_sum) << "the scores do not see the margins";
  EXPECT_GT(margined.loss_sum, plain.loss_sum) << "the loss did not read the margins";
  EXPECT_TRUE(comm->Barrier(absl::Seconds(60)).ok());
  if (comm->rank() == 0) std::filesystem::remove_all(dir);
}

// Every step's metrics carry the device's clock beside the host's. On the CPU the device is the host
// device, whose work runs as it is enqueued: the device's forward and backward lie inside the host's
// scopes of them, and every step's own update is ready when it ends (updates_ago 0).
TEST(PreferenceTrainingTest, EveryStepCarriesTheDevicesClock) {
  namespace names = metrics::metric_names;
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string dir = MakeData(*comm, "--train 300 --test 100", "_clock");
  PreferenceTrainOptions o = Base(dir);
  o.task = PreferenceTrainOptions::Task::kReward;
  o.offload = false;
  o.steps = 2;
  std::vector<metrics::StepMetrics> steps;
  TrainHooks hooks;
  hooks.on_step = [&](const StepReport& sr) {
    steps.push_back(NamedStepMetrics(sr, o.task, HostSample{}));
    return absl::OkStatus();
  };
  auto r = TrainPreferences(o, Runtime(), comm.get(), hooks);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(steps.size(), 2u);
  for (const metrics::StepMetrics& m : steps) {
    const std::string device = names::kDeviceTimePrefix, host = names::kTimePrefix;
    EXPECT_EQ(m.Get(names::kDeviceTimeUpdatesAgo), 0.0) << "step " << m.step;
    for (const char* stage : {"forward", "backward"}) {
      const double on_device = m.Get(device + stage + "_ms").value_or(-1);
      EXPECT_GT(on_device, 0.0) << stage;
      EXPECT_LE(on_device, m.Get(host + stage + "_ms").value_or(-1)) << stage << ": inside the host's scope";
    }
    const double sum = m.Get(device + "forward_ms").value_or(0) + m.Get(device + "backward_ms").value_or(0) +
                       m.Get(device + "update_ms").value_or(0) + m.Get(device + "gap_ms").value_or(0);
    EXPECT_NEAR(m.Get(device + "step_ms").value_or(-1), sum, 1e-6) << "step " << m.step;
    EXPECT_GT(m.Get(device + "update_ms").value_or(-1), 0.0);
  }
  EXPECT_TRUE(comm->Barrier(absl::Seconds(60)).ok());
  if (comm->rank() == 0) std::filesystem::remove_all(dir);
}

// The learning-rate schedule reaches the optimizer: the first step of a 4-step warmup to 4e-3 is the step of
// a constant 1e-3.
TEST(PreferenceTrainingTest, TheLearningRateScheduleDrivesTheOptimizer) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string dir = MakeData(*comm, "--train 300 --test 100");
  auto run = [&](float lr, core::LrDecay decay, int64_t warmup) {
    PreferenceTrainOptions o = Base(dir);
    o.task = PreferenceTrainOptions::Task::kReward;
    o.steps = 1;
    o.schedule.peak_lr = lr;
    o.schedule.decay = decay;
    o.schedule.warmup_steps = warmup;
    o.schedule.total_steps = 10;  // the schedule of a 10-step run, of which this runs the first step
    auto r = TrainPreferences(o, Runtime(), comm.get());
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->after.metrics.loss_sum : -1.0;
  };
  const double constant = run(1e-3f, core::LrDecay::kConstant, 0);
  const double warm = run(4e-3f, core::LrDecay::kCosine, 4);
  const double faster = run(4e-3f, core::LrDecay::kConstant, 0);
  EXPECT_EQ(warm, constant);    // same rate, same data, same seed: the same model
  EXPECT_NE(faster, constant);  // and the rate matters
  EXPECT_TRUE(comm->Barrier(absl::Seconds(60)).ok());
  if (comm->rank() == 0) std::filesystem::remove_all(dir);
}

// The reward path (score head at the last token, Bradley-Terry, ZeRO-2 + offload) fits a rule that one
// read-out can see: the chosen response repeats the prompt's first token, the rejected one does not.
TEST(PreferenceTrainingTest, RewardModelLearnsAReadableRuleOnHeldOutPairs) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string dir = MakeData(*comm);  // for its config.json (vocab 16, ids 4..15 are digits/signs)
  if (comm->rank() == 0) {
    std::mt19937 gen(7);
    auto token = [&] { return 4 + static_cast<int>(gen() % 12); };
    for (auto [split, n] : {std::pair{"train", 500}, std::pair{"test", 100}}) {
      std::ofstream out(dir + "/" + split + "_ids.jsonl");
      for (int i = 0; i < n; ++i) {
        std::vector<int> prompt(5);
        for (int& t : prompt) t = token();
        int wrong = token();
        while (wrong == prompt[0]) wrong = token();
        out << "{\"prompt_ids\": [" << prompt[0];
        for (size_t k = 1; k < prompt.size(); ++k) out << ", " << prompt[k];
        out << "], \"chosen_ids\": [" << prompt[0] << "], \"rejected_ids\": [" << wrong << "]}\n";
      }
    }
  }
  ASSERT_TRUE(comm->Barrier(absl::Seconds(60)).ok());
  PreferenceTrainOptions o = Base(dir);
  o.task = PreferenceTrainOptions::Task::kReward;
  o.global_batch = 64;
  o.steps = 200;
  auto r = TrainPreferences(o, Runtime(), comm.get());
  ASSERT_TRUE(r.ok()) << r.status();
  if (comm->rank() == 0) {
    std::printf("reward, readable rule: held-out accuracy %.3f -> %.3f\n", r->before.accuracy(),
                r->after.accuracy());
  }
  EXPECT_GE(r->after.accuracy(), 0.95);
  EXPECT_TRUE(comm->Barrier(absl::Seconds(60)).ok());
  if (comm->rank() == 0) std::filesystem::remove_all(dir);
}

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The bar: >= 90% held-out accuracy for DPO (implicit reward) and for a reward model, 2 ranks,
// ZeRO-2 + offload, within 10 minutes. Both start, as usual, from one supervised fine-tuned model (DPO's
// reference too). DPO is trained on the mixed wrong answers (off by one, swapped digits, one digit off); the
// reward model on answers off by 1 to 9 (--wrong near): a 2-layer model that reads one token learns the
// units-digit check but not the carry-dependent check of the other digits within this budget (BENCHMARKS.md:
// ~80% on the mixed answers, 71% on pairs whose units digit agrees). Same seed, same problems, same
// tokenizer: the SFT model serves both.
TEST(PreferenceTrainingTest, SftThenDpoAndRewardModelReachNinetyPercentHeldOutAccuracy) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string dir = MakeData(*comm);
  const std::string near = MakeData(*comm, "--train 4000 --test 400 --wrong near", "_near");
  ASSERT_EQ(FileBytes(dir + "/tokenizer.model"), FileBytes(near + "/tokenizer.model"));
  ASSERT_EQ(FileBytes(dir + "/corpus.txt"), FileBytes(near + "/corpus.txt"));
  const absl::Time start = absl::Now();
  auto s = TrainSft(dir, 700, comm.get());
  ASSERT_TRUE(s.ok()) << s.status();
  // Both start from dir/sft with 64 pairs per step, one micro-batch per rank.
  auto from_sft = [&](const std::string& data, PreferenceTrainOptions::Task task, int64_t steps, float lr) {
    PreferenceTrainOptions o = Base(data);
    o.task = task;
    o.global_batch = 64;
    o.gradient_accumulation = 1;
    o.steps = steps;
    o.schedule.peak_lr = lr;
    o.init_weights = dir + "/sft";
    return o;
  };
  // Step counts for the step scheduler's data order (jobspec/step_scheduler.h, shared with zerofit run)
  // and OpenBLAS's rounding, which depends on the kernels it picks for the CPU: DPO 350 / reward 600 steps,
  // enough under the reference BLAS, ended at 0.905 / 0.637 with OpenBLAS; DPO at lr 2e-3 ended at
  // 0.875-0.978 over OpenBLAS's Haswell, Sandybridge, Zen and SkylakeX kernels (OPENBLAS_CORETYPE). At lr
  // 1e-3, DPO 1000 and reward 1000 steps ended at 0.953-0.970 and 0.998-1.000 under the Haswell, Zen,
  // Sandybridge and Prescott kernels of an AMD EPYC, with held-out curves every 100 steps above 0.9 from
  // step 300 on (BENCHMARKS.md, issue 29: 1400 / 2000 steps before, 0.980-0.995 and 1.000).
  PreferenceTrainOptions dpo = from_sft(dir, PreferenceTrainOptions::Task::kDpo, 1000, 1e-3f);
  dpo.reference = ReferenceStrategy::kPrecomputed;
  auto d = TrainPreferences(dpo, Runtime(), comm.get());
  ASSERT_TRUE(d.ok()) << d.status();
  PreferenceTrainOptions rm = from_sft(near, PreferenceTrainOptions::Task::kReward, 1000, 1e-3f);
  // Without warmup, Adam's first full-size steps can leave the score at the last token blind to the answer
  // (1 run of 6 stuck at 49%, BENCHMARKS.md); 50 warmup steps and a cosine decay passed 9 runs of 9.
  rm.schedule.warmup_steps = 50;
  rm.schedule.decay = core::LrDecay::kCosine;
  rm.weight_decay = 0.1f;
  rm.init_weights = dir + "/sft";
  auto r = TrainPreferences(rm, Runtime(), comm.get());
  ASSERT_TRUE(r.ok()) << r.status();
  const double minutes = absl::ToDoubleMinutes(absl::Now() - start);
  if (comm->rank() == 0) {
    std::printf(
        "sft: held-out perplexity %.3f -> %.3f; dpo: implicit-reward accuracy %.3f -> %.3f; reward model: "
        "pairwise accuracy %.3f -> %.3f; %.1f min\n",
        std::exp(SftLossPerToken(s->before.metrics)), std::exp(SftLossPerToken(s->after.metrics)),
        d->before.accuracy(), d->after.accuracy(), r->before.accuracy(), r->after.accuracy(), minutes);
  }
  EXPECT_GE(d->after.accuracy(), 0.9);
  EXPECT_GE(r->after.accuracy(), 0.9);
  EXPECT_LT(minutes, 10.0);
  EXPECT_TRUE(comm->Barrier(absl::Seconds(60)).ok());
  if (comm->rank() == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::remove_all(near);
  }
}

}  // namespace
}  // namespace zerofit::worker
