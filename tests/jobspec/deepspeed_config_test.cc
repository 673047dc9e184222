// A DeepSpeed JSON config as the job spec's training section (jobspec/job_spec.h, ParseDeepSpeedConfig): its
// fields, "auto", the `training:` entries beside it, its schedulers, errors that name DeepSpeed's fields, and
// the file read on a client's behalf.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "jobspec/job_spec.h"

namespace zerofit::jobspec {
namespace {

TEST(JobSpecTest, DeepSpeedNumbersAreRangeChecked) {
  const std::pair<std::string, std::string> cases[] = {
      {R"({"train_micro_batch_size_per_gpu": 4611686018427387904, "gradient_accumulation_steps": 4})",
       "ds.json: field 'train_micro_batch_size_per_gpu': expected an integer, got 4.61169e+18"},
      {R"({"train_micro_batch_size_per_gpu": 33554432, "gradient_accumulation_steps": 4})",
       "ds.json: field 'train_micro_batch_size_per_gpu': must be <= 16777216, got 33554432"},
      {R"({"train_micro_batch_size_per_gpu": 1e300, "gradient_accumulation_steps": 4})",
       "ds.json: field 'train_micro_batch_size_per_gpu': expected an integer, got 1e+300"},
      {R"({"train_micro_batch_size_per_gpu": 2.5})",
       "ds.json: field 'train_micro_batch_size_per_gpu': expected an integer, got 2.5"},
      {R"({"gradient_accumulation_steps": 0})",
       "ds.json: field 'gradient_accumulation_steps': must be >= 1, got 0"},
      {R"({"gradient_clipping": -1})", "ds.json: field 'gradient_clipping': must be >= 0, got -1"},
      {R"({"optimizer": {"params": {"weight_decay": -0.5}}})",
       "ds.json: field 'optimizer.params.weight_decay': must be >= 0, got -0.5"},
      {R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 1e30}}})",
       "ds.json: field 'scheduler.params.warmup_num_steps': expected an integer"},
      {R"({"zero_optimization": {"stage": 1e20}})",
       "ds.json: field 'zero_optimization.stage': expected an integer"},
      {"[" + std::string(1000, '[') + std::string(1001, ']'), "ds.json:1: JSON nested deeper than 64 levels"},
      // Found by deepspeed_fuzz: nlohmann's value() threw on a type other than the default's.
      {R"({"optimizer": {"type": 4}})", "ds.json: field 'optimizer.type': expected \"AdamW\""},
      {R"({"fp16": {"enabled": "yes"}})", "ds.json: field 'fp16.enabled': expected true, false or \"auto\""},
  };
  for (const auto& [json, expected] : cases) {
    absl::StatusOr<TrainingSpec> t = absl::UnknownError("not run");
    EXPECT_NO_THROW(t = ParseDeepSpeedConfig(json, "ds.json", 2)) << json;
    ASSERT_FALSE(t.ok()) << json;
    EXPECT_NE(t.status().message().find(expected), std::string::npos)
        << t.status() << "\nwanted: " << expected;
  }
}

TEST(JobSpecTest, ADeepSpeedConfigIsTheTrainingSection) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "zerofit_spec_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "ds.json") << R"({
    "train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4,
    "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": true}},
    "bf16": {"enabled": true}, "gradient_clipping": 0.5,
    "optimizer": {"type": "AdamW", "params": {"lr": 2e-5, "weight_decay": 0.01}}})";
  auto s = ParseJobSpec("task: dpo\nmodel: m\ndata: d\nworld_size: 8\ndeepspeed: ds.json\n", "job.yaml",
                        dir.string());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->training.global_batch, 64);
  EXPECT_EQ(*s->training.micro_batch, 2);
  EXPECT_EQ(*s->training.gradient_accumulation, 4);
  EXPECT_EQ(s->training.zero_stage, 2);
  EXPECT_TRUE(s->training.offload);
  EXPECT_TRUE(s->training.bf16);
  EXPECT_DOUBLE_EQ(s->training.lr, 2e-5);
  EXPECT_DOUBLE_EQ(s->training.max_grad_norm, 0.5);
  // DeepSpeed's own consistency rule, and its fields named in errors.
  auto bad = ParseDeepSpeedConfig(
      R"({"train_batch_size": 60, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4})",
      "ds.json", 8);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("ds.json: field 'train_batch_size'"), std::string::npos)
      << bad.status();
  bad = ParseDeepSpeedConfig(R"({"zero_optimization": {"stage": 3}})", "ds.json", 8);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("zero_optimization.stage"), std::string::npos);
  std::filesystem::remove_all(dir);
}

