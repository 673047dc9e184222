// GRPO sessions (worker/torch/train/grpo_session.h) on the MPI ranks of the test, on the arithmetic task's
// prompt files: the KV cache holds exactly the sequences in flight of a pass (more samples per prompt than
// fit in one), a session resumed from a checkpoint ends bit-identical to an uninterrupted one (the rollouts
// are a function of step and prompt), and the step's metrics are those the issue names.
#include "worker/torch/train/grpo_session.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "comm/communicator_factory.h"
#include "core/hf_config.h"
#include "jobspec/step_scheduler.h"
#include "nlohmann/json.hpp"
#include "tests/support/mpi_test_env.h"
#include "tests/worker/data/char_model_dir.h"
#include "worker/data/hf_tokenizer.h"
#include "worker/torch/model/generation.h"
#include "worker/torch/model/kv_cache.h"
#include "worker/torch/model/llama_model.h"
#include "worker/torch/train/entropy_quantile.h"

namespace zerofit::worker {
namespace {

namespace names = metrics::metric_names;

std::unique_ptr<comm::Communicator> MakeComm() {
  torch::set_num_threads(1);
  comm::CommOptions options;
  options.timeout = absl::Seconds(60);
  auto c = comm::CreateHostCommunicator(testing::MpiEnv(), options);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

// Zero-padded problems ("07+18="): every prompt is BOS + 6 tokens.
std::string MakeData(comm::Communicator& comm) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("zerofit_grpo_" + std::to_string(getppid()))).string();
  if (comm.rank() == 0) {
    const std::string cmd = std::string(ZEROFIT_MAKE_ARITH_PREFS) + " --out " + dir +
                            " --train 200 --test 16 --max-operand 40 --ids --pad > /dev/null";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  EXPECT_TRUE(comm.Barrier(absl::Seconds(60)).ok());
  return dir;
}

PreferenceTrainOptions Grpo(const std::string& dir) {
  PreferenceTrainOptions o;
  o.task = PreferenceTrainOptions::Task::kGrpo;
  o.model_dir = dir;
  o.data.train = dir + "/train_prompts_ids.jsonl";
  o.data.test = dir + "/test_prompts_ids.jsonl";
  o.max_length = 16;
  o.global_batch = 4;
  o.gradient_accumulation = 3;  // sequences split in 3 per rank: micro-batches cut through groups
  o.schedule.peak_lr = 1e-3f;
  o.grpo.rollout.samples_per_prompt = 6;
  o.grpo.rollout.max_new_tokens = 5;
  o.grpo.rollout.rollout_batch = 4;  // 6 samples of a prompt take two passes: 4 and 2 sequences
  o.grpo.rewards.push_back(RewardSourceOptions{});
  return o;
}

// Held-out prompts in batches of 8; one CPU AdamW thread with offload.
RuntimeOptions Runtime() {
  RuntimeOptions r;
  r.eval_batch = 8;
  r.offload_threads = 1;
  return r;
}

// The steps `from`..`to`-1 of `session` with the scheduler TrainGrpo uses; their metrics.
std::vector<metrics::StepMetrics> RunSteps(GrpoSession& session, const PreferenceTrainOptions& o,
                                           int64_t from, int64_t to, const comm::Communicator& comm) {
  jobspec::SchedulerOptions so;
  so.global_batch = o.global_batch;
  so.world_size = comm.world_size();
  so.gradient_accumulation = o.gradient_accumulation;
  absl::StatusOr<jobspec::StepScheduler> scheduler =
      jobspec::StepScheduler::Create(session.TrainLengths(), so);
  EXPECT_TRUE(scheduler.ok()) << scheduler.status();
  std::vector<metrics::StepMetrics> out;
  for (int64_t step = from; step < to && scheduler.ok(); ++step) {
    absl::StatusOr<metrics::StepMetrics> m = session.Step(step, scheduler->Assign(step).ranks[comm.rank()]);
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok()) break;
    out.push_back(*m);
  }
  return out;
}

// The metrics of step 0 of a fresh session of `o` (empty on failure, which is reported).
metrics::StepMetrics FirstStep(const PreferenceTrainOptions& o, comm::Communicator& comm) {
  absl::StatusOr<std::unique_ptr<GrpoSession>> s = GrpoSession::Create(o, Runtime(), &comm);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return {};
  const std::vector<metrics::StepMetrics> m = RunSteps(**s, o, 0, 1, comm);
  EXPECT_EQ(m.size(), 1u);
  return m.empty() ? metrics::StepMetrics{} : m[0];
}

// A random one-label reward model in `dir` (what a reward-model job exports): its scores vary from
// completion to completion, so every group has advantages and the policy moves. `vocab` > 0 replaces the
// data's vocabulary size.
void ExportRandomRewardModel(const std::string& data_dir, const std::string& dir,
                             const comm::Communicator& comm, int64_t vocab = 0) {
  if (comm.rank() != 0) return;
  absl::StatusOr<core::HfModelConfig> config = core::LoadHfConfig(data_dir + "/config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  config->num_labels = 1;
  if (vocab > 0) config->vocab_size = vocab;
  torch::manual_seed(7);
  LlamaOptions mo;
  mo.reward_head = true;
  LlamaModel rm(*config, mo);
  ASSERT_TRUE(rm->ExportHf(dir, *config).ok());
}

// A reward source named "rm" over a random reward model exported to dir/`name` (rank 0 writes it, every rank
// waits for it).
RewardSourceOptions RandomRewardSource(const std::string& dir, const std::string& name,
                                       comm::Communicator& comm) {
  RewardSourceOptions rm;
  rm.kind = RewardSourceOptions::Kind::kModel;
  rm.name = "rm";
  rm.model_dir = dir + "/" + name;
  ExportRandomRewardModel(dir, rm.model_dir, comm);
  EXPECT_TRUE(comm.Barrier(absl::Seconds(60)).ok());
  return rm;
}

// Grpo(dir) under the token mean (dapo) with a random reward model (dir/`rm`) as the only source: scores
// that differ within every group, so every completion has an advantage.
PreferenceTrainOptions TokenMeanWithRewardModel(const std::string& dir, const std::string& rm,
                                                comm::Communicator& comm) {
  PreferenceTrainOptions o = Grpo(dir);
  o.grpo.objective.norm = GrpoLossNorm::kTokenMean;
  o.grpo.rewards = {RandomRewardSource(dir, rm, comm)};
  return o;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(GrpoSessionTest, TheKvCacheHoldsTheSequencesInFlight) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string dir = MakeData(*comm);
  PreferenceTrainOptions o = Grpo(dir);
  o.global_batch = comm->world_size();  // one prompt per rank: 6 sequences, passes of 4 and 2
  absl::StatusOr<core::HfModelConfig> config = core::LoadHfConfig(dir + "/config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  const int64_t capacity = 7 + o.grpo.rollout.max_new_tokens;  // BOS + "07+18=" + new tokens
  for (const int64_t batch : {int64_t{4}, int64_t{0}}) {
    o.grpo.rollout.rollout_batch = batch;
    absl::StatusOr<std::unique_ptr<GrpoSession>> session = GrpoSession::Create(o, Runtime(), comm.get());
    ASSERT_TRUE(session.ok()) << session.status();
    const std::vector<metrics::StepMetrics> m = RunSteps(**session, o, 0, 1, *comm);
    ASSERT_EQ(m.size(), 1u);
    const int64_t rows = batch > 0 ? batch : 6;  // 0: the rank's whole step in one pass
    // 2 x layers x rows x kv heads x positions x head_dim x 4 bytes (fp32): the formula, written out.
    const int64_t want = 2 * config->num_hidden_layers * rows * 2 * capacity * 16 * 4;
    EXPECT_EQ(m[0].Get(names::kGrpoKvCacheBytes).value_or(-1), want) << "rollout batch " << batch;
    EXPECT_EQ(KvCacheBytes(*config, rows, capacity, 4), want);
    EXPECT_EQ((*session)->planned_kv_cache_bytes(1), want);  // what the job prints at its start
  }
}

// Each pass's device peak is reported (the window reset between them) and the step's is the larger; the
// host device reports none. On the test device LibTorch computes on the CPU and only the seam's buffers count
// (step_peak_memory_test): ZeRO-2's flat buffers in both passes, and the reduce-scatter staging that the
// training pass adds. On a GPU the caching allocator's peaks add the KV cache and activations.
TEST(GrpoSessionTest, EachPassReportsItsDevicePeak) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string dir = MakeData(*comm);
  PreferenceTrainOptions o = Grpo(dir);
  for (const device::DeviceChoice choice : {device::DeviceChoice::kTest, device::DeviceChoice::kCpu}) {
    o.device = choice;
    absl::StatusOr<std::unique_ptr<GrpoSession>> session = GrpoSession::Create(o, Runtime(), comm.get());
    ASSERT_TRUE(session.ok()) << session.status();
    const std::vector<metrics::StepMetrics> m = RunSteps(**session, o, 0, 2, *comm);
    ASSERT_EQ(m.size(), 2u);
    for (const metrics::StepMetrics& step : m) {
      const std::optional<double> generation = step.Get(names::kGrpoGenerationPeakBytes),
                                  training = step.Get(names::kGrpoTrainingPeakBytes),
                                  peak = step.Get(names::kDevicePeakAllocatedBytes);
      if (choice == device::DeviceChoice::kCpu) {
        EXPECT_FALSE(generation || training || peak) << "the host device has no device peak";
        continue;
      }
      ASSERT_TRUE(generation && training && peak) << "step " << step.step;
      EXPECT_GT(*generation, 0);
      EXPECT_GE(*training, *generation) << "the training pass adds the reduce-scatter staging";
      EXPECT_EQ(*peak, std::max(*generation, *training));
    }
  }
}

// The CUDA allocation report is a diagnostic of CUDA's caching allocator: without a CUDA device every rank
// refuses it, naming the flag, before the models are built or any collective runs; the file is left alone.
TEST(GrpoSessionTest, TheCudaAllocationReportIsRefusedWithoutACudaDevice) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string dir = MakeData(*comm);
  PreferenceTrainOptions o = Grpo(dir);
  o.device = device::DeviceChoice::kTest;
  RuntimeOptions r = Runtime();
  r.cuda_allocation_report = dir + "/allocations-" + std::to_string(comm->rank()) + ".txt";
  const absl::Status refused = GrpoSession::Create(o, r, comm.get()).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_NE(refused.message().find("--cuda-allocation-report"), std::string::npos) << refused;
  EXPECT_NE(refused.message().find("CUDA"), std::string::npos) << refused;
  EXPECT_FALSE(std::ifstream(r.cuda_allocation_report).good()) << "a refused report writes no file";
}

// The first step of the token-mean job with a fresh reward model `rm`, as it is and after `change`: the same
// rollout (same seed, nothing trained yet) under two objectives.
std::pair<metrics::StepMetrics, metrics::StepMetrics> FirstStepWithAndWithout(
    const std::string& rm, const std::function<void(PreferenceTrainOptions&)>& change) {
  auto comm = MakeComm();
  EXPECT_NE(comm, nullptr);
  if (comm == nullptr) return {};
  const std::string dir = MakeData(*comm);
  PreferenceTrainOptions o = TokenMeanWithRewardModel(dir, rm, *comm);
  const metrics::StepMetrics as_is = FirstStep(o, *comm);
  change(o);
  return {as_is, FirstStep(o, *comm)};
}

// TRL's mask_truncated_completions under the token mean (DAPO's overlong filtering): the same first rollout
// (same seed, nothing trained yet) with completions that ran to max_new_tokens left out of the loss gives
// another loss and update; every completion's reward still shapes its group's advantages.
TEST(GrpoSessionTest, TruncatedCompletionsAreLeftOutOfTheLossWhenAsked) {
  const auto [all, kept] = FirstStepWithAndWithout(
      "rm_masking", [](PreferenceTrainOptions& o) { o.grpo.mask_truncated_completions = true; });
  const double truncated = all.Get(names::kGrpoHitMaxNewTokens).value_or(-1);
  EXPECT_GT(truncated, 0) << "the case must have truncated completions";
  EXPECT_LT(truncated, 1) << "and completions that ended";
  EXPECT_EQ(kept.Get(names::kGrpoHitMaxNewTokens), all.Get(names::kGrpoHitMaxNewTokens))
      << "the same rollout";
  EXPECT_EQ(kept.Get(names::kGrpoReward), all.Get(names::kGrpoReward));
  ASSERT_TRUE(kept.Get(names::kLoss) && all.Get(names::kLoss));
  EXPECT_NE(*kept.Get(names::kLoss), *all.Get(names::kLoss));
  EXPECT_NE(kept.Get(names::kGradNorm), all.Get(names::kGradNorm));
}

// top_entropy_quantile's threshold is one number for the whole step on every rank: the quantile of the
// union of the ranks' entropies, whatever each holds (here 3 and 2 values, and a rank with none).
TEST(GrpoSessionTest, TheEntropyThresholdIsTheQuantileOfEveryRanksTokens) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  ASSERT_EQ(comm->world_size(), 2);
  const std::vector<double> local =
      comm->rank() == 0 ? std::vector<double>{0.1, 0.7, 0.3} : std::vector<double>{0.4, 0.0};
  absl::StatusOr<std::optional<double>> t = StepEntropyThreshold(local, 0.2, comm.get());
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_TRUE(t->has_value());
  EXPECT_DOUBLE_EQ(**t, LinearQuantile({0.1, 0.7, 0.3, 0.4, 0.0}, 0.8)) << "0.0 is an entropy, not padding";
  const std::vector<double> one_sided = comm->rank() == 0 ? std::vector<double>{} : std::vector<double>{2.0};
  absl::StatusOr<std::optional<double>> single = StepEntropyThreshold(one_sided, 0.5, comm.get());
  ASSERT_TRUE(single.ok() && single->has_value());
  EXPECT_EQ(**single, 2.0);
  absl::StatusOr<std::optional<double>> none = StepEntropyThreshold({}, 0.5, comm.get());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

// top_entropy_quantile 0.2 (Wang et al.'s): the same first rollout, its policy term on the high-entropy
// fifth of the tokens: another loss and update, the same rewards and entropy.
TEST(GrpoSessionTest, TopEntropyQuantileTrainsOnTheHighEntropyTokens) {
  const auto [all, forking] = FirstStepWithAndWithout(
      "rm_entropy", [](PreferenceTrainOptions& o) { o.grpo.top_entropy_quantile = 0.2; });
  EXPECT_EQ(forking.Get(names::kGrpoReward), all.Get(names::kGrpoReward)) << "the same rollout";
  EXPECT_EQ(forking.Get(names::kGrpoEntropy), all.Get(names::kGrpoEntropy));
  ASSERT_TRUE(forking.Get(names::kLoss) && all.Get(names::kLoss));
  EXPECT_NE(*forking.Get(names::kLoss), *all.Get(names::kLoss));
  EXPECT_NE(forking.Get(names::kGradNorm), all.Get(names::kGradNorm));
}

// loss_type cispo: on the first step (one iteration: the ratio is 1, the capped weight 1 with epsilon_high
// 5) CISPO's gradient -w A d logp is the clipped term's -r A d logp, under the same token mean as dapo: the
// same gradient norm from the same rollout, though the loss values differ (-A logp against -A). sapo
// trains from the same rollout with another gradient (its gate's slope at r = 1 is 1, its mean per
// sequence).
TEST(GrpoSessionTest, CispoStartsAsDapoAndSapoTrains) {
  const auto [dapo, cispo] = FirstStepWithAndWithout("rm_cispo", [](PreferenceTrainOptions& o) {
    o.grpo.objective.term = GrpoPolicyTerm::kCispo;
    o.grpo.objective.epsilon_high = 5.0;
  });
  EXPECT_EQ(cispo.Get(names::kGrpoReward), dapo.Get(names::kGrpoReward)) << "the same rollout";
  const double norm = dapo.Get(names::kGradNorm).value_or(0);
  ASSERT_GT(norm, 0);
  // float32 log-probs: the two losses' gradients are the same sums in the same order, up to rounding.
  EXPECT_NEAR(cispo.Get(names::kGradNorm).value_or(-1), norm, 1e-5 * norm);
  EXPECT_NE(cispo.Get(names::kLoss), dapo.Get(names::kLoss));
  const auto [dapo_again, sapo] = FirstStepWithAndWithout("rm_sapo", [](PreferenceTrainOptions& o) {
    o.grpo.objective.term = GrpoPolicyTerm::kSapo;
    o.grpo.objective.norm = GrpoLossNorm::kSequenceMean;
  });
  EXPECT_EQ(sapo.Get(names::kGrpoReward), dapo_again.Get(names::kGrpoReward));
  EXPECT_GT(sapo.Get(names::kGradNorm).value_or(0), 0);
  EXPECT_NE(sapo.Get(names::kGradNorm), dapo_again.Get(names::kGradNorm));
}

// loss_type rloo (TRL's RLOOTrainer): the KL to the reference is a penalty on the reward. At step 0 the
// policy is the reference (their log-probs agree), so beta changes nothing: the same loss, about 0
// (leave-one-out advantages sum to 0 in each group and the ratio is 1), and the same update. At step 1 the
// rollout is the same (same parameters, same seed) but the KL is not 0 any more: other advantages, another
// update. normalize_advantages rescales step 0's advantages over both ranks: another update from the same
// rollout.
TEST(GrpoSessionTest, RlooPenalisesTheRewardWithTheKlOnceThePolicyMoves) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string dir = MakeData(*comm);
  PreferenceTrainOptions o = TokenMeanWithRewardModel(dir, "rm_rloo", *comm);
  o.grpo.objective.norm = GrpoLossNorm::kSequenceMean;
  o.grpo.objective.rloo = true;
  auto run = [&](const PreferenceTrainOptions& job) {
    absl::StatusOr<std::unique_ptr<GrpoSession>> s = GrpoSession::Create(job, Runtime(), comm.get());
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? RunSteps(**s, job, 0, 2, *comm) : std::vector<metrics::StepMetrics>{};
  };
  const std::vector<metrics::StepMetrics> plain = run(o);
  PreferenceTrainOptions penalised = o;
  penalised.grpo.objective.beta = 0.5;
  const std::vector<metrics::StepMetrics> kl = run(penalised);
  ASSERT_EQ(plain.size(), 2u);
  ASSERT_EQ(kl.size(), 2u);
  EXPECT_EQ(kl[0].Get(names::kGrpoKl).value_or(-1), 0.0) << "the policy is the reference at step 0";
  EXPECT_NEAR(plain[0].Get(names::kLoss).value_or(1), 0.0, 1e-6);
  const double norm = plain[0].Get(names::kGradNorm).value_or(0);
  ASSERT_GT(norm, 0);
  EXPECT_EQ(kl[0].Get(names::kGradNorm), plain[0].Get(names::kGradNorm));
  EXPECT_EQ(kl[1].Get(names::kGrpoReward), plain[1].Get(names::kGrpoReward)) << "the same rollout";
  EXPECT_NE(kl[1].Get(names::kGrpoKl).value_or(0), 0.0);
  EXPECT_NE(kl[1].Get(names::kGradNorm), plain[1].Get(names::kGradNorm));
  PreferenceTrainOptions normalised = o;
  normalised.grpo.objective.normalize_advantages = true;
  const std::vector<metrics::StepMetrics> scaled = run(normalised);
  ASSERT_EQ(scaled.size(), 2u);
  EXPECT_EQ(scaled[0].Get(names::kGrpoReward), plain[0].Get(names::kGrpoReward));
  EXPECT_GT(scaled[0].Get(names::kGradNorm).value_or(0), 0);
  EXPECT_NE(scaled[0].Get(names::kGradNorm), plain[0].Get(names::kGradNorm));
}

