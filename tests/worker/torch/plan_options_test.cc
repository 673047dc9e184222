// The one mapping from a resolved job plan to the trainer's options (worker/torch/train/plan_options.h):
// every field of a spec that changes what is trained reaches PreferenceTrainOptions, from YAML through
// jobspec::Resolve, with nothing set on top afterwards (issue 31).
#include "worker/torch/train/plan_options.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/local/local_communicator.h"
#include "jobspec/job_spec.h"
#include "jobspec/resolve.h"
#include "worker/torch/train/grpo_session.h"
#include "worker/torch/train/session_setup.h"
#include "worker/torch/train/torch_training_session.h"

namespace zerofit::worker {
namespace {

absl::StatusOr<PreferenceTrainOptions> OptionsOfYaml(const std::string& yaml) {
  absl::StatusOr<jobspec::JobSpec> spec = jobspec::ParseJobSpec(yaml, "job.yaml");
  if (!spec.ok()) return spec.status();
  absl::StatusOr<jobspec::JobPlan> plan = jobspec::Resolve(*spec);
  if (!plan.ok()) return plan.status();
  return OptionsFromPlan(*plan);
}

// A spec sized by itself on a planner preset (no model files needed to resolve it).
std::string Yaml(const std::string& task, const std::string& training, const std::string& extra) {
  return absl::StrCat("task: ", task, "\nmodel: Qwen2.5-0.5B\ndata: /d\nworld_size: 2\ntraining:\n",
                      "  steps: 10\n  global_batch: 16\n  gradient_accumulation: 2\n  max_length: 96\n",
                      training, extra);
}

TEST(PlanOptionsTest, EverySpecFieldThatTrainsReachesTheTrainer) {
  absl::StatusOr<PreferenceTrainOptions> o = OptionsOfYaml(Yaml(
      "dpo", "  offload: true\n  delayed_update_from: 4\n  seed: 77\n  bf16: true\n  weight_decay: 0.1\n",
      "dpo: {beta: 0.3, label_smoothing: 0.05}\nlora: {rank: 8, alpha: 16}\ninit: /w/sft\n"));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->task, PreferenceTrainOptions::Task::kDpo);
  EXPECT_EQ(o->seed, 77u);
  EXPECT_TRUE(o->offload);
  EXPECT_EQ(o->delayed_update_from, 4);
  EXPECT_EQ(o->dpo.loss, DpoOptions::Loss::kSigmoid);
  EXPECT_EQ(o->dpo.beta, 0.3);
  EXPECT_EQ(o->dpo.label_smoothing, 0.05);
  EXPECT_EQ(o->model.lora.rank, 8);
  EXPECT_EQ(o->reference, ReferenceStrategy::kLoraBase);
  EXPECT_EQ(o->model.dtype, torch::kBFloat16);
  EXPECT_FLOAT_EQ(o->weight_decay, 0.1f);
  EXPECT_EQ(o->init_weights, "/w/sft");
  EXPECT_EQ(o->max_length, 96);
  EXPECT_EQ(o->gradient_accumulation, 2);