// Hugging Face's DeepSpeed configs say "auto" for what the TrainingArguments give (the field note's ZeRO-2
// config, seeds/003, as it is): "auto" reads as left out, the spec's `training:` gives those values, and a
// value set in both places is refused at its line, naming the DeepSpeed field.
TEST(JobSpecTest, DeepSpeedAutoValuesComeFromTheTrainingSection) {
  const std::string hf_zero2 =
      R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", )"
      R"("gradient_accumulation_steps": "auto", "gradient_clipping": "auto", )"
      R"("zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": true}}, )"
      R"("bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"}, )"
      R"("optimizer": {"type": "AdamW", "params": {"lr": "auto", "weight_decay": "auto"}}, )"
      R"("scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto", )"
      R"("warmup_num_steps": "auto", "warmup_type": "linear", "total_num_steps": "auto"}}})";
  auto alone = ParseDeepSpeedConfig(hf_zero2, "ds.json", 8);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_FALSE(alone->micro_batch.has_value()) << "left to the planner";
  EXPECT_FALSE(alone->gradient_accumulation.has_value());
  EXPECT_EQ(alone->zero_stage, 2);
  EXPECT_TRUE(alone->offload);
  const std::string head = absl::StrCat("task: sft\nmodel: m\ndata: d\nworld_size: 8\ndeepspeed: '", hf_zero2,
                                        "'\ntraining:\n  steps: 500\n");
  auto s = ParseJobSpec(absl::StrCat(head,
                                     "  global_batch: 64\n  lr: 2.0e-5\n  weight_decay: 0.01\n  bf16: true\n"
                                     "  warmup_steps: 50\n  max_grad_norm: 0.5\n"),
                        "job.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->training.global_batch, 64);
  EXPECT_FALSE(s->training.micro_batch.has_value());
  EXPECT_DOUBLE_EQ(s->training.lr, 2e-5);
  EXPECT_DOUBLE_EQ(s->training.weight_decay, 0.01);
  EXPECT_TRUE(s->training.bf16);
  EXPECT_EQ(s->training.warmup_steps, 50);
  EXPECT_DOUBLE_EQ(s->training.max_grad_norm, 0.5);
  EXPECT_EQ(s->training.lr_schedule, core::LrDecay::kLinear);
  EXPECT_EQ(s->training.decay_steps, 0) << "total_num_steps auto: the decay ends at the last step";
  // A value the config sets is not given again; the error names both places.
  auto twice = ParseJobSpec(absl::StrCat(head, "  zero_stage: 1\n"), "job.yaml");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("job.yaml:8: field 'training.zero_stage': set in the DeepSpeed "
                                          "config too ('zero_optimization.stage'): give it in one place"),
            std::string::npos)
      << twice.status();
  // Checks that need both: the cosine floor follows the training section's rate, and a warmup that the
  // training section asks for must be linear when the scheduler warms up logarithmically (DeepSpeed's
  // default).
  auto cosine = ParseJobSpec(
      "task: sft\nmodel: m\ndata: d\ndeepspeed: '{\"optimizer\": {\"params\": {\"lr\": \"auto\"}}, "
      "\"scheduler\": {\"type\": \"WarmupCosineLR\", \"params\": {\"total_num_steps\": \"auto\", "
      "\"warmup_num_steps\": 0, \"cos_min_ratio\": 0.1}}}'\ntraining: {steps: 100, lr: 3.0e-4}\n",
      "job.yaml");
  ASSERT_TRUE(cosine.ok()) << cosine.status();
  EXPECT_DOUBLE_EQ(cosine->training.min_lr, 3e-5);
  // Both the optimizer and a WarmupLR scheduler give a rate: the scheduler's is the one used, and named.
  auto two_rates = ParseJobSpec(
      "task: sft\nmodel: m\ndata: d\ndeepspeed: '{\"optimizer\": {\"params\": {\"lr\": 1.0e-4}}, "
      "\"scheduler\": "
      "{\"type\": \"WarmupLR\", \"params\": {\"warmup_max_lr\": 2.0e-5, \"warmup_num_steps\": 0}}}'\n"
      "training: {steps: 100, lr: 3.0e-4}\n",
      "job.yaml");
  ASSERT_FALSE(two_rates.ok());
  EXPECT_NE(
      two_rates.status().message().find("set in the DeepSpeed config too ('scheduler.params.warmup_max_lr')"),
      std::string::npos)
      << two_rates.status();
  auto log_warmup = ParseJobSpec(
      "task: sft\nmodel: m\ndata: d\ndeepspeed: '{\"scheduler\": {\"type\": \"WarmupLR\", \"params\": "
      "{\"warmup_num_steps\": \"auto\"}}}'\ntraining: {steps: 100, warmup_steps: 10}\n",
      "job.yaml");
  ASSERT_FALSE(log_warmup.ok());
  EXPECT_NE(
      log_warmup.status().message().find("deepspeed: field 'scheduler.params.warmup_type': zerofit warms "
                                         "up linearly"),
      std::string::npos)
      << log_warmup.status();
}