// RLOO's reward_clip_range (TRL's RLOOConfig) clamps each completion's reward before the advantages: a range
// that holds every reward changes nothing (the same update, bit for bit), one above every reward makes them
// all equal to its min, so every leave-one-out advantage is 0 and so is the gradient; the reward metric is
// the scored one either way.
TEST(GrpoSessionTest, RlooRewardClipRangeClampsTheRewardsBeforeTheAdvantages) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string dir = MakeData(*comm);
  PreferenceTrainOptions o = TokenMeanWithRewardModel(dir, "rm_rloo_clip", *comm);
  o.grpo.objective.norm = GrpoLossNorm::kSequenceMean;
  o.grpo.objective.rloo = true;
  const metrics::StepMetrics plain = FirstStep(o, *comm);
  const double norm = plain.Get(names::kGradNorm).value_or(0);
  ASSERT_GT(norm, 0);
  o.grpo.objective.reward_clip_range = std::pair<double, double>(-1e6, 1e6);
  const metrics::StepMetrics wide = FirstStep(o, *comm);
  EXPECT_EQ(wide.Get(names::kGradNorm), plain.Get(names::kGradNorm));
  o.grpo.objective.reward_clip_range = std::pair<double, double>(1e6, 2e6);
  const metrics::StepMetrics above = FirstStep(o, *comm);
  EXPECT_EQ(above.Get(names::kGrpoReward), plain.Get(names::kGrpoReward)) << "the scored rewards";
  EXPECT_EQ(above.Get(names::kGradNorm).value_or(-1), 0.0) << "every reward clamped to 1e6: no advantage";
}

