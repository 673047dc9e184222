// The trainer's settings a job spec gives (issue 31: before, only zerofit_train_prefs's flags could):
// `dpo` (beta, loss_type, label_smoothing, task dpo only), training.seed, training.delayed_update_from,
// training.optim and min_8bit_size, and `init`. Each is parsed with file, line and field in its errors,
// carried by the resolved plan unchanged, and kept by the plan's JSON.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "jobspec/job_plan.h"
#include "jobspec/job_spec.h"
#include "jobspec/objective_spec.h"
#include "jobspec/resolve.h"
#include "nlohmann/json.hpp"

namespace zerofit::jobspec {
namespace {

// Sized by the spec (no planner search) on a planner preset (no file needed); `training` and `extra` are
// added as given.
std::string Yaml(const std::string& task, const std::string& training, const std::string& extra) {
  return absl::StrCat("task: ", task, "\nmodel: Qwen2.5-0.5B\ndata: /d\nworld_size: 2\ntraining:\n",
                      "  steps: 10\n  global_batch: 16\n  gradient_accumulation: 2\n", training, extra);
}

absl::StatusOr<JobPlan> PlanOf(const std::string& yaml) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(yaml, "job.yaml");
  if (!spec.ok()) return spec.status();
  return Resolve(*spec);
}

TEST(TrainerFieldsTest, TheDpoSectionReachesThePlanAndItsJson) {
  absl::StatusOr<JobPlan> p =
      PlanOf(Yaml("dpo", "", "dpo:\n  beta: 0.25\n  loss_type: sigmoid\n  label_smoothing: 0.1\n"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->dpo.beta, 0.25);
  EXPECT_EQ(p->dpo.loss_type, "sigmoid");
  EXPECT_EQ(p->dpo.label_smoothing, 0.1);
  const std::string json = JobPlanToJson(*p);
  absl::StatusOr<JobPlan> back = JobPlanFromJson(json, "plan");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(JobPlanToJson(*back), json);
  EXPECT_EQ(back->dpo.beta, 0.25);
  EXPECT_EQ(back->dpo.label_smoothing, 0.1);

  absl::StatusOr<JobPlan> ipo = PlanOf(Yaml("dpo", "", "dpo: {loss_type: ipo}\n"));
  ASSERT_TRUE(ipo.ok()) << ipo.status();
  EXPECT_EQ(ipo->dpo.loss_type, "ipo");
  absl::StatusOr<JobPlan> robust =
      PlanOf(Yaml("dpo", "", "dpo: {loss_type: robust, label_smoothing: 0.2}\n"));
  ASSERT_TRUE(robust.ok()) << robust.status();
  EXPECT_EQ(robust->dpo.loss_type, "robust");
  EXPECT_EQ(robust->dpo.label_smoothing, 0.2);
  EXPECT_TRUE(PlanOf(Yaml("dpo", "", "dpo: {loss_type: hinge, beta: 0.5}\n")).ok());
  EXPECT_EQ(ipo->dpo.beta, 0.1) << "TRL's default";
  EXPECT_EQ(ipo->reference, "resident");
  // SimPO is reference-free: the plan keeps none (and the planner sizes the job without one).
  absl::StatusOr<JobPlan> simpo =
      PlanOf(Yaml("dpo", "", "dpo: {loss_type: simpo, beta: 2.0, simpo_gamma: 1.0}\n"));
  ASSERT_TRUE(simpo.ok()) << simpo.status();
  EXPECT_EQ(simpo->reference, "none");
  EXPECT_EQ(simpo->dpo.simpo_gamma, 1.0);
  absl::StatusOr<JobPlan> simpo_back = JobPlanFromJson(JobPlanToJson(*simpo), "plan");
  ASSERT_TRUE(simpo_back.ok()) << simpo_back.status();
  EXPECT_EQ(simpo_back->dpo.simpo_gamma, 1.0);
  // ORPO is reference-free too; so is any loss with reference_free (TRL's DPOConfig), which with rpo_alpha
  // is CPO. Both fields survive the plan's JSON.
  absl::StatusOr<JobPlan> orpo = PlanOf(Yaml("dpo", "", "dpo: {loss_type: orpo, beta: 0.2}\n"));
  ASSERT_TRUE(orpo.ok()) << orpo.status();
  EXPECT_EQ(orpo->reference, "none");
  absl::StatusOr<JobPlan> cpo =
      PlanOf(Yaml("dpo", "", "dpo: {loss_type: sigmoid, reference_free: true, rpo_alpha: 1.0}\n"));
  ASSERT_TRUE(cpo.ok()) << cpo.status();
  EXPECT_EQ(cpo->reference, "none");
  absl::StatusOr<JobPlan> cpo_back = JobPlanFromJson(JobPlanToJson(*cpo), "plan");
  ASSERT_TRUE(cpo_back.ok()) << cpo_back.status();
  EXPECT_TRUE(cpo_back->dpo.reference_free);
  EXPECT_EQ(cpo_back->dpo.rpo_alpha, 1.0);
  absl::StatusOr<JobPlan> rpo = PlanOf(Yaml("dpo", "", "dpo: {rpo_alpha: 0.5}\n"));
  ASSERT_TRUE(rpo.ok()) << rpo.status();
  EXPECT_EQ(rpo->reference, "resident") << "RPO keeps DPO's reference";
  EXPECT_EQ(rpo->dpo.rpo_alpha, 0.5);
  absl::StatusOr<JobPlan> discopop =
      PlanOf(Yaml("dpo", "", "dpo: {loss_type: discopop, discopop_tau: 0.1}\n"));
  ASSERT_TRUE(discopop.ok()) << discopop.status();
  EXPECT_EQ(discopop->reference, "resident");
  absl::StatusOr<JobPlan> discopop_back = JobPlanFromJson(JobPlanToJson(*discopop), "plan");
  ASSERT_TRUE(discopop_back.ok()) << discopop_back.status();
  EXPECT_EQ(discopop_back->dpo.discopop_tau, 0.1);
  absl::StatusOr<JobPlan> ld = PlanOf(Yaml("dpo", "", "dpo: {ld_alpha: 0.5}\n"));
  ASSERT_TRUE(ld.ok()) << ld.status();
  absl::StatusOr<JobPlan> ld_back = JobPlanFromJson(JobPlanToJson(*ld), "plan");
  ASSERT_TRUE(ld_back.ok()) << ld_back.status();
  EXPECT_EQ(ld_back->dpo.ld_alpha, 0.5);

  // Without the section: TRL's defaults. Other tasks' plans have no "dpo" key at all.
  absl::StatusOr<JobPlan> plain = PlanOf(Yaml("dpo", "", ""));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->dpo.beta, 0.1);
  EXPECT_EQ(plain->dpo.loss_type, "sigmoid");
  absl::StatusOr<JobPlan> reward = PlanOf(Yaml("reward", "", ""));
  ASSERT_TRUE(reward.ok()) << reward.status();
  EXPECT_FALSE(nlohmann::json::parse(JobPlanToJson(*reward)).contains("dpo"));
  EXPECT_TRUE(nlohmann::json::parse(JobPlanToJson(*plain)).contains("dpo"));
}

// `reward: {center_rewards_coefficient}` (TRL's RewardConfig name), task reward only: in the plan and its
// JSON; other tasks' plans have no "reward" key.
TEST(TrainerFieldsTest, TheRewardSectionReachesThePlanAndItsJson) {
  absl::StatusOr<JobPlan> p = PlanOf(Yaml("reward", "", "reward: {center_rewards_coefficient: 0.01}\n"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->reward.center_rewards_coefficient, 0.01);
  const std::string json = JobPlanToJson(*p);
  absl::StatusOr<JobPlan> back = JobPlanFromJson(json, "plan");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->reward.center_rewards_coefficient, 0.01);
  EXPECT_EQ(JobPlanToJson(*back), json);
  absl::StatusOr<JobPlan> plain = PlanOf(Yaml("reward", "", ""));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->reward.center_rewards_coefficient, 0.0);
  absl::StatusOr<JobPlan> dpo = PlanOf(Yaml("dpo", "", ""));
  ASSERT_TRUE(dpo.ok()) << dpo.status();
  EXPECT_FALSE(nlohmann::json::parse(JobPlanToJson(*dpo)).contains("reward"));
  const struct {
    std::string task, section, want;
  } bad[] = {
      {"reward", "reward: {center_rewards_coefficient: -1}\n",
       "job.yaml:9: field 'reward.center_rewards_coefficient': must be a finite number >= 0, got -1"},
      {"reward", "reward: {center_rewards_coefficient: .inf}\n",
       "job.yaml:9: field 'reward.center_rewards_coefficient': must be a finite number >= 0, got inf"},
      {"reward", "reward: {margin: 1}\n", "job.yaml:9: field 'reward.margin': unknown field"},
      {"reward", "reward: 0.01\n",
       "job.yaml:9: field 'reward': expected a mapping {center_rewards_coefficient}"},
      {"dpo", "reward: {center_rewards_coefficient: 0.01}\n",
       "job.yaml:9: field 'reward': applies to task reward only, not dpo"},
  };
  for (const auto& c : bad) {
    absl::StatusOr<JobSpec> s = ParseJobSpec(Yaml(c.task, "", c.section), "job.yaml");
    ASSERT_FALSE(s.ok()) << c.section;
    EXPECT_EQ(std::string(s.status().message()), c.want);
  }
}

