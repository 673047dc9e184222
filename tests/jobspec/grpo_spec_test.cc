// task grpo in the job spec (jobspec/grpo_spec.h): the rollout, grpo and rewards sections, errors with file,
// line and field, the plan carrying them (JSON round trip), and the resolver sizing GRPO with the planner
// (micro-batches count sampled sequences; the rollout batch is the planner's when the spec leaves it out).
#include "jobspec/grpo_spec.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "jobspec/job_plan.h"
#include "jobspec/job_spec.h"
#include "jobspec/resolve.h"
#include "planner/model_shape.h"
#include "planner/search.h"

namespace zerofit::jobspec {
namespace {

std::string GrpoYaml(const std::string& sections, const std::string& training = "") {
  return absl::StrCat("task: grpo\nmodel: Qwen2.5-0.5B\ndata: {train: /d/p.jsonl}\nworld_size: 2\n",
                      "training: {steps: 10, global_batch: 16, max_length: 512", training, "}\n", sections);
}

constexpr const char* kSections = R"(rollout:
  samples_per_prompt: 8
  max_new_tokens: 128
  temperature: 0.9
  top_p: 0.95
  top_k: 50
  min_p: 0.05
  decode: cuda_graph
grpo: {iterations: 2, beta: 0.04, epsilon: 0.2, epsilon_high: 0.28, loss_type: dapo, scale_rewards: false,
       importance_sampling_level: sequence, delta: 1.5, mask_truncated_completions: true,
       top_entropy_quantile: 0.2, use_bias_correction_kl: true}
rewards:
  - {type: answer, rule: regex, pattern: '####\s*(?<n>-?[0-9,]+)', group: n, weight: 2}
  - {type: answer, rule: last_number}
  - {type: model, path: /models/rm, weight: 0.5}
  - {type: format, pattern: '(?s)<think>.*</think>.*', weight: 0.2, wrong: -1}
)";

TEST(GrpoSpecTest, ParsesTheSections) {
  absl::StatusOr<JobSpec> s = ParseJobSpec(GrpoYaml(kSections), "job.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  const GrpoJobSpec& g = s->grpo;
  EXPECT_EQ(g.rollout.samples_per_prompt, 8);
  EXPECT_EQ(g.rollout.max_new_tokens, 128);
  EXPECT_DOUBLE_EQ(g.rollout.temperature, 0.9);
  EXPECT_DOUBLE_EQ(g.rollout.top_p, 0.95);
  EXPECT_EQ(g.rollout.top_k, 50);
  EXPECT_DOUBLE_EQ(g.rollout.min_p, 0.05);
  EXPECT_EQ(g.rollout.decode, "cuda_graph");
  EXPECT_EQ(g.grpo.iterations, 2);
  EXPECT_DOUBLE_EQ(g.grpo.beta, 0.04);
  EXPECT_DOUBLE_EQ(g.grpo.epsilon_high.value_or(0), 0.28);
  EXPECT_EQ(g.grpo.loss_type, "dapo");
  EXPECT_EQ(g.grpo.scale_rewards, "none") << "TRL's false, by its name";
  EXPECT_EQ(g.grpo.importance_sampling_level, "sequence");
  EXPECT_DOUBLE_EQ(g.grpo.delta.value_or(0), 1.5);
  EXPECT_TRUE(g.grpo.mask_truncated_completions);
  EXPECT_DOUBLE_EQ(g.grpo.top_entropy_quantile, 0.2);
  ASSERT_EQ(g.rewards.size(), 4u);
  EXPECT_EQ(g.rewards[3].type, "format");
  EXPECT_EQ(g.rewards[3].name, "format");
  EXPECT_EQ(g.rewards[3].pattern, "(?s)<think>.*</think>.*");
  EXPECT_EQ(g.rewards[3].wrong, -1);
  EXPECT_EQ(g.rewards[0].name, "answer");  // default names: the type, numbered when repeated
  EXPECT_EQ(g.rewards[0].group, "n");
  EXPECT_DOUBLE_EQ(g.rewards[0].weight, 2);
  EXPECT_EQ(g.rewards[1].name, "answer2");
  EXPECT_EQ(g.rewards[1].rule, "last_number");
  EXPECT_EQ(g.rewards[2].name, "model");
  EXPECT_EQ(g.rewards[2].path, "/models/rm");
}

TEST(GrpoSpecTest, ErrorsNameFileLineAndField) {
  const struct {
    std::string sections, want;
  } cases[] = {
      {"rollout: {samples_per_prompt: 1}\nrewards: [{type: answer}]\n",
       "job.yaml:6: field 'rollout.samples_per_prompt': must be >= 2"},
      {"rollout: {max_new_tokens: 512}\nrewards: [{type: answer}]\n",
       "job.yaml:6: field 'rollout.max_new_tokens': 512 must be less than training.max_length (512)"},
      {"rollout: {temperature: 0}\nrewards: [{type: answer}]\n", "job.yaml:6: field 'rollout.temperature'"},
      {"rollout: {top_a: 5}\nrewards: [{type: answer}]\n",
       "job.yaml:6: field 'rollout.top_a': unknown field"},
      {"rollout: {top_k: -1}\nrewards: [{type: answer}]\n",
       "job.yaml:6: field 'rollout.top_k': must be >= 0"},
      {"rollout: {min_p: 1.5}\nrewards: [{type: answer}]\n",
       "job.yaml:6: field 'rollout.min_p': must be in [0, 1]"},
      {"rollout: {decode: graphs}\nrewards: [{type: answer}]\n",
       "job.yaml:6: field 'rollout.decode': must be auto, eager, static or cuda_graph"},
      {"grpo: {loss_type: bnpo}\nrewards: [{type: answer}]\n",
       "job.yaml:6: field 'grpo.loss_type': expected grpo, dapo, dr_grpo, cispo, sapo or rloo, got 'bnpo'"},
      {"grpo: {normalize_advantages: true}\nrewards: [{type: answer}]\n",
       "job.yaml:6: field 'grpo.normalize_advantages': applies to loss_type rloo only"},
      {"grpo: {reward_clip_range: [-1, 1]}\nrewards: [{type: answer}]\n",
       "job.yaml:6: field 'grpo.reward_clip_range': applies to loss_type rloo only"},
      {"grpo: {loss_type: rloo, reward_clip_range: [1, -1]}\nrewards: [{type: answer}]\n",
       "job.yaml:6: field 'grpo.reward_clip_range': [min, max] must be finite with min < max, got [1, -1]"},
      {"grpo: {loss_type: rloo, reward_clip_range: [1]}\nrewards: [{type: answer}]\n",
       "job.yaml:6: field 'grpo.reward_clip_range': expected [min, max]"},
      {"grpo: {loss_type: rloo, reward_clip_range: [a, 1]}\nrewards: [{type: answer}]\n",
       "job.yaml:6: field 'grpo.reward_clip_range': expected [min, max] as numbers, got ['a', '1']"},
      {"grpo: {loss_type: rloo, scale_rewards: batch}\nrewards: [{type: answer}]\n",
       "job.yaml:6: field 'grpo.scale_rewards': rloo's advantages are leave-one-out; normalize_advantages "
       "scales them"},
      {"grpo: {loss_type: rloo, importance_sampling_level: sequence}\nrewards: [{type: answer}]\n",
       "job.yaml:6: field 'grpo.importance_sampling_level': rloo has one ratio per completion"},
      {"grpo: {loss_type: rloo, delta: 2.0}\nrewards: [{type: answer}]\n",
       "job.yaml:6: field 'grpo.delta': does not apply to loss_type rloo"},
      {"grpo: {loss_type: rloo, top_entropy_quantile: 0.2}\nrewards: [{type: answer}]\n",
       "job.yaml:6: field 'grpo.top_entropy_quantile': selects tokens of a per-token loss"},
      {"grpo: {loss_type: rloo, use_bias_correction_kl: true}\nrewards: [{type: answer}]\n",
       "job.yaml:6: field 'grpo.use_bias_correction_kl': corrects the KL loss term; rloo's KL is in the "
       "reward"},
      {"grpo: {loss_type: cispo}\nrewards: [{type: answer}]\n",
       "job.yaml:6: field 'grpo.epsilon_high': loss_type cispo caps the importance weight at epsilon_high: "
       "give "
       "it (TRL recommends 5.0)"},
      {"grpo: {loss_type: sapo, delta: 2.0}\nrewards: [{type: answer}]\n",
       "job.yaml:6: field 'grpo.delta': caps the clipped term's ratio; loss_type sapo has none"},
      {"grpo: {loss_type: dapo, sapo_temperature_neg: 2.0}\nrewards: [{type: answer}]\n",
       "job.yaml:6: field 'grpo.sapo_temperature_neg': applies to loss_type sapo only, not dapo"},
      {"grpo: {loss_type: sapo, sapo_temperature_pos: 0}\nrewards: [{type: answer}]\n",
       "job.yaml:6: field 'grpo.sapo_temperature_pos': must be > 0, got 0"},
      {"grpo: {scale_rewards: global}\nrewards: [{type: answer}]\n",
       "job.yaml:6: field 'grpo.scale_rewards': expected group, batch or none (true, false), got 'global'"},
      {"grpo: {importance_sampling_level: sentence}\nrewards: [{type: answer}]\n",
       "job.yaml:6: field 'grpo.importance_sampling_level': expected token or sequence, got 'sentence'"},
      {"grpo: {delta: 0.9}\nrewards: [{type: answer}]\n", "job.yaml:6: field 'grpo.delta': must be > 1"},
      {"grpo: {mask_truncated_completions: sometimes}\nrewards: [{type: answer}]\n",
       "job.yaml:6: field 'grpo.mask_truncated_completions'"},
      {"grpo: {top_entropy_quantile: 0}\nrewards: [{type: answer}]\n",
       "job.yaml:6: field 'grpo.top_entropy_quantile': must be in (0, 1] (1: every token), got 0"},
      {"grpo: {top_entropy_quantile: 1.5}\nrewards: [{type: answer}]\n",
       "job.yaml:6: field 'grpo.top_entropy_quantile': must be in (0, 1]"},
      {"rewards:\n  - {type: answer}\n  - {type: answer, rule: fuzzy}\n",
       "job.yaml:8: field 'rewards[1].rule': expected exact, last_number or regex, got 'fuzzy'"},
      {"rewards:\n  - {type: answer, rule: regex, pattern: '(unclosed'}\n",
       "job.yaml:7: field 'rewards[0].pattern': "},
      {"rewards:\n  - {type: answer, rule: regex, pattern: '([0-9]+)', group: 2}\n",
       "job.yaml:7: field 'rewards[0].group': group 2 does not exist, the pattern has 1 capture group(s)"},
      {"rewards:\n  - {type: answer, rule: exact, pattern: 'x'}\n",
       "job.yaml:7: field 'rewards[0].pattern': only the regex rule has a pattern"},
      {"rewards:\n  - {type: model}\n", "job.yaml:7: field 'rewards[0].path': required"},
      {"rewards:\n  - {type: format}\n", "job.yaml:7: field 'rewards[0].pattern': required"},
      {"rewards:\n  - {type: format, pattern: '(x'}\n", "job.yaml:7: field 'rewards[0].pattern': "},
      {"rewards:\n  - {type: format, pattern: x, rule: regex}\n",
       "job.yaml:7: field 'rewards[0].rule': only a reward of type answer has a rule"},
      {"rewards:\n  - {type: formatting}\n",
       "job.yaml:7: field 'rewards[0].type': expected answer, format or model, got 'formatting'"},
      {"rewards:\n  - {type: answer, name: a}\n  - {type: answer, name: a}\n",
       "job.yaml:8: field 'rewards[1].name': 'a' is used twice"},
      {"rewards:\n  - {type: answer, name: 'a b'}\n", "job.yaml:7: field 'rewards[0].name': letters"},
      {"rollout: {samples_per_prompt: 4}\n", "job.yaml: field 'rewards': required for task grpo"},
      {"rewards: {type: answer}\n", "job.yaml:6: field 'rewards': expected a list"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<JobSpec> s = ParseJobSpec(GrpoYaml(c.sections), "job.yaml");
    ASSERT_FALSE(s.ok()) << c.sections;
    EXPECT_NE(s.status().message().find(c.want), std::string::npos) << s.status();
  }
  // A default that fails validation, in a section the spec leaves out: the field without a line. (It was
  // yaml-cpp's "invalid node; first invalid key: \"rollout\"", thrown while looking for the line.)
  absl::StatusOr<JobSpec> defaulted = ParseJobSpec(
      "task: grpo\nmodel: m\ndata: d\ntraining: {max_length: 64}\nrewards: [{type: answer}]\n", "job.yaml");
  ASSERT_FALSE(defaulted.ok());
  EXPECT_EQ(defaulted.status().message(),
            "job.yaml: field 'rollout.max_new_tokens': 256 must be less than training.max_length (64): the "
            "prompt gets the rest");
  // Only task grpo has the sections.
  absl::StatusOr<JobSpec> reward =
      ParseJobSpec("task: reward\nmodel: /m\ndata: /d\nrollout: {samples_per_prompt: 4}\n", "job.yaml");
  ASSERT_FALSE(reward.ok());
  EXPECT_NE(reward.status().message().find("job.yaml:4: field 'rollout': only task grpo"), std::string::npos)
      << reward.status();
}

TEST(GrpoSpecTest, ThePlanCarriesTheSectionsThroughJson) {
  absl::StatusOr<JobSpec> s = ParseJobSpec(GrpoYaml(kSections, ", gradient_accumulation: 4"), "job.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<JobPlan> plan = Resolve(*s, Attempt{});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::string json = JobPlanToJson(*plan);
  absl::StatusOr<JobPlan> back = JobPlanFromJson(json, "plan");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(JobPlanToJson(*back), json);
  EXPECT_EQ(back->grpo.rewards[0].pattern, s->grpo.rewards[0].pattern);
  EXPECT_EQ(back->grpo.rollout.samples_per_prompt, 8);
  EXPECT_EQ(back->grpo.rollout.decode, "cuda_graph");
  EXPECT_EQ(back->grpo.grpo.importance_sampling_level, "sequence");
  EXPECT_DOUBLE_EQ(back->grpo.grpo.delta.value_or(0), 1.5);
  EXPECT_TRUE(back->grpo.grpo.mask_truncated_completions);
  EXPECT_DOUBLE_EQ(back->grpo.grpo.top_entropy_quantile, 0.2);
  EXPECT_TRUE(back->grpo.grpo.use_bias_correction_kl);
  // No delta: none after the round trip either.
  JobPlan plain = *plan;
  plain.grpo.grpo.delta.reset();
  absl::StatusOr<JobPlan> plain_back = JobPlanFromJson(JobPlanToJson(plain), "plan");
  ASSERT_TRUE(plain_back.ok()) << plain_back.status();
  EXPECT_FALSE(plain_back->grpo.grpo.delta.has_value());
  // SAPO's temperatures travel too.
  JobPlan sapo = plain;
  sapo.grpo.grpo.loss_type = "sapo";
  sapo.grpo.grpo.sapo_temperature_pos = 0.5;
  sapo.grpo.grpo.sapo_temperature_neg = 2.0;
  absl::StatusOr<JobPlan> sapo_back = JobPlanFromJson(JobPlanToJson(sapo), "plan");
  ASSERT_TRUE(sapo_back.ok()) << sapo_back.status();
  EXPECT_EQ(sapo_back->grpo.grpo.loss_type, "sapo");
  EXPECT_EQ(sapo_back->grpo.grpo.sapo_temperature_pos, 0.5);
  EXPECT_EQ(sapo_back->grpo.grpo.sapo_temperature_neg, 2.0);
  // And RLOO's normalize_advantages and reward_clip_range (none in the plain plan).
  EXPECT_FALSE(plain_back->grpo.grpo.reward_clip_range.has_value());
  JobPlan rloo = plain;
  rloo.grpo.grpo.loss_type = "rloo";
  rloo.grpo.grpo.normalize_advantages = true;
  rloo.grpo.grpo.reward_clip_range = std::pair<double, double>(-0.5, 2.25);
  absl::StatusOr<JobPlan> rloo_back = JobPlanFromJson(JobPlanToJson(rloo), "plan");
  ASSERT_TRUE(rloo_back.ok()) << rloo_back.status();
  EXPECT_EQ(rloo_back->grpo.grpo.loss_type, "rloo");
  EXPECT_TRUE(rloo_back->grpo.grpo.normalize_advantages);
  ASSERT_TRUE(rloo_back->grpo.grpo.reward_clip_range.has_value());
  EXPECT_EQ(*rloo_back->grpo.grpo.reward_clip_range, std::make_pair(-0.5, 2.25));
  // The schedule counts optimizer updates: iterations per step.
  EXPECT_EQ(back->schedule.total_steps, 10 * 2);
  // A plan of another task has no grpo section, and a grpo plan without one is refused by name.
  const std::string other = JobPlanToJson(JobPlan{});
  EXPECT_EQ(other.find("\"grpo\""), std::string::npos);
  std::string cut = json;
  cut.replace(cut.find("\"grpo\": {"), 6, "\"gxpo\"");
  const absl::Status refused = JobPlanFromJson(cut, "plan").status();
  EXPECT_NE(refused.message().find("job plan key 'grpo' missing"), std::string::npos) << refused;
}

TEST(GrpoSpecTest, ResolveCountsSampledSequencesAndTakesThePlannersRolloutBatch) {
  // micro_batch counts sequences: 16 prompts x 8 samples / (2 ranks x 4) = 16 micro-batches per rank.
  absl::StatusOr<JobSpec> s = ParseJobSpec(GrpoYaml(kSections, ", micro_batch: 4"), "job.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<JobPlan> plan = Resolve(*s, Attempt{});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->gradient_accumulation, 16);
  EXPECT_EQ(ItemsPerStep(*plan), 16 * 8);
  // The rollout batch the planner chose (prompts per pass x samples), as planner::MakePlan gives it.
  absl::StatusOr<planner::ModelShape> shape = planner::LoadModelShape("Qwen2.5-0.5B");
  ASSERT_TRUE(shape.ok());
  planner::Workload w;
  w.task = planner::Task::kGrpo;
  w.seq_len = 512;
  w.global_batch = 16;
  w.prompt_len = 512 - 128;
  w.new_tokens = 128;
  w.samples_per_prompt = 8;
  w.element_bytes = 4;
  planner::Constraints c;
  c.micro_batch = 4;
  c.zero_stage = 2;
  c.offload = false;
  c.reference = planner::Reference::kResident;  // beta 0.04 > 0
  absl::StatusOr<planner::Hardware> hw = planner::ParseHardware("8x64GB");
  ASSERT_TRUE(hw.ok());
  planner::Hardware two = *hw;
  two.gpus_per_node = 2;
  absl::StatusOr<planner::Plan> want = planner::MakePlan(*shape, w, two, c);
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ(plan->grpo.rollout.batch, want->chosen.strategy.rollout_prompts * 8);
  // A rollout batch the spec gives is kept.
  absl::StatusOr<JobSpec> pinned =
      ParseJobSpec(GrpoYaml(std::string(kSections) + "", ", micro_batch: 4"), "job.yaml");
  ASSERT_TRUE(pinned.ok());
  pinned->grpo.rollout.batch = 24;
  absl::StatusOr<JobPlan> kept = Resolve(*pinned, Attempt{});
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->grpo.rollout.batch, 24);
  // An out-of-memory re-plan doubles the micro-batches up to one sequence each.
  JobPlan replanned = Replan(*kept, two, OutOfMemory{});
  EXPECT_EQ(replanned.gradient_accumulation, 32);
}

}  // namespace
}  // namespace zerofit::jobspec