// scale_rewards batch (TRL's): group-mean centring divided by the standard deviation of every rank's rewards
// of the step. At step 0 (ratio 1, no clip, beta 0) the token-mean loss is -sum(n_i A_i) / tokens, linear in
// the scale: the same rollout with scale none gives loss_none = loss_batch x (std + eps), the std
// Bessel-corrected over all 24 completions of both ranks (from the step's reward spread, a population std).
TEST(GrpoSessionTest, BatchRewardScaleDividesByTheStdOfEveryRanksRewards) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string dir = MakeData(*comm);
  PreferenceTrainOptions o = TokenMeanWithRewardModel(dir, "rm_batch_scale", *comm);
  o.grpo.objective.scale = RewardScale::kNone;
  const metrics::StepMetrics none = FirstStep(o, *comm);
  o.grpo.objective.scale = RewardScale::kBatch;
  const metrics::StepMetrics batch = FirstStep(o, *comm);
  EXPECT_EQ(none.Get(names::kGrpoReward), batch.Get(names::kGrpoReward)) << "the same rollout";
  const double n = 24;  // 4 prompts x 6 samples over both ranks
  const double population = batch.Get(names::kGrpoRewardStd).value_or(-1);
  ASSERT_GT(population, 0);
  const double bessel = population * std::sqrt(n / (n - 1));
  const double loss_none = none.Get(names::kLoss).value_or(0),
               loss_batch = batch.Get(names::kLoss).value_or(0);
  ASSERT_NE(loss_batch, 0);
  // float32 log-probs and losses, a sum of ~100 terms: a relative 1e-5 is far above rounding.
  EXPECT_NEAR(loss_none / loss_batch, bessel + GrpoOptions{}.std_eps, 1e-5 * bessel);
}