// `sft: {completion_only_loss, assistant_only_loss}` (TRL's SFTConfig names), task sft only.
TEST(TrainerFieldsTest, TheSftSectionReachesThePlanAndItsJson) {
  absl::StatusOr<JobPlan> p =
      PlanOf(Yaml("sft", "", "sft: {completion_only_loss: false, assistant_only_loss: true}\n"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->sft.completion_only_loss);
  EXPECT_TRUE(p->sft.assistant_only_loss);
  const std::string json = JobPlanToJson(*p);
  absl::StatusOr<JobPlan> back = JobPlanFromJson(json, "plan");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->sft.completion_only_loss);
  EXPECT_TRUE(back->sft.assistant_only_loss);
  EXPECT_EQ(JobPlanToJson(*back), json);
  absl::StatusOr<JobPlan> plain = PlanOf(Yaml("sft", "", ""));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(plain->sft.completion_only_loss) << "TRL's default for prompt-completion data";
  EXPECT_FALSE(plain->sft.assistant_only_loss) << "TRL's default";
  absl::StatusOr<JobSpec> refused =
      ParseJobSpec(Yaml("reward", "", "sft: {completion_only_loss: false}\n"), "job.yaml");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(std::string(refused.status().message()),
            "job.yaml:9: field 'sft': applies to task sft only, not reward");
  for (const std::string& field :
       std::vector<std::string>{"completion_only_loss: maybe", "assistant_only_loss: 1.5"}) {
    absl::StatusOr<JobSpec> typo = ParseJobSpec(Yaml("sft", "", "sft: {" + field + "}\n"), "job.yaml");
    ASSERT_FALSE(typo.ok()) << field;
    const std::string name = field.substr(0, field.find(':'));
    EXPECT_NE(std::string(typo.status().message()).find("job.yaml:9: field 'sft." + name + "'"),
              std::string::npos)
        << typo.status();
  }
}