  absl::StatusOr<PreferenceTrainOptions> ipo =
      OptionsOfYaml(Yaml("dpo", "", "dpo: {loss_type: ipo, beta: 0.5}\n"));
  ASSERT_TRUE(ipo.ok()) << ipo.status();
  EXPECT_EQ(ipo->dpo.loss, DpoOptions::Loss::kIpo);
  EXPECT_EQ(ipo->dpo.beta, 0.5);
  EXPECT_EQ(ipo->delayed_update_from, -1) << "no delayed update unless the spec asks";
  EXPECT_EQ(ipo->moments.format, optim::MomentFormat::kFp32) << "fp32 moments unless the spec asks";
  absl::StatusOr<PreferenceTrainOptions> q8 =
      OptionsOfYaml(Yaml("dpo", "  optim: adamw_8bit\n  min_8bit_size: 512\n", ""));
  ASSERT_TRUE(q8.ok()) << q8.status();
  EXPECT_EQ(q8->moments.format, optim::MomentFormat::kBlockwise8bit);
  EXPECT_EQ(q8->moments.min_8bit_size, 512u);
  absl::StatusOr<PreferenceTrainOptions> apo =
      OptionsOfYaml(Yaml("dpo", "", "dpo: {loss_type: apo_zero, beta: 0.2}\n"));
  ASSERT_TRUE(apo.ok()) << apo.status();
  EXPECT_EQ(apo->dpo.loss, DpoOptions::Loss::kApoZero);
  absl::StatusOr<PreferenceTrainOptions> simpo =
      OptionsOfYaml(Yaml("dpo", "", "dpo: {loss_type: simpo, beta: 2.0, simpo_gamma: 1.5}\n"));
  ASSERT_TRUE(simpo.ok()) << simpo.status();
  EXPECT_EQ(simpo->dpo.loss, DpoOptions::Loss::kSimpo);
  EXPECT_EQ(simpo->dpo.simpo_gamma, 1.5);
  absl::StatusOr<PreferenceTrainOptions> orpo = OptionsOfYaml(Yaml("dpo", "", "dpo: {loss_type: orpo}\n"));
  ASSERT_TRUE(orpo.ok()) << orpo.status();
  EXPECT_EQ(orpo->dpo.loss, DpoOptions::Loss::kOrpo);
  EXPECT_FALSE(DpoNeedsReference(orpo->dpo));
  absl::StatusOr<PreferenceTrainOptions> cpo =
      OptionsOfYaml(Yaml("dpo", "", "dpo: {reference_free: true, rpo_alpha: 1.0}\n"));
  ASSERT_TRUE(cpo.ok()) << cpo.status();
  EXPECT_TRUE(cpo->dpo.reference_free);
  EXPECT_EQ(cpo->dpo.rpo_alpha, 1.0);
  EXPECT_EQ(ipo->dpo.rpo_alpha, 0.0) << "no NLL term unless the spec asks";
  absl::StatusOr<PreferenceTrainOptions> discopop =
      OptionsOfYaml(Yaml("dpo", "", "dpo: {loss_type: discopop, discopop_tau: 0.1}\n"));
  ASSERT_TRUE(discopop.ok()) << discopop.status();
  EXPECT_EQ(discopop->dpo.loss, DpoOptions::Loss::kDiscopop);
  EXPECT_EQ(discopop->dpo.discopop_tau, 0.1);
  absl::StatusOr<PreferenceTrainOptions> ld = OptionsOfYaml(Yaml("dpo", "", "dpo: {ld_alpha: 0.5}\n"));
  ASSERT_TRUE(ld.ok()) << ld.status();
  EXPECT_EQ(ld->dpo.ld_alpha, 0.5);
  EXPECT_EQ(discopop->dpo.ld_alpha, 1.0) << "plain sums unless the spec asks";
  EXPECT_FALSE(ipo->offload);
  EXPECT_EQ(ipo->seed, 1234u);
}

// The reward and sft sections (objective_spec.h) reach the trainer: the centring coefficient and which SFT
// tokens are scored.
TEST(PlanOptionsTest, TheRewardAndSftSectionsReachTheTrainer) {
  absl::StatusOr<PreferenceTrainOptions> reward =
      OptionsOfYaml(Yaml("reward", "", "reward: {center_rewards_coefficient: 0.01}\n"));
  ASSERT_TRUE(reward.ok()) << reward.status();
  EXPECT_EQ(reward->center_rewards_coefficient, 0.01);
  absl::StatusOr<PreferenceTrainOptions> sft =
      OptionsOfYaml(Yaml("sft", "", "sft: {completion_only_loss: false, assistant_only_loss: true}\n"));
  ASSERT_TRUE(sft.ok()) << sft.status();
  EXPECT_FALSE(sft->data.completion_only_loss);
  EXPECT_TRUE(sft->data.assistant_only_loss);
  absl::StatusOr<PreferenceTrainOptions> plain = OptionsOfYaml(Yaml("sft", "", ""));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(plain->data.completion_only_loss);
  EXPECT_FALSE(plain->data.assistant_only_loss);
  EXPECT_EQ(plain->center_rewards_coefficient, 0.0);
}

// data.eos_token and data.chat_template reach the tokenizer the trainer loads (data::TokenizerOverrides).
TEST(PlanOptionsTest, TheTokenizerOverridesReachTheTrainer) {
  absl::StatusOr<PreferenceTrainOptions> o = OptionsOfYaml(absl::StrCat(
      "task: sft\nmodel: Qwen2.5-0.5B\ndata: {train: t.jsonl, tokenizer: /tok, eos_token: \"<|im_end|>\", "
      "chat_template: /t/chatml.jinja}\nworld_size: 2\ntraining:\n  steps: 10\n  global_batch: 16\n"
      "  gradient_accumulation: 2\n  max_length: 96\n"));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->data.tokenizer_dir, "/tok");
  EXPECT_EQ(o->data.tokenizer_overrides.eos_token, "<|im_end|>");
  EXPECT_EQ(o->data.tokenizer_overrides.chat_template, "/t/chatml.jinja");
}