// rollout.top_k reaches the rollouts' sampler: with top_k 1 every sample of a prompt is its greedy
// completion, so a reward model scores each group's samples alike (every group flat), where unrestricted
// sampling gives every group a spread.
TEST(GrpoSessionTest, TopKOneSamplesEveryGroupAlike) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string dir = MakeData(*comm);
  PreferenceTrainOptions o = Grpo(dir);
  o.grpo.rewards = {RandomRewardSource(dir, "rm_top_k", *comm)};
  for (int64_t top_k : {int64_t{0}, int64_t{1}}) {
    o.grpo.rollout.top_k = top_k;
    EXPECT_EQ(FirstStep(o, *comm).Get(names::kGrpoZeroStdGroups), top_k == 1 ? 1.0 : 0.0)
        << "top_k " << top_k;
  }
}

TEST(GrpoSessionTest, AResumedSessionEndsBitIdenticalToAnUninterruptedOne) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string dir = MakeData(*comm);
  PreferenceTrainOptions o = Grpo(dir);
  o.grpo.iterations = 2;         // two updates per rollout, the old log-probs kept
  o.grpo.objective.beta = 0.04;  // a resident reference and the k3 KL
  o.steps = 4;
  RewardSourceOptions rm = RandomRewardSource(dir, "rm", *comm);
  rm.weight = 0.5;
  o.grpo.rewards.push_back(rm);
  const std::string straight = dir + "/straight", resumed = dir + "/resumed", ck = dir + "/ck";
  std::vector<metrics::StepMetrics> a, b;
  {
    absl::StatusOr<std::unique_ptr<GrpoSession>> s = GrpoSession::Create(o, Runtime(), comm.get());
    ASSERT_TRUE(s.ok()) << s.status();
    a = RunSteps(**s, o, 0, 4, *comm);
    ASSERT_TRUE((*s)->Export(straight).ok());
  }
  {
    absl::StatusOr<std::unique_ptr<GrpoSession>> s = GrpoSession::Create(o, Runtime(), comm.get());
    ASSERT_TRUE(s.ok()) << s.status();
    RunSteps(**s, o, 0, 2, *comm);
    ASSERT_TRUE((*s)->SaveCheckpoint(ck, "", 1).ok());
  }
  {
    absl::StatusOr<std::unique_ptr<GrpoSession>> s = GrpoSession::Create(o, Runtime(), comm.get());
    ASSERT_TRUE(s.ok()) << s.status();
    absl::StatusOr<int64_t> steps = (*s)->LoadCheckpoint(ck);
    ASSERT_TRUE(steps.ok()) << steps.status();
    EXPECT_EQ(*steps, 2);  // rollout steps, not the 4 optimizer updates
    b = RunSteps(**s, o, 2, 4, *comm);
    ASSERT_TRUE((*s)->Export(resumed).ok());
  }
  ASSERT_TRUE(comm->Barrier(absl::Seconds(60)).ok());
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 2u);
  for (const char* name : {names::kGrpoReward, names::kGrpoCompletionLength, names::kGrpoKl, names::kLoss}) {
    EXPECT_EQ(a[2].Get(name), b[0].Get(name)) << name;
    EXPECT_EQ(a[3].Get(name), b[1].Get(name)) << name;
  }
  if (comm->rank() == 0) {
    const std::string x = ReadAll(straight + "/model.safetensors"),
                      y = ReadAll(resumed + "/model.safetensors");
    EXPECT_FALSE(x.empty());
    EXPECT_TRUE(x == y) << "the resumed run's weights differ from the uninterrupted run's";
  }
  // The metrics the issue names, within their ranges.
  const metrics::StepMetrics& m = a.back();
  for (const char* name : {names::kGrpoReward,
                           names::kGrpoRewardStd,
                           names::kGrpoZeroStdGroups,
                           names::kAccuracy,
                           names::kGrpoKl,
                           names::kGrpoClippedFraction,
                           names::kGrpoEntropy,
                           names::kGrpoCompletionLength,
                           names::kGrpoCompletionLengthMax,
                           names::kGrpoHitMaxNewTokens,
                           names::kGrpoGenerationTokensPerS,
                           names::kGenerationMs,
                           names::kTrainingMs,
                           names::kGrpoKvCacheBytes,
                           "grpo/reward/answer",
                           "grpo/reward/answer_std",
                           "grpo/reward/rm",
                           "grpo/reward/rm_std",
                           names::kLearningRate,
                           names::kGradNorm,
                           "device_time/step_ms",
                           "device_time/forward_ms",
                           "device_time/backward_ms",
                           "device_time/update_ms",
                           "device_time/gap_ms"}) {
    EXPECT_TRUE(m.Get(name).has_value()) << name;
  }
  EXPECT_EQ(m.Get(names::kDeviceTimeUpdatesAgo), 0.0) << "the host device runs the update as it is enqueued";
  // The total is the weighted sum of the sources' means; the exact rule scores 1 right, 0 wrong.
  EXPECT_NEAR(m.Get(names::kGrpoReward).value_or(0),
              m.Get("grpo/reward/answer").value_or(0) + 0.5 * m.Get("grpo/reward/rm").value_or(0), 1e-9);
  EXPECT_EQ(m.Get("grpo/reward/answer"), m.Get(names::kAccuracy));
  EXPECT_GT(m.Get("grpo/reward/rm_std").value_or(0), 0);
  EXPECT_EQ(m.Get(names::kGrpoZeroStdGroups), 0.0);  // a reward model's scores differ within every group
  EXPECT_GT(m.Get(names::kGrpoKl).value_or(0), 0);   // 4 updates away from the reference
  EXPECT_GT(m.Get(names::kGrpoEntropy).value_or(0), 0);
  EXPECT_GE(m.Get(names::kGrpoCompletionLength).value_or(0), 1);
  EXPECT_LE(m.Get(names::kGrpoCompletionLengthMax).value_or(99), 5);
}