TEST(TrainerFieldsTest, DpoErrorsNameFileLineAndField) {
  const struct {
    std::string task, section, want;
  } cases[] = {
      {"dpo", "dpo: {beta: 0}\n", "job.yaml:9: field 'dpo.beta': must be a positive finite number, got 0"},
      {"dpo", "dpo:\n  beta: .nan\n", "job.yaml:10: field 'dpo.beta': must be a positive finite number"},
      {"dpo", "dpo:\n  loss_type: bco_pair\n",
       "job.yaml:10: field 'dpo.loss_type': expected sigmoid, ipo, hinge, robust, exo_pair, nca_pair, "
       "sppo_hard, apo_zero, apo_down, discopop, simpo or orpo, got 'bco_pair'"},
      {"dpo", "dpo:\n  loss_type: sigmoid\n  discopop_tau: 0.1\n",
       "job.yaml:11: field 'dpo.discopop_tau': applies to loss_type discopop only, not sigmoid"},
      {"dpo", "dpo:\n  ld_alpha: 1.5\n",
       "job.yaml:10: field 'dpo.ld_alpha': must be in [0, 1] (1: plain sums)"},
      {"dpo", "dpo:\n  loss_type: ipo\n  ld_alpha: 0.5\n",
       "job.yaml:11: field 'dpo.ld_alpha': weighs the tail of summed log-probs; loss_type ipo compares means "
       "per "
       "token, which are length-normalised already"},
      {"dpo", "dpo:\n  loss_type: discopop\n  discopop_tau: 0\n",
       "job.yaml:11: field 'dpo.discopop_tau': must be a positive finite number, got 0"},
      {"dpo", "dpo:\n  label_smoothing: 0.5\n",
       "job.yaml:10: field 'dpo.label_smoothing': must be in [0, 0.5), got 0.5"},
      {"dpo", "dpo:\n  loss_type: ipo\n  label_smoothing: 0.1\n",
       "job.yaml:11: field 'dpo.label_smoothing': applies to loss_type sigmoid, robust, exo_pair and simpo "
       "only, not ipo"},
      {"dpo", "dpo:\n  loss_type: hinge\n  label_smoothing: 0.1\n",
       "job.yaml:11: field 'dpo.label_smoothing': applies to loss_type sigmoid, robust, exo_pair and simpo "
       "only, not hinge"},
      {"dpo", "dpo: {beta: 0.1, gamma: 1}\n", "job.yaml:9: field 'dpo.gamma': unknown field"},
      {"dpo", "dpo:\n  loss_type: sigmoid\n  simpo_gamma: 1.0\n",
       "job.yaml:11: field 'dpo.simpo_gamma': applies to loss_type simpo only, not sigmoid"},
      {"dpo", "dpo:\n  loss_type: simpo\n  simpo_gamma: -1\n",
       "job.yaml:11: field 'dpo.simpo_gamma': must be a finite number >= 0, got -1"},
      {"dpo", "dpo:\n  loss_type: orpo\n  rpo_alpha: 1.0\n",
       "job.yaml:11: field 'dpo.rpo_alpha': does not apply to loss_type orpo, whose negative log-likelihood "
       "term has weight 1 (TRL's ORPOTrainer)"},
      {"dpo", "dpo:\n  rpo_alpha: -0.5\n",
       "job.yaml:10: field 'dpo.rpo_alpha': must be a finite number >= 0"},
      {"dpo", "dpo:\n  reference_free: maybe\n", "job.yaml:10: field 'dpo.reference_free'"},
      {"dpo", "dpo:\n  loss_type: orpo\n  label_smoothing: 0.1\n",
       "job.yaml:11: field 'dpo.label_smoothing': applies to loss_type sigmoid, robust, exo_pair and simpo "
       "only, not orpo"},
      {"dpo", "dpo: 0.1\n", "job.yaml:9: field 'dpo': expected a mapping"},
      {"reward", "dpo: {beta: 0.1}\n", "job.yaml:9: field 'dpo': applies to task dpo only, not reward"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<JobSpec> s = ParseJobSpec(Yaml(c.task, "", c.section), "job.yaml");
    ASSERT_FALSE(s.ok()) << c.section;
    EXPECT_NE(s.status().message().find(c.want), std::string::npos) << s.status();
  }
}

TEST(TrainerFieldsTest, SeedDelayedUpdateAndInitReachThePlan) {
  absl::StatusOr<JobPlan> p = PlanOf(
      Yaml("reward", "  offload: true\n  delayed_update_from: 40\n  seed: 7\n", "init: /models/sft\n"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->seed, 7);
  EXPECT_EQ(p->delayed_update_from, 40);
  EXPECT_EQ(p->init, "/models/sft");
  absl::StatusOr<JobPlan> back = JobPlanFromJson(JobPlanToJson(*p), "plan");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->seed, 7);
  EXPECT_EQ(back->delayed_update_from, 40);
  EXPECT_EQ(back->init, "/models/sft");

  absl::StatusOr<JobPlan> defaults = PlanOf(Yaml("reward", "", ""));
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->seed, 1234) << "the trainer's default: plans of older specs train as before";
  EXPECT_EQ(defaults->delayed_update_from, -1);
  EXPECT_EQ(defaults->init, "");
}

