// The resolved job plan: every decided size and path from the spec, a JSON round trip that keeps every field,
// and a reader that refuses another version, an unknown key and a wrong type by name.
#include "jobspec/job_plan.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "jobspec/resolve.h"
#include "nlohmann/json.hpp"

namespace zerofit::jobspec {
namespace {

constexpr const char* kSpec = R"(name: rm
task: reward
model: /models/base
data: {train: /d/train.jsonl, test: /d/test.jsonl, tokenizer: /tok, add_bos: "false", eos_token: "<|im_end|>",
       chat_template: /t/chatml.jinja}
world_size: 2
device: cpu
eval: {every: 50, max_samples: 100}
training:
  steps: 400
  global_batch: 64
  lr: 1.0e-3
  lr_schedule: cosine
  warmup_steps: 40
  min_lr: 1.0e-5
  weight_decay: 0.1
  offload: true
  max_length: 128
  gradient_accumulation: 4
  checkpointing: true
checkpoint: {dir: /ck, every: 100, keep: 2, overwrite: true}
metrics: {tensorboard: /tb, jsonl: /m.jsonl}
export: /out
)";

TEST(JobPlanTest, ResolvesEveryDecisionFromTheSpec) {
  auto spec = ParseJobSpec(kSpec, "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto resolved = Resolve(*spec);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  const JobPlan& p = *resolved;
  EXPECT_EQ(p.version, kJobPlanVersion);
  EXPECT_EQ(p.gradient_accumulation, 4);
  EXPECT_TRUE(p.activation_checkpointing);
  EXPECT_EQ(p.schedule.decay, core::LrDecay::kCosine);
  EXPECT_FLOAT_EQ(p.schedule.peak_lr, 1e-3f);
  EXPECT_EQ(p.schedule.warmup_steps, 40);
  EXPECT_EQ(p.schedule.total_steps, 400) << "decay ends at the last step";
  EXPECT_EQ(p.data.tokenizer, "/tok");
  EXPECT_EQ(p.data.add_bos, "false");
  EXPECT_EQ(p.data.eos_token, "<|im_end|>");
  EXPECT_EQ(p.data.chat_template, "/t/chatml.jinja");
  EXPECT_EQ(p.eval.every, 50);
  EXPECT_EQ(p.checkpoint.keep, 2);
  EXPECT_TRUE(p.checkpoint.overwrite);
  EXPECT_EQ(p.metrics.jsonl, "/m.jsonl");
  EXPECT_EQ(p.export_dir, "/out");
  EXPECT_TRUE(p.offload);
  EXPECT_EQ(p.max_length, 128);
}

TEST(JobPlanTest, JsonRoundTripKeepsEveryField) {
  auto spec = ParseJobSpec(kSpec, "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::string json = JobPlanToJson(*Resolve(*spec));
  auto back = JobPlanFromJson(json, "plan");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(JobPlanToJson(*back), json);
  EXPECT_EQ(back->gradient_accumulation, 4);
  EXPECT_EQ(back->data.test, "/d/test.jsonl");
  EXPECT_EQ(back->schedule.decay, core::LrDecay::kCosine);
  EXPECT_TRUE(back->checkpoint.overwrite);
  EXPECT_NE(json.find(absl::StrCat("\"version\": ", kJobPlanVersion)), std::string::npos) << json;
  EXPECT_EQ(back->sizing, "from the spec: 4 micro-batch(es) per rank per step");
  EXPECT_FALSE(back->checkpoint.resume);

  std::string resumed(kSpec);
  resumed.replace(resumed.find("overwrite: true"), 15, "resume: true");
  auto resume_spec = ParseJobSpec(resumed, "job.yaml");
  ASSERT_TRUE(resume_spec.ok()) << resume_spec.status();
  auto resume_back = JobPlanFromJson(JobPlanToJson(*Resolve(*resume_spec)), "plan");
  ASSERT_TRUE(resume_back.ok()) << resume_back.status();
  EXPECT_TRUE(resume_back->checkpoint.resume);
  EXPECT_FALSE(resume_back->checkpoint.overwrite);
}

TEST(JobPlanTest, ReaderRefusesOtherVersionsUnknownKeysAndWrongTypes) {
  auto spec = ParseJobSpec(kSpec, "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const auto good = nlohmann::ordered_json::parse(JobPlanToJson(*Resolve(*spec)));
  auto with = [&](auto edit) {
    nlohmann::ordered_json j = good;
    edit(j);
    return JobPlanFromJson(j.dump(), "job-000001");
  };
  auto newer = with([](auto& j) { j["version"] = kJobPlanVersion + 1; });
  ASSERT_FALSE(newer.ok());
  EXPECT_NE(newer.status().message().find(absl::StrCat("job plan version ", kJobPlanVersion + 1,
                                                       ", this program reads version ", kJobPlanVersion)),
            std::string::npos)
      << newer.status();
  auto unknown = with([](auto& j) { j["data"]["shuffle"] = true; });
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("job-000001: job plan key 'data.shuffle' unknown key"),
            std::string::npos)
      << unknown.status();
  auto wrong = with([](auto& j) { j["steps"] = "many"; });
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("'steps' has the wrong type"), std::string::npos) << wrong.status();
  auto missing = with([](auto& j) { j.erase("export"); });
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("'export' missing"), std::string::npos) << missing.status();
  EXPECT_FALSE(JobPlanFromJson("{", "x").ok());
}

TEST(JobPlanTest, AShrunkenAttemptsPlanCarriesItsWorldSizeAndTheAllowedOnes) {
  auto spec = ParseJobSpec(
      "task: reward\nmodel: /m\ndata: /d\ntraining: {global_batch: 8, micro_batch: 2, gradient_accumulation: "
      "1}\n"
      "slurm:\n  nodes: 2\n  tasks_per_node: 2\n  on_node_loss: shrink\n  min_nodes: 1\n",
      "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const JobPlan full = *Resolve(*spec);
  EXPECT_EQ(full.world_size, 4);
  EXPECT_EQ(full.world_sizes, (std::vector<int>{2, 4}));
  auto back = JobPlanFromJson(JobPlanToJson(*Resolve(*spec, Attempt{2})), "plan");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->world_size, 2);
  EXPECT_EQ(back->gradient_accumulation, 2);
  EXPECT_EQ(back->world_sizes, (std::vector<int>{2, 4}));
  EXPECT_EQ(back->global_batch, 8) << "the same global batch at any world size";
}

TEST(JobPlanTest, ThePlannedPeakRoundTrips) {
  auto spec = ParseJobSpec("task: reward\nmodel: /m\ndata: /d\n", "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  JobPlan p = *Resolve(*spec);
  p.planned_peak = {int64_t{12} << 30, int64_t{80} << 30, "8x64GB: micro-batch 4 x accumulation 2"};
  auto back = JobPlanFromJson(JobPlanToJson(p), "plan");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->planned_peak.device_bytes, int64_t{12} << 30);
  EXPECT_EQ(back->planned_peak.host_bytes, int64_t{80} << 30);
  EXPECT_EQ(back->planned_peak.basis, p.planned_peak.basis);
}

}  // namespace
}  // namespace zerofit::jobspec