// The coordinator parses specs on a client's behalf: `deepspeed:` naming a FIFO used to block its thread in
// open(2) forever (one leaked thread per submit), a device to read it without end.
TEST(JobSpecTest, ADeepSpeedPathThatIsNoRegularFileIsRefusedAtOnce) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "zerofit_spec_fifo_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string fifo = (dir / "ds.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::ofstream(dir / "big.json") << std::string((1 << 20) + 1, ' ');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {fifo, "not a regular file (a FIFO)"},
      {"/dev/null", "not a regular file (a character device)"},
      {dir.string(), "not a regular file (a directory)"},
      {(dir / "big.json").string(), "1048577 bytes, more than the limit of 1048576 bytes"},
  };
  for (const auto& [path, why] : cases) {
    auto parse = std::async(std::launch::async, [path = path] {
      return ParseJobSpec(absl::StrCat("task: dpo\nmodel: m\ndata: d\ndeepspeed: ", path, "\n"), "job.yaml");
    });
    if (parse.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      // Release the reader blocked in open(2) so that the test ends, failed.
      const int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (writer >= 0) ::close(writer);
      ADD_FAILURE() << path << ": ParseJobSpec still blocked after 10 s";
    }
    auto s = parse.get();
    ASSERT_FALSE(s.ok()) << path;
    EXPECT_NE(s.status().message().find("job.yaml:4: field 'deepspeed': cannot read the DeepSpeed config: "),
              std::string::npos)
        << s.status();
    EXPECT_NE(s.status().message().find(absl::StrCat(path, ": ", why)), std::string::npos) << s.status();
  }
  std::filesystem::remove_all(dir);
}

// zerofit submit sends the DeepSpeed config's contents: the coordinator parses the same training section
// without opening a file (nor resolving a path against its own working directory).
TEST(JobSpecTest, ADeepSpeedConfigSentInlineParsesLikeTheFile) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "zerofit_spec_inline_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "ds.json") << R"({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2,
    "gradient_accumulation_steps": 4, "zero_optimization": {"stage": 2},
    "wall_clock_breakdown": false, "comment": "it's ours",
    "optimizer": {"type": "AdamW", "params": {"lr": 2e-5, "weight_decay": 0.01}}})";
  for (const std::string value : {"ds.json", "\"ds.json\"", "'ds.json'"}) {
    const std::string spec = absl::StrCat("task: dpo\nmodel: m\ndata: d\nworld_size: 8\ndeepspeed: ", value,
                                          "  # the config\ncheckpoint: {dir: /c}\n");
    auto from_file = ParseJobSpec(spec, "job.yaml", dir.string());
    ASSERT_TRUE(from_file.ok()) << from_file.status();
    auto inlined = InlineDeepSpeedConfig(spec, "job.yaml", dir.string());
    ASSERT_TRUE(inlined.ok()) << inlined.status();
    EXPECT_EQ(std::count(inlined->begin(), inlined->end(), '\n'), 6) << *inlined;
    EXPECT_NE(inlined->find("deepspeed: '{"), std::string::npos) << *inlined;
    EXPECT_NE(inlined->find("  # the config\ncheckpoint: {dir: /c}\n"), std::string::npos) << *inlined;
    auto sent = ParseJobSpec(*inlined, "job.yaml", "/nonexistent");
    ASSERT_TRUE(sent.ok()) << sent.status() << "\n" << *inlined;
    EXPECT_EQ(sent->training.global_batch, from_file->training.global_batch);
    EXPECT_EQ(*sent->training.gradient_accumulation, 4);
    EXPECT_DOUBLE_EQ(sent->training.lr, 2e-5);
    EXPECT_EQ(sent->checkpoint.dir, "/c");
    EXPECT_EQ(InlineDeepSpeedConfig(*inlined, "job.yaml", dir.string()).value(), *inlined) << "inlined twice";
  }
  // Errors in the inline config name the spec's line; a FIFO is refused by the CLI side at once.
  std::ofstream(dir / "bad.json") << R"({"train_batch_size": 60, "train_micro_batch_size_per_gpu": 2,
    "gradient_accumulation_steps": 4})";
  auto bad = InlineDeepSpeedConfig("task: dpo\nmodel: m\ndata: d\nworld_size: 8\ndeepspeed: bad.json\n",
                                   "job.yaml", dir.string());
  ASSERT_TRUE(bad.ok()) << bad.status();
  auto refused = ParseJobSpec(*bad, "job.yaml");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("job.yaml:5: deepspeed: field 'train_batch_size'"),
            std::string::npos)
      << refused.status();
  ASSERT_EQ(::mkfifo((dir / "ds.fifo").c_str(), 0600), 0);
  auto fifo =
      InlineDeepSpeedConfig("task: dpo\nmodel: m\ndata: d\ndeepspeed: ds.fifo\n", "job.yaml", dir.string());
  ASSERT_FALSE(fifo.ok());
  EXPECT_NE(fifo.status().message().find("job.yaml:4: field 'deepspeed': cannot read the DeepSpeed config: "),
            std::string::npos)
      << fifo.status();
  EXPECT_NE(fifo.status().message().find("ds.fifo: not a regular file (a FIFO)"), std::string::npos)
      << fifo.status();
  std::filesystem::remove_all(dir);
}

