// LoRA in the job spec (jobspec/lora_spec.h): the `lora` section parsed and checked with file, line and
// field; the plan carrying it and the reference the resolver decides (lora-base: the policy's base with its
// adapters off, for DPO and GRPO with beta > 0), with the planned peak that follows from it.
#include "jobspec/lora_spec.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "jobspec/job_plan.h"
#include "jobspec/job_spec.h"
#include "jobspec/resolve.h"
#include "planner/memory_model.h"
#include "planner/model_shape.h"

namespace zerofit::jobspec {
namespace {

// A spec for the Qwen2.5-0.5B shape (a planner preset: no file needed), sized by the spec (no planner
// search), with `extra` lines at the end.
std::string LoraYaml(const std::string& task, const std::string& extra) {
  const std::string data = task == "grpo" ? "{train: /d/p.jsonl}" : "/d";
  return absl::StrCat("task: ", task, "\nmodel: Qwen2.5-0.5B\ndata: ", data, "\nworld_size: 2\n",
                      "training: {steps: 10, global_batch: 16, max_length: 512, gradient_accumulation: 2}\n",
                      extra);
}

constexpr const char* kGrpoBeta = "rewards: [{type: answer}]\ngrpo: {beta: 0.04}\n";

TEST(LoraSpecTest, ParsesTheSectionWithPeftsDefaults) {
  absl::StatusOr<JobSpec> s = ParseJobSpec(
      LoraYaml("dpo",
               "lora:\n  rank: 16\n  alpha: 32\n  dropout: 0.05\n  target_modules: [q_proj, v_proj]\n"),
      "job.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->lora.rank, 16);
  EXPECT_EQ(s->lora.alpha, 32);
  EXPECT_EQ(s->lora.dropout, 0.05);
  EXPECT_EQ(s->lora.target_modules, (std::vector<std::string>{"q_proj", "v_proj"}));
  absl::StatusOr<JobSpec> short_form = ParseJobSpec(LoraYaml("sft", "lora: {rank: 8}\n"), "job.yaml");
  ASSERT_TRUE(short_form.ok()) << short_form.status();
  EXPECT_EQ(short_form->lora.alpha, 16);
  EXPECT_EQ(short_form->lora.target_modules,
            (std::vector<std::string>{"q_proj", "k_proj", "v_proj", "o_proj"}));
  absl::StatusOr<JobSpec> none = ParseJobSpec(LoraYaml("sft", ""), "job.yaml");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->lora.enabled());
}

TEST(LoraSpecTest, ErrorsNameFileLineAndField) {
  const struct {
    std::string section, want;
  } cases[] = {
      {"lora: {alpha: 8}\n", "job.yaml:6: field 'lora.rank': required"},
      {"lora: {rank: 0}\n", "job.yaml:6: field 'lora.rank': must be 1..65536, got 0"},
      {"lora: {rank: many}\n", "job.yaml:6: field 'lora.rank': expected an integer, got 'many'"},
      {"lora:\n  rank: 8\n  alpha: -1\n", "job.yaml:8: field 'lora.alpha': must be positive"},
      {"lora:\n  rank: 8\n  dropout: 1\n", "job.yaml:8: field 'lora.dropout': must be in [0, 1)"},
      {"lora:\n  rank: 8\n  target_modules: [q_proj, lm_head]\n",
       "job.yaml:8: field 'lora.target_modules': unknown layer 'lm_head' (q_proj, k_proj"},
      {"lora:\n  rank: 8\n  target_modules: [q_proj, q_proj]\n",
       "job.yaml:8: field 'lora.target_modules': q_proj is named twice"},
      {"lora:\n  rank: 8\n  target_modules: []\n",
       "job.yaml:8: field 'lora.target_modules': must name at least one layer"},
      {"lora:\n  rank: 8\n  target_modules: q_proj\n",
       "job.yaml:8: field 'lora.target_modules': expected a list of layer names"},
      {"lora: {rank: 8, r: 8}\n", "job.yaml:6: field 'lora.r': unknown field"},
      {"lora: 8\n", "job.yaml:6: field 'lora': expected a mapping"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<JobSpec> s = ParseJobSpec(LoraYaml("dpo", c.section), "job.yaml");
    ASSERT_FALSE(s.ok()) << c.section;
    EXPECT_NE(s.status().message().find(c.want), std::string::npos) << s.status();
  }
}

TEST(LoraSpecTest, ThePlanCarriesLoraAndTheReferenceThroughJson) {
  absl::StatusOr<JobSpec> s = ParseJobSpec(
      LoraYaml("dpo", "lora: {rank: 4, alpha: 8, target_modules: [v_proj, up_proj]}\n"), "job.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<JobPlan> plan = Resolve(*s, Attempt{});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->reference, "lora-base");
  const std::string json = JobPlanToJson(*plan);
  absl::StatusOr<JobPlan> back = JobPlanFromJson(json, "plan");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(JobPlanToJson(*back), json);
  EXPECT_EQ(back->lora.rank, 4);
  EXPECT_EQ(back->lora.alpha, 8);
  EXPECT_EQ(back->lora.target_modules, (std::vector<std::string>{"v_proj", "up_proj"}));
  EXPECT_EQ(back->reference, "lora-base");
  std::string cut = json;
  cut.replace(cut.find("\"lora\": {"), 6, "\"lxra\"");
  const absl::Status refused = JobPlanFromJson(cut, "plan").status();
  EXPECT_NE(refused.message().find("job plan key 'lora' missing"), std::string::npos) << refused;
}

TEST(LoraSpecTest, TheResolverDecidesTheReferenceOnce) {
  const struct {
    std::string task, extra;
    const char* want;
  } rows[] = {
      {"dpo", "", "resident"},
      {"dpo", "lora: {rank: 8}\n", "lora-base"},
      {"grpo", "rewards: [{type: answer}]\n", "none"},  // beta 0: no reference is kept
      {"grpo", kGrpoBeta, "resident"},
      {"grpo", absl::StrCat(kGrpoBeta, "lora: {rank: 8}\n"), "lora-base"},
      {"reward", "lora: {rank: 8}\n", "none"},
      {"sft", "", "none"},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(absl::StrCat(r.task, " ", r.extra));
    absl::StatusOr<JobSpec> s = ParseJobSpec(LoraYaml(r.task, r.extra), "job.yaml");
    ASSERT_TRUE(s.ok()) << s.status();
    absl::StatusOr<JobPlan> plan = Resolve(*s, Attempt{});
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->reference, r.want);
  }
  // A pinned reference (zerofit_train_prefs --ref) is honoured, or refused where it cannot run.
  absl::StatusOr<JobSpec> lora = ParseJobSpec(LoraYaml("dpo", "lora: {rank: 8}\n"), "job.yaml");
  absl::StatusOr<JobSpec> full = ParseJobSpec(LoraYaml("dpo", ""), "job.yaml");
  absl::StatusOr<JobSpec> grpo = ParseJobSpec(LoraYaml("grpo", kGrpoBeta), "job.yaml");
  ASSERT_TRUE(lora.ok() && full.ok() && grpo.ok());
  EXPECT_EQ(*ReferenceOf(*lora, planner::Reference::kResident), planner::Reference::kResident);
  EXPECT_EQ(*ReferenceOf(*full, planner::Reference::kPrecomputed), planner::Reference::kPrecomputed);
  const absl::Status no_lora = ReferenceOf(*full, planner::Reference::kLoraBase).status();
  EXPECT_NE(no_lora.message().find("the job has no `lora` section"), std::string::npos) << no_lora;
  const absl::Status grpo_offloaded = ReferenceOf(*grpo, planner::Reference::kOffloaded).status();
  EXPECT_NE(grpo_offloaded.message().find("grpo keeps resident or lora-base"), std::string::npos)
      << grpo_offloaded;
  // Reference-free DPO (reference_free, orpo) keeps none, and says why a pinned one cannot run.
  absl::StatusOr<JobSpec> cpo = ParseJobSpec(LoraYaml("dpo", "dpo: {reference_free: true}\n"), "job.yaml");
  absl::StatusOr<JobSpec> orpo = ParseJobSpec(LoraYaml("dpo", "dpo: {loss_type: orpo}\n"), "job.yaml");
  ASSERT_TRUE(cpo.ok() && orpo.ok());
  EXPECT_EQ(*ReferenceOf(*cpo, std::nullopt), planner::Reference::kNone);
  EXPECT_EQ(ReferenceOf(*cpo, planner::Reference::kResident).status().message(),
            "reference resident: dpo with reference_free keeps no reference");
  EXPECT_EQ(ReferenceOf(*orpo, planner::Reference::kPrecomputed).status().message(),
            "reference precomputed: dpo with loss_type orpo keeps no reference");
}

TEST(LoraSpecTest, ThePlannedPeakHoldsNoReferenceCopyWithLoraBase) {
  absl::StatusOr<JobSpec> s = ParseJobSpec(LoraYaml("dpo", "lora: {rank: 8}\n"), "job.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<JobPlan> base = Resolve(*s, Attempt{});
  TrainerFacts resident;
  resident.reference = planner::Reference::kResident;
  absl::StatusOr<planner::Hardware> hw = HardwareOf(*s);
  ASSERT_TRUE(hw.ok() && base.ok());
  absl::StatusOr<JobPlan> copy = Resolve(*s, *hw, Attempt{}, resident);
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(copy->reference, "resident");
  // The resident copy's weights are the difference (s.bf16 is off: 4 bytes per parameter).
  absl::StatusOr<planner::ModelShape> shape = planner::LoadModelShape("Qwen2.5-0.5B");
  ASSERT_TRUE(shape.ok());
  const double copy_bytes = 4.0 * static_cast<double>(shape->PolicyParameters());
  EXPECT_NEAR(static_cast<double>(copy->planned_peak.device_bytes - base->planned_peak.device_bytes),
              copy_bytes, 1e-6 * copy_bytes)
      << base->planned_peak.basis << "\n"
      << copy->planned_peak.basis;
  EXPECT_NE(base->planned_peak.basis.find("reference lora-base"), std::string::npos)
      << base->planned_peak.basis;
  EXPECT_NE(base->planned_peak.basis.find("LoRA"), std::string::npos) << base->planned_peak.basis;
}

// Every example job (examples/jobs/*.yaml, the README's and docs' jobs) parses and resolves; the LoRA GRPO
// example's reference is the LoRA base, the SimPO and ORPO examples keep none.
TEST(LoraSpecTest, EveryExampleJobParses) {
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(ZEROFIT_EXAMPLE_JOBS_DIR)) {
    if (entry.path().extension() != ".yaml") continue;
    SCOPED_TRACE(entry.path().string());
    std::ifstream in(entry.path());
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    absl::StatusOr<JobSpec> spec = ParseJobSpec(text, entry.path().string(), ZEROFIT_EXAMPLE_JOBS_DIR);
    ASSERT_TRUE(spec.ok()) << spec.status();
    ++seen;
    if (entry.path().filename() == "arith_simpo.yaml" || entry.path().filename() == "arith_orpo.yaml") {
      absl::StatusOr<planner::Reference> none = ReferenceOf(*spec, std::nullopt);
      ASSERT_TRUE(none.ok()) << none.status();
      EXPECT_EQ(*none, planner::Reference::kNone);
    }
    if (entry.path().filename() != "arith_grpo_lora.yaml") continue;
    EXPECT_EQ(spec->lora.rank, 16);
    absl::StatusOr<planner::Reference> ref = ReferenceOf(*spec, std::nullopt);
    ASSERT_TRUE(ref.ok()) << ref.status();
    EXPECT_EQ(*ref, planner::Reference::kLoraBase);
  }
  EXPECT_GE(seen, 7);
}

}  // namespace
}  // namespace zerofit::jobspec