// GRPO's rollout section reaches the rollouts' GenerationOptions (the decode mode by its enum).
TEST(PlanOptionsTest, TheGrpoRolloutReachesTheTrainer) {
  absl::StatusOr<PreferenceTrainOptions> o = OptionsOfYaml(
      Yaml("grpo", "",
           "rollout: {samples_per_prompt: 4, max_new_tokens: 8, top_p: 0.9, top_k: 20, min_p: 0.1, batch: 6, "
           "decode: static}\n"
           "rewards: [{type: answer}]\n"));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->grpo.rollout.samples_per_prompt, 4);
  EXPECT_EQ(o->grpo.rollout.max_new_tokens, 8);
  EXPECT_EQ(o->grpo.rollout.top_p, 0.9);
  EXPECT_EQ(o->grpo.rollout.top_k, 20);
  EXPECT_EQ(o->grpo.rollout.min_p, 0.1);
  EXPECT_EQ(o->grpo.rollout.rollout_batch, 6);
  EXPECT_EQ(o->grpo.rollout.decode, DecodeMode::kStatic);
  absl::StatusOr<PreferenceTrainOptions> eager =
      OptionsOfYaml(Yaml("grpo", "", "rollout: {max_new_tokens: 8}\nrewards: [{type: answer}]\n"));
  ASSERT_TRUE(eager.ok()) << eager.status();
  EXPECT_EQ(eager->grpo.rollout.decode, DecodeMode::kAuto)
      << "auto (cuda_graph on a GPU) unless the spec asks";
  EXPECT_FALSE(eager->grpo.objective.sequence_ratio) << "TRL's defaults";
  EXPECT_FALSE(eager->grpo.objective.delta.has_value());
  EXPECT_FALSE(eager->grpo.mask_truncated_completions);
  EXPECT_EQ(eager->grpo.top_entropy_quantile, 1.0) << "every token";
  absl::StatusOr<PreferenceTrainOptions> gspo = OptionsOfYaml(
      Yaml("grpo", "",
           "rollout: {max_new_tokens: 8}\ngrpo: {importance_sampling_level: sequence, delta: 2.0, "
           "mask_truncated_completions: true, scale_rewards: batch, top_entropy_quantile: 0.2}\nrewards: "
           "[{type: answer}, {type: format, "
           "pattern: 'x+', correct: 2, wrong: -1}]\n"));
  ASSERT_TRUE(gspo.ok()) << gspo.status();
  EXPECT_TRUE(gspo->grpo.objective.sequence_ratio);
  EXPECT_EQ(gspo->grpo.objective.delta, std::optional<double>(2.0));
  EXPECT_TRUE(gspo->grpo.mask_truncated_completions);
  EXPECT_EQ(gspo->grpo.top_entropy_quantile, 0.2);
  EXPECT_EQ(gspo->grpo.objective.term, GrpoPolicyTerm::kClipped);
  absl::StatusOr<PreferenceTrainOptions> cispo =
      OptionsOfYaml(Yaml("grpo", "",
                         "rollout: {max_new_tokens: 8}\ngrpo: {loss_type: cispo, epsilon_high: 5.0}\n"
                         "rewards: [{type: answer}]\n"));
  ASSERT_TRUE(cispo.ok()) << cispo.status();
  EXPECT_EQ(cispo->grpo.objective.term, GrpoPolicyTerm::kCispo);
  EXPECT_EQ(cispo->grpo.objective.norm, GrpoLossNorm::kTokenMean);
  EXPECT_EQ(cispo->grpo.objective.epsilon_high, 5.0);
  EXPECT_FALSE(cispo->grpo.objective.bias_correction_kl);
  absl::StatusOr<PreferenceTrainOptions> sapo =
      OptionsOfYaml(Yaml("grpo", "",
                         "rollout: {max_new_tokens: 8}\ngrpo: {loss_type: sapo, sapo_temperature_neg: 2.0, "
                         "use_bias_correction_kl: true}\n"
                         "rewards: [{type: answer}]\n"));
  ASSERT_TRUE(sapo.ok()) << sapo.status();
  EXPECT_EQ(sapo->grpo.objective.term, GrpoPolicyTerm::kSapo);
  EXPECT_EQ(sapo->grpo.objective.norm, GrpoLossNorm::kSequenceMean);
  EXPECT_EQ(sapo->grpo.objective.sapo_temperature_neg, 2.0);
  EXPECT_TRUE(sapo->grpo.objective.bias_correction_kl);
  EXPECT_FALSE(sapo->grpo.objective.rloo);
  absl::StatusOr<PreferenceTrainOptions> rloo = OptionsOfYaml(
      Yaml("grpo", "",
           "rollout: {max_new_tokens: 8}\ngrpo: {loss_type: rloo, beta: 0.05, normalize_advantages: "
           "true, reward_clip_range: [-1, 3]}\nrewards: [{type: answer}]\n"));
  ASSERT_TRUE(rloo.ok()) << rloo.status();
  EXPECT_TRUE(rloo->grpo.objective.rloo);
  EXPECT_TRUE(rloo->grpo.objective.normalize_advantages);
  ASSERT_TRUE(rloo->grpo.objective.reward_clip_range.has_value());
  EXPECT_EQ(*rloo->grpo.objective.reward_clip_range, std::make_pair(-1.0, 3.0));
  EXPECT_EQ(rloo->grpo.objective.norm, GrpoLossNorm::kSequenceMean);
  EXPECT_EQ(rloo->grpo.objective.term, GrpoPolicyTerm::kClipped);
  EXPECT_EQ(rloo->grpo.objective.beta, 0.05);
  EXPECT_EQ(gspo->grpo.objective.scale, RewardScale::kBatch);
  ASSERT_EQ(gspo->grpo.rewards.size(), 2u);
  const RewardSourceOptions& format = gspo->grpo.rewards[1];
  EXPECT_EQ(format.kind, RewardSourceOptions::Kind::kFormat);
  EXPECT_EQ(format.format.pattern, "x+");
  EXPECT_EQ(format.format.correct, 2.0);
  EXPECT_EQ(format.format.wrong, -1.0);
  EXPECT_EQ(eager->grpo.objective.scale, RewardScale::kGroup) << "TRL's default";
}