TEST(JobSpecTest, DeepSpeedSchedulersMapToTheSchedule) {
  auto cosine = ParseDeepSpeedConfig(
      R"({"optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
          "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 500, "warmup_num_steps": 50,
                        "warmup_type": "linear", "cos_min_ratio": 0.1}}})",
      "ds.json", 8);
  ASSERT_TRUE(cosine.ok()) << cosine.status();
  core::LrScheduleOptions o = LrScheduleOf(*cosine);
  EXPECT_EQ(o.decay, core::LrDecay::kCosine);
  EXPECT_FLOAT_EQ(o.peak_lr, 1e-4f);
  EXPECT_EQ(o.warmup_steps, 50);
  EXPECT_EQ(o.total_steps, 500);
  EXPECT_FLOAT_EQ(o.min_lr, 1e-5f);

  // WarmupDecayLR: its warmup_max_lr is the rate (DeepSpeed ignores the optimizer's), decaying linearly to 0.
  auto decay = ParseDeepSpeedConfig(
      R"({"optimizer": {"params": {"lr": 1e-4}},
          "scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": 300, "warmup_max_lr": 3e-5,
                        "warmup_num_steps": 10, "warmup_type": "linear"}}})",
      "ds.json", 8);
  ASSERT_TRUE(decay.ok()) << decay.status();
  o = LrScheduleOf(*decay);
  EXPECT_EQ(o.decay, core::LrDecay::kLinear);
  EXPECT_FLOAT_EQ(o.peak_lr, 3e-5f);
  EXPECT_EQ(o.total_steps, 300);
  EXPECT_FLOAT_EQ(o.min_lr, 0.0f);

  const std::pair<std::string, std::string> cases[] = {
      // DeepSpeed's default warmup is logarithmic: not silently replaced by a linear one.
      {R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 10}}})",
       "ds.json: field 'scheduler.params.warmup_type': zerofit warms up linearly"},
      {R"({"scheduler": {"type": "OneCycle"}})", "ds.json: field 'scheduler.type': expected WarmupLR"},
      {R"({"scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 0}}})",
       "ds.json: field 'scheduler.params.total_num_steps': required"},
      {R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 0, "warmup_min_lr": 1e-6}}})",
       "ds.json: field 'scheduler.params.warmup_min_lr': zerofit warms up from 0"},
  };
  for (const auto& [text, expected] : cases) {
    auto bad = ParseDeepSpeedConfig(text, "ds.json", 8);
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_NE(bad.status().message().find(expected), std::string::npos)
        << bad.status() << "\nwanted: " << expected;
  }
}

TEST(JobSpecTest, StepsCanAccompanyADeepSpeedConfig) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "zerofit_spec_steps_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "ds.json") << R"({"train_batch_size": 16, "optimizer": {"params": {"lr": 2e-5}}})";
  auto s = ParseJobSpec("task: dpo\nmodel: m\ndata: d\ndeepspeed: ds.json\ntraining:\n  steps: 40\n",
                        "job.yaml", dir.string());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->training.steps, 40);
  EXPECT_EQ(s->training.global_batch, 16);
  EXPECT_DOUBLE_EQ(s->training.lr, 2e-5);
  auto bad = ParseJobSpec("task: dpo\nmodel: m\ndata: d\ndeepspeed: ds.json\ntraining:\n  lr: 1.0e-3\n",
                          "job.yaml", dir.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("job.yaml:6: field 'training.lr': set in the DeepSpeed config"),
            std::string::npos)
      << bad.status();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace zerofit::jobspec