// LoRA, activation checkpointing and offload as for the other tasks: checkpointing recomputes the same
// gradients (bit-identical weights after two steps); LoRA adapters with offloaded AdamW train (the policy
// moves away from its reference), and scoring the reference with the policy's own base, adapters off
// (lora-base), trains bit-identically to a resident copy of the initial policy.
TEST(GrpoSessionTest, CheckpointingLoraAndOffloadTrainAsForTheOtherTasks) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string dir = MakeData(*comm);
  PreferenceTrainOptions o = Grpo(dir);
  o.grpo.rewards = {RandomRewardSource(dir, "rm", *comm)};
  auto train = [&](const PreferenceTrainOptions& options, const std::string& out) {
    absl::StatusOr<std::unique_ptr<GrpoSession>> s = GrpoSession::Create(options, Runtime(), comm.get());
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return std::vector<metrics::StepMetrics>{};
    std::vector<metrics::StepMetrics> m = RunSteps(**s, options, 0, 2, *comm);
    EXPECT_TRUE((*s)->Export(out).ok());
    EXPECT_TRUE(comm->Barrier(absl::Seconds(60)).ok());
    return m;
  };
  // A reward model that cannot read every id the policy writes is refused when the session starts.
  PreferenceTrainOptions small = o;
  small.grpo.rewards[0].model_dir = dir + "/rm-small";
  ExportRandomRewardModel(dir, small.grpo.rewards[0].model_dir, *comm, /*vocab=*/8);
  ASSERT_TRUE(comm->Barrier(absl::Seconds(60)).ok());
  const absl::Status refused = GrpoSession::Create(small, Runtime(), comm.get()).status();
  EXPECT_NE(refused.message().find("rewards[0].path: " + dir +
                                   "/rm-small reads ids below 8, the policy writes ids "
                                   "below 16"),
            std::string::npos)
      << refused;
  // An answer reward over prompts that lack what it compares with is refused at start, naming file and line.
  PreferenceTrainOptions unanswered = Grpo(dir);
  unanswered.data.test = dir + "/unanswered.jsonl";
  if (comm->rank() == 0) {
    std::ofstream(unanswered.data.test) << "{\"prompt_ids\": [5, 6], \"answer_ids\": [7]}\n"
                                        << "{\"prompt_ids\": [5, 6], \"answer\": \"4\"}\n";
  }
  ASSERT_TRUE(comm->Barrier(absl::Seconds(60)).ok());
  const absl::Status missing = GrpoSession::Create(unanswered, Runtime(), comm.get()).status();
  EXPECT_NE(missing.message().find(unanswered.data.test + ":2: field 'answer_ids' is missing"),
            std::string::npos)
      << missing;
  // The plain run keeps the plain RMSNorm/SwiGLU graphs, which a checkpointed layer recomputes (the lean
  // ones sum a norm's fp32 input gradients in another order: LlamaOptions.lean_pieces).
  PreferenceTrainOptions plain = o;
  plain.model.lean_pieces = false;
  train(plain, dir + "/plain");
  PreferenceTrainOptions ck = o;
  ck.model.activation_checkpointing = true;
  train(ck, dir + "/checkpointed");
  PreferenceTrainOptions lora = o;
  lora.model.lora.rank = 4;
  lora.offload = true;
  lora.grpo.objective.beta = 0.04;
  const std::vector<metrics::StepMetrics> m = train(lora, dir + "/lora");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_GT(m.back().Get(names::kGrpoKl).value_or(0), 0);
  PreferenceTrainOptions lora_base = lora;
  lora_base.reference = ReferenceStrategy::kLoraBase;
  {
    absl::StatusOr<std::unique_ptr<GrpoSession>> s = GrpoSession::Create(lora_base, Runtime(), comm.get());
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_NE((*s)->DataReportText().find("reference: lora-base (the policy's frozen base"),
              std::string::npos)
        << (*s)->DataReportText();
  }
  const std::vector<metrics::StepMetrics> mb = train(lora_base, dir + "/lora-base");
  ASSERT_EQ(mb.size(), 2u);
  for (const char* name : {names::kGrpoKl, names::kLoss}) {
    EXPECT_EQ(mb.back().Get(name), m.back().Get(name)) << name;
  }
  PreferenceTrainOptions no_adapters = o;
  no_adapters.grpo.objective.beta = 0.04;
  no_adapters.reference = ReferenceStrategy::kLoraBase;
  const absl::Status no_base = GrpoSession::Create(no_adapters, Runtime(), comm.get()).status();
  EXPECT_NE(no_base.message().find("lora-base is the policy with its LoRA adapters disabled"),
            std::string::npos)
      << no_base;
  if (comm->rank() == 0) {
    const std::string plain = ReadAll(dir + "/plain/model.safetensors");
    EXPECT_FALSE(plain.empty());
    EXPECT_TRUE(plain == ReadAll(dir + "/checkpointed/model.safetensors"));
    EXPECT_FALSE(plain == ReadAll(dir + "/lora/model.safetensors"));
    EXPECT_TRUE(ReadAll(dir + "/lora/model.safetensors") == ReadAll(dir + "/lora-base/model.safetensors"));
  }
}