TEST(PlanOptionsTest, InitialWeightsAreTheSpecsInitElseTheModelsOwn) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "plan_options_model";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "model.safetensors") << "";
  jobspec::JobPlan plan;
  plan.model = dir.string();
  EXPECT_EQ(InitWeightsOf(plan), dir.string()) << "the model directory's own weights";
  plan.init = "/w/sft";
  EXPECT_EQ(InitWeightsOf(plan), "/w/sft") << "the spec's init wins";
  plan.init = "";
  plan.model = (dir / "absent").string();
  EXPECT_EQ(InitWeightsOf(plan), "") << "no weights: a random start from the seed";
  std::filesystem::remove_all(dir);
}

// Weights that cannot be opened stop the run with the spec's field and the path.
TEST(PlanOptionsTest, InitialWeightsThatCannotBeOpenedNameTheField) {
  PreferenceTrainOptions o;
  o.model_dir = "/no/such/model";
  o.init_weights = "/no/such/sft";
  const absl::Status init = OpenInitWeights(o).status();
  EXPECT_NE(init.message().find("field 'init' (the initial weights): /no/such/sft"), std::string::npos)
      << init;
  o.init_weights = o.model_dir;
  const absl::Status model = OpenInitWeights(o).status();
  EXPECT_NE(model.message().find("field 'model' (the initial weights): /no/such/model"), std::string::npos)
      << model;
  // So does a model directory without a config.json (it was the file alone: "rank 0: error: NOT_FOUND:
  // /no/such/model/config.json: cannot open").
  const absl::Status config = LoadModelConfig(o).status();
  EXPECT_NE(config.message().find("field 'model' (the model's config.json): /no/such/model/config.json"),
            std::string::npos)
      << config;
  o.init_weights = "";
  absl::StatusOr<std::optional<core::SafetensorsModel>> none = OpenInitWeights(o);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
}