TEST(TrainerFieldsTest, SeedAndDelayedUpdateErrorsNameFileLineAndField) {
  const struct {
    std::string training, want;
  } cases[] = {
      {"  seed: -1\n", "job.yaml:9: field 'training.seed': must be >= 0, got -1"},
      {"  seed: lucky\n", "job.yaml:9: field 'training.seed': expected an integer, got 'lucky'"},
      {"  delayed_update_from: 3\n",
       "job.yaml:9: field 'training.delayed_update_from': the delayed parameter update is ZeRO-Offload's: it "
       "needs training.offload: true"},
      {"  offload: true\n  delayed_update_from: -2\n",
       "job.yaml:10: field 'training.delayed_update_from': must be >= 0, got -2"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<JobSpec> s = ParseJobSpec(Yaml("reward", c.training, ""), "job.yaml");
    ASSERT_FALSE(s.ok()) << c.training;
    EXPECT_NE(s.status().message().find(c.want), std::string::npos) << s.status();
  }
}

// training.optim (Hugging Face's names; the bitsandbytes alias too) and training.min_8bit_size reach the
// plan and survive its JSON; the defaults are fp32 moments and bitsandbytes' 4096.
TEST(TrainerFieldsTest, OptimAndMin8bitSizeReachThePlan) {
  absl::StatusOr<JobPlan> p = PlanOf(Yaml("reward", "  optim: adamw_bnb_8bit\n  min_8bit_size: 1000\n", ""));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->optimizer.kind, OptimizerKind::kAdamW8bit);
  EXPECT_EQ(p->optimizer.min_8bit_size, 1000);
  const std::string json = JobPlanToJson(*p);
  EXPECT_NE(json.find("\"optim\": \"adamw_8bit\""), std::string::npos) << json;
  absl::StatusOr<JobPlan> back = JobPlanFromJson(json, "plan");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->optimizer.kind, OptimizerKind::kAdamW8bit);
  EXPECT_EQ(back->optimizer.min_8bit_size, 1000);

  absl::StatusOr<JobPlan> defaults = PlanOf(Yaml("reward", "  optim: adamw_torch_fused\n", ""));
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->optimizer.kind, OptimizerKind::kAdamWTorch);
  EXPECT_EQ(defaults->optimizer.min_8bit_size, 4096);
  nlohmann::json bad = nlohmann::json::parse(JobPlanToJson(*defaults));
  bad["optim"] = "lion_8bit";
  absl::StatusOr<JobPlan> refused = JobPlanFromJson(bad.dump(), "plan");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("'lion_8bit' is not an optimizer zerofit runs"),
            std::string::npos)
      << refused.status();
}