// The text-prompt tests' job: six text prompts (answer "0") in a char model directory named `name`, which
// rank 0 writes; test.jsonl is the test's to write.
const std::vector<std::string> kTextPrompts = {"2+3=", "10-4=", "a b", "7+7=", "x:", "99+1="};

PreferenceTrainOptions TextPromptJob(comm::Communicator& comm, const std::string& name) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getppid()))).string();
  if (comm.rank() == 0) {
    std::filesystem::create_directories(dir);
    data::testing::WriteCharModelDir(dir);
    std::ofstream train(dir + "/train.jsonl");
    for (const std::string& p : kTextPrompts) train << "{\"prompt\": \"" << p << "\", \"answer\": \"0\"}\n";
  }
  EXPECT_TRUE(comm.Barrier(absl::Seconds(60)).ok());
  PreferenceTrainOptions o = Grpo(dir);
  o.data.train = dir + "/train.jsonl";
  o.data.test = dir + "/test.jsonl";
  o.data.tokenizer_dir = dir;
  o.max_length = 24;
  return o;
}

// Each text prompt's greedy completion by the initial policy of `o` (the session's seed, so its weights),
// stopped at EOS only: computed here without the session.
std::vector<std::vector<int64_t>> InitialGreedyCompletions(const PreferenceTrainOptions& o) {
  absl::StatusOr<core::HfModelConfig> config = core::LoadHfConfig(o.model_dir + "/config.json");
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return {};
  torch::manual_seed(o.seed);  // what the session's InitialModel does
  LlamaModel policy(*config, o.model);
  GenerationOptions go;
  go.temperature = 0;
  go.max_new_tokens = o.grpo.rollout.max_new_tokens;
  go.eos_ids = {data::testing::kCharEos};
  std::vector<std::vector<int64_t>> out;
  for (const std::string& p : kTextPrompts) {
    std::vector<int64_t> ids = {data::testing::kCharBos};
    for (int32_t id : data::testing::CharIds(p)) ids.push_back(id);
    absl::StatusOr<GenerationResult> r = Generate(*policy, {ids}, go);
    EXPECT_TRUE(r.ok()) << r.status();
    out.push_back(r.ok() ? r->completions[0].tokens : std::vector<int64_t>{});
  }
  return out;
}