// A worker's session checks every input file first, so that a missing one names the spec's field whoever
// submitted the job (the data loader named only the path: "d/train_ids.jsonl: cannot open preference data").
TEST(PlanOptionsTest, ASessionWhoseInputsAreMissingNamesTheirField) {
  absl::StatusOr<jobspec::JobSpec> spec = jobspec::ParseJobSpec(Yaml("dpo", "", ""), "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<jobspec::JobPlan> plan = jobspec::Resolve(*spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / absl::StrCat("plan_options_inputs_", ::getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << "{}";
  plan->model = dir.string();
  plan->data.dir = (dir / "data").string();
  comm::LocalCommunicator comm;
  const absl::Status s = MakeTorchTrainingSession(*plan, RuntimeOptions{}, &comm).status();
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_NE(s.message().find(absl::StrCat("field 'data' (the training data): ", plan->data.dir,
                                          "/train_ids.jsonl: No such file or directory")),
            std::string::npos)
      << s;
  std::filesystem::remove_all(dir);
}

// Options built in code (not from a plan) get the session's precondition checks, named as the spec names
// them.
TEST(PlanOptionsTest, TheGrpoSessionsChecksNameTheSpecsFields) {
  PreferenceTrainOptions o;
  o.task = PreferenceTrainOptions::Task::kGrpo;
  o.max_length = 16;
  o.grpo.rollout.samples_per_prompt = 4;
  o.grpo.rollout.max_new_tokens = 4;
  o.grpo.rewards.push_back(RewardSourceOptions{});
  EXPECT_TRUE(ValidateGrpoOptions(o).ok()) << ValidateGrpoOptions(o);
  const struct {
    std::function<void(PreferenceTrainOptions*)> edit;
    std::string want;
  } cases[] = {
      {[](auto* x) { x->grpo.rollout.samples_per_prompt = 1; }, "rollout.samples_per_prompt: must be >= 2"},
      {[](auto* x) { x->grpo.rollout.top_p = 0; }, "rollout.top_p: must be in (0, 1]"},
      {[](auto* x) { x->grpo.rollout.rollout_batch = -1; }, "rollout.batch: must be >= 0"},
      {[](auto* x) { x->grpo.rewards.clear(); }, "rewards: at least one reward source"},
      {[](auto* x) { x->max_length = 4; }, "training.max_length: 4 leaves no room for a prompt"},
  };
  for (const auto& c : cases) {
    PreferenceTrainOptions bad = o;
    c.edit(&bad);
    const absl::Status s = ValidateGrpoOptions(bad);
    EXPECT_NE(s.message().find(c.want), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace zerofit::worker