// 8-bit moments with offload (their moments in host memory): the spec validates, and both reach the plan
// and survive its JSON.
TEST(TrainerFieldsTest, EightBitMomentsWithOffloadReachThePlan) {
  absl::StatusOr<JobPlan> p = PlanOf(Yaml("reward", "  offload: true\n  optim: adamw_8bit\n", ""));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->offload);
  EXPECT_EQ(p->optimizer.kind, OptimizerKind::kAdamW8bit);
  absl::StatusOr<JobPlan> back = JobPlanFromJson(JobPlanToJson(*p), "plan");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->offload);
  EXPECT_EQ(back->optimizer.kind, OptimizerKind::kAdamW8bit);
}

TEST(TrainerFieldsTest, OptimErrorsNameFileLineAndField) {
  const struct {
    std::string training, want;
  } cases[] = {
      {"  optim: sgd\n",
       "job.yaml:9: field 'training.optim': 'sgd' is not an optimizer zerofit runs: adamw_torch (alias "
       "adamw_torch_fused, adamw_hf) or adamw_8bit (alias adamw_bnb_8bit)"},
      {"  min_8bit_size: -1\n", "job.yaml:9: field 'training.min_8bit_size': must be >= 0, got -1"},
      {"  min_8bit_size: big\n",
       "job.yaml:9: field 'training.min_8bit_size': expected an integer, got 'big'"},
      {"  optim: paged_adamw_8bit\n",
       "job.yaml:9: field 'training.optim': 'paged_adamw_8bit' pages optimizer state to host memory when the "
       "GPU "
       "runs short; zerofit plans the memory instead: adamw_8bit keeps 8-bit moments (on the GPU, or in host "
       "memory with training.offload: true)"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<JobSpec> s = ParseJobSpec(Yaml("reward", c.training, ""), "job.yaml");
    ASSERT_FALSE(s.ok()) << c.training;
    EXPECT_NE(s.status().message().find(c.want), std::string::npos) << s.status();
  }
}

TEST(TrainerFieldsTest, SeedAndDelayedUpdateMayStandNextToADeepSpeedConfig) {
  const std::string yaml =
      "task: reward\nmodel: Qwen2.5-0.5B\ndata: /d\nworld_size: 2\n"
      "deepspeed: '{\"train_batch_size\": 16, \"gradient_accumulation_steps\": 2, \"zero_optimization\": "
      "{\"stage\": 2, \"offload_optimizer\": {\"device\": \"cpu\"}}}'\n"
      "training: {steps: 10, seed: 99, delayed_update_from: 5}\n";
  absl::StatusOr<JobPlan> p = PlanOf(yaml);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->seed, 99);
  EXPECT_EQ(p->delayed_update_from, 5);
  EXPECT_TRUE(p->offload);
  // Other training fields only where the config leaves them out (or says "auto").
  absl::StatusOr<JobSpec> lr = ParseJobSpec(
      "task: reward\nmodel: Qwen2.5-0.5B\ndata: /d\ndeepspeed: '{\"train_batch_size\": 16}'\n"
      "training: {lr: 0.1}\n",
      "job.yaml");
  ASSERT_TRUE(lr.ok()) << lr.status();
  EXPECT_DOUBLE_EQ(lr->training.lr, 0.1);
  lr = ParseJobSpec(
      "task: reward\nmodel: Qwen2.5-0.5B\ndata: /d\ndeepspeed: '{\"train_batch_size\": 16, \"optimizer\": "
      "{\"params\": {\"lr\": 0.2}}}'\ntraining: {lr: 0.1}\n",
      "job.yaml");
  ASSERT_FALSE(lr.ok());
  EXPECT_NE(lr.status().message().find("field 'training.lr': set in the DeepSpeed config too "
                                       "('optimizer.params.lr')"),
            std::string::npos)
      << lr.status();
  // DeepSpeed's optimizer section names the optimizer (fp32 AdamW): training.optim beside it is refused, as
  // Hugging Face's Trainer lets the DeepSpeed optimizer override `optim`; without a type it may stand.
  absl::StatusOr<JobSpec> optim = ParseJobSpec(
      "task: reward\nmodel: Qwen2.5-0.5B\ndata: /d\ndeepspeed: '{\"train_batch_size\": 16, \"optimizer\": "
      "{\"type\": \"AdamW\"}}'\ntraining: {optim: adamw_8bit}\n",
      "job.yaml");
  ASSERT_FALSE(optim.ok());
  EXPECT_NE(optim.status().message().find("field 'training.optim': set in the DeepSpeed config too "
                                          "('optimizer.type')"),
            std::string::npos)
      << optim.status();
  optim = ParseJobSpec(
      "task: reward\nmodel: Qwen2.5-0.5B\ndata: /d\ndeepspeed: '{\"train_batch_size\": 16, \"optimizer\": "
      "{\"params\": {\"lr\": 0.2}}}'\ntraining: {optim: adamw_8bit}\n",
      "job.yaml");
  ASSERT_TRUE(optim.ok()) << optim.status();
  EXPECT_TRUE(optim->training.optimizer.eight_bit());
}

}  // namespace
}  // namespace zerofit::jobspec