// The text of `tokens` up to (without) the first of `stops`, with the char model's tokenizer.
std::string TextBefore(const std::vector<int64_t>& tokens, const std::vector<int64_t>& stops,
                       const data::Tokenizer& tok) {
  std::vector<int32_t> kept;
  for (int64_t t : tokens) {
    if (std::find(stops.begin(), stops.end(), t) != stops.end()) break;
    kept.push_back(static_cast<int32_t>(t));
  }
  absl::StatusOr<std::string> text = tok.Decode(kept);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.value_or("");
}

// A session of `o` and its greedy held-out evaluation.
std::unique_ptr<GrpoSession> EvaluatedSession(const PreferenceTrainOptions& o, comm::Communicator& comm,
                                              metrics::StepMetrics* m) {
  absl::StatusOr<std::unique_ptr<GrpoSession>> session = GrpoSession::Create(o, Runtime(), &comm);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return nullptr;
  absl::StatusOr<std::vector<metrics::NamedValue>> eval = (*session)->Evaluate();
  EXPECT_TRUE(eval.ok()) << eval.status();
  if (eval.ok()) m->values = *eval;
  return std::move(*session);
}

// Text prompts with the model directory's tokenizer.json: completions are decoded and compared as text. The
// held-out answers are the greedy completions of the initial policy itself, computed here independently
// (same seed, same weights; the char model's tokenizer decodes without the session), for the even prompts,
// and a text that never matches for the odd ones: the session's greedy evaluation must score exactly half,
// sharded over the ranks.
TEST(GrpoSessionTest, TextPromptsAreDecodedAndScoredAsText) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const PreferenceTrainOptions o = TextPromptJob(*comm, "zerofit_grpo_text");
  absl::StatusOr<std::unique_ptr<data::HfTokenizer>> tok = data::HfTokenizer::Load(o.data.tokenizer_dir);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::vector<std::vector<int64_t>> greedy = InitialGreedyCompletions(o);
  ASSERT_EQ(greedy.size(), kTextPrompts.size());
  std::string test;
  for (size_t i = 0; i < kTextPrompts.size(); ++i) {
    const std::string text = TextBefore(greedy[i], {}, **tok);  // EOS decodes to nothing
    const std::string answer = i % 2 == 0 ? text : text + "#";
    test += "{\"prompt\": \"" + kTextPrompts[i] + "\", \"answer\": " + nlohmann::json(answer).dump() + "}\n";
  }
  if (comm->rank() == 0) std::ofstream(o.data.test) << test;
  ASSERT_TRUE(comm->Barrier(absl::Seconds(60)).ok());
  metrics::StepMetrics m;
  std::unique_ptr<GrpoSession> session = EvaluatedSession(o, *comm, &m);
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(m.Get("eval/accuracy").value_or(-1), 0.5);
  EXPECT_EQ(m.Get("eval/prompts").value_or(-1), 6);
  // And a step over the text prompts runs (sampled completions decoded and scored).
  EXPECT_EQ(RunSteps(*session, o, 0, 1, *comm).size(), 1u);
}

// The model directory's generation_config.json names where a completion ends, as it does for transformers'
// generate: here a character the initial policy writes in its first greedy completion. The held-out answers
// are the policy's greedy completions cut at that character or EOS (computed here without the session), so
// the session's evaluation scores all of them only if it stops there too (0.33 without the file).
TEST(GrpoSessionTest, CompletionsStopAtTheGenerationConfigsAndTheSpecsEosIds) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  PreferenceTrainOptions o = TextPromptJob(*comm, "zerofit_grpo_stop");
  o.grpo.rollout.max_new_tokens = 8;
  absl::StatusOr<std::unique_ptr<data::HfTokenizer>> tok = data::HfTokenizer::Load(o.data.tokenizer_dir);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::vector<std::vector<int64_t>> greedy = InitialGreedyCompletions(o);
  // The stop: the second token of the first completion that has one which is not EOS, so that it cuts.
  int64_t stop = -1;
  for (const auto& c : greedy) {
    if (c.size() > 2 && c[1] != data::testing::kCharEos) {
      stop = c[1];
      break;
    }
  }
  ASSERT_GE(stop, 0) << "no greedy completion is long enough to be cut";
  std::string test;
  for (size_t i = 0; i < kTextPrompts.size(); ++i) {
    const std::string text = TextBefore(greedy[i], {stop, data::testing::kCharEos}, **tok);
    test += "{\"prompt\": \"" + kTextPrompts[i] + "\", \"answer\": " + nlohmann::json(text).dump() + "}\n";
  }
  if (comm->rank() == 0) {
    std::ofstream(o.data.test) << test;
    std::ofstream(o.model_dir + "/generation_config.json") << "{\"eos_token_id\": [" << stop << "]}";
  }
  ASSERT_TRUE(comm->Barrier(absl::Seconds(60)).ok());
  metrics::StepMetrics m;
  ASSERT_NE(EvaluatedSession(o, *comm, &m), nullptr);
  EXPECT_EQ(m.Get("eval/accuracy").value_or(-1), 1.0);

  // data.eos_token (TRL's eos_token) makes the same token the tokenizer's EOS: the rollouts stop there too.
  ASSERT_TRUE(comm->Barrier(absl::Seconds(60)).ok());
  if (comm->rank() == 0) std::filesystem::remove(o.model_dir + "/generation_config.json");
  ASSERT_TRUE(comm->Barrier(absl::Seconds(60)).ok());
  metrics::StepMetrics unstopped;  // neither: the completions run on past the answers
  ASSERT_NE(EvaluatedSession(o, *comm, &unstopped), nullptr);
  EXPECT_LT(unstopped.Get("eval/accuracy").value_or(-1), 1.0);
  const std::optional<std::string> stop_token =
      (*tok)->text_tokenizer().IdToToken(static_cast<int32_t>(stop));
  ASSERT_TRUE(stop_token.has_value());
  o.data.tokenizer_overrides.eos_token = *stop_token;
  metrics::StepMetrics named;
  ASSERT_NE(EvaluatedSession(o, *comm, &named), nullptr);
  EXPECT_EQ(named.Get("eval/accuracy").value_or(-1), 1.0);
}

}  // namespace
}  // namespace zerofit::worker
