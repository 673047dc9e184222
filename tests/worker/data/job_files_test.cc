// A job's input files (worker/data/job_files.h): which the workers read, under which field, and the check
// that names the field when one cannot be read.
#include "worker/data/job_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/worker/data/test_support.h"

namespace zerofit::data {
namespace {

using testing::ScopedTempDir;

std::vector<std::string> Listed(const jobspec::JobPlan& plan) {
  std::vector<std::string> out;
  for (const JobInput& in : JobInputsOf(plan)) out.push_back(in.field + " " + in.what + ": " + in.path);
  return out;
}

TEST(JobFilesTest, TheDirectoryFormReadsItsTwoFilesUnderTheFieldData) {
  jobspec::JobPlan plan;
  plan.task = "reward";
  plan.model = "m";
  plan.data.dir = "d";
  EXPECT_EQ(Listed(plan), (std::vector<std::string>{"model the model's config.json: m/config.json",
                                                    "data the training data: d/train_ids.jsonl",
                                                    "data the held-out data: d/test_ids.jsonl"}));
  plan.task = "grpo";
  plan.eval.data = "held.jsonl";  // replaces the directory's held-out file
  plan.grpo.rewards = {jobspec::RewardSpec{}, jobspec::RewardSpec{}};
  plan.grpo.rewards[1].type = "model";
  plan.grpo.rewards[1].path = "rm";
  EXPECT_EQ(Listed(plan),
            (std::vector<std::string>{"model the model's config.json: m/config.json",
                                      "data the training prompts: d/train_prompts_ids.jsonl",
                                      "eval.data the held-out prompts: held.jsonl",
                                      "rewards[1].path the reward model's config.json: rm/config.json"}));
}

TEST(JobFilesTest, TheFileFormNamesEachFileAndOnlyTheTokenizerItWasGiven) {
  jobspec::JobPlan plan;
  plan.task = "dpo";
  plan.model = "m";  // its tokenizer.json is used when present, so it is not required
  plan.init = "sft";
  plan.data.train = "t.jsonl";
  EXPECT_EQ(Listed(plan), (std::vector<std::string>{"model the model's config.json: m/config.json",
                                                    "init the initial weights: sft",
                                                    "data.train the training data: t.jsonl"}));
  plan.data.test = "h.jsonl";
  plan.data.tokenizer = "tok";
  EXPECT_EQ(Listed(plan),
            (std::vector<std::string>{
                "model the model's config.json: m/config.json", "init the initial weights: sft",
                "data.train the training data: t.jsonl", "data.tokenizer the tokenizer: tok/tokenizer.json",
                "data.test the held-out data: h.jsonl"}));
  // A replacing chat template is read too (a file, or a directory holding one).
  plan.data.chat_template = "chatml.jinja";
  plan.data.eos_token = "<|im_end|>";
  const std::vector<JobInput> inputs = JobInputsOf(plan);
  ASSERT_EQ(inputs.size(), 6u);
  EXPECT_EQ(inputs[4].field, "data.chat_template");
  EXPECT_EQ(inputs[4].path, "chatml.jinja");
  EXPECT_TRUE(inputs[4].directory_allowed);
  // The list and the trainer's DataSource agree on every data file.
  const DataSource s = DataSourceOf(plan);
  EXPECT_EQ(s.train, "t.jsonl");
  EXPECT_EQ(s.test, "h.jsonl");
  EXPECT_EQ(s.tokenizer_dir, "tok");
  EXPECT_EQ(s.tokenizer_overrides.chat_template, "chatml.jinja");
  EXPECT_EQ(s.tokenizer_overrides.eos_token, "<|im_end|>");
}

TEST(JobFilesTest, AFileThatCannotBeReadIsNamedWithItsField) {
  ScopedTempDir dir;
  const std::string there = dir.Write("train.jsonl", "{}\n");
  EXPECT_TRUE(CheckJobInput({"data.train", "the training data", there}).ok());

  const absl::Status missing = CheckJobInput({"data.train", "the training data", dir.File("nope.jsonl")});
  EXPECT_TRUE(absl::IsNotFound(missing)) << missing;
  EXPECT_EQ(missing.message(), "field 'data.train' (the training data): " + dir.File("nope.jsonl") +
                                   ": No such file or directory");

  const absl::Status directory = CheckJobInput({"data.train", "the training data", dir.path().string()});
  EXPECT_TRUE(absl::IsFailedPrecondition(directory)) << directory;
  EXPECT_NE(directory.message().find("a directory, not a file"), std::string::npos) << directory;
  // The initial weights may be a directory (model.safetensors or an index inside).
  EXPECT_TRUE(CheckJobInput({"init", "the initial weights", dir.path().string(), true}).ok());

  // A FIFO is not opened, so the check cannot block on it.
  const std::string fifo = dir.File("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_TRUE(CheckJobInput({"data.train", "the training data", fifo}).ok());

  if (::geteuid() != 0) {  // root reads everything
    ASSERT_EQ(::chmod(there.c_str(), 0), 0);
    const absl::Status denied = CheckJobInput({"data.train", "the training data", there});
    EXPECT_TRUE(absl::IsPermissionDenied(denied)) << denied;
  }
}

TEST(JobFilesTest, APlansFirstProblemIsReported) {
  ScopedTempDir dir;
  jobspec::JobPlan plan;
  plan.task = "reward";
  plan.model = dir.path().string();
  plan.data.dir = dir.path().string();
  absl::Status s = CheckJobFiles(plan, 0);
  EXPECT_NE(s.message().find("field 'model' (the model's config.json)"), std::string::npos) << s;
  dir.Write("config.json", "{}");
  s = CheckJobFiles(plan, 0);
  EXPECT_NE(s.message().find("field 'data' (the training data): " + dir.File("train_ids.jsonl")),
            std::string::npos)
      << s;
  dir.Write("train_ids.jsonl", "");
  s = CheckJobFiles(plan, 0);
  EXPECT_NE(s.message().find("field 'data' (the held-out data): " + dir.File("test_ids.jsonl")),
            std::string::npos)
      << s;
  dir.Write("test_ids.jsonl", "");
  EXPECT_TRUE(CheckJobFiles(plan, 0).ok()) << CheckJobFiles(plan, 0);

  // Outputs: the export and the metrics are rank 0's, the checkpoints every rank's.
  const std::string file = dir.Write("a-file", "");
  plan.export_dir = file + "/policy";
  s = CheckJobFiles(plan, 0);
  EXPECT_EQ(s.message(), "field 'export' (the exported model): " + file +
                             "/policy: cannot be created: " + file + " is not a directory");
  EXPECT_TRUE(CheckJobFiles(plan, 1).ok());
  plan.checkpoint.dir = file + "/ck";
  s = CheckJobFiles(plan, 1);
  EXPECT_NE(s.message().find("field 'checkpoint.dir' (the checkpoints)"), std::string::npos) << s;
}

TEST(JobFilesTest, AnOutputMustBeWritableWhereItIsOrWhereItWouldBeCreated) {
  ScopedTempDir dir;
  const std::string file = dir.Write("f", "");
  const auto check = [](const std::string& field, const std::string& path, bool directory) {
    return CheckJobOutput({field, "x", path, directory});
  };
  EXPECT_TRUE(check("export", dir.path().string(), true).ok());              // there
  EXPECT_TRUE(check("export", dir.File("a/b/c"), true).ok());                // created, parents too
  EXPECT_TRUE(check("metrics.jsonl", file, false).ok());                     // appended to
  EXPECT_TRUE(check("metrics.jsonl", dir.File("new/m.jsonl"), false).ok());  // created
  EXPECT_TRUE(check("export", "relative/out", true).ok());                   // under the working directory

  absl::Status s = check("export", file, true);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_EQ(s.message(), "field 'export' (x): " + file + ": not a directory");
  s = check("metrics.jsonl", dir.path().string(), false);
  EXPECT_EQ(s.message(), "field 'metrics.jsonl' (x): " + dir.path().string() + ": a directory, not a file");
  s = check("checkpoint.dir", file + "/x/y", true);
  EXPECT_EQ(s.message(), "field 'checkpoint.dir' (x): " + file + "/x/y: cannot be created: " + file +
                             " is not a directory");
  if (::geteuid() != 0) {  // root writes everywhere the file system allows
    const std::string locked = dir.File("locked");
    std::filesystem::create_directories(locked);
    ASSERT_EQ(::chmod(locked.c_str(), 0500), 0);
    s = check("export", locked + "/out", true);
    EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
    EXPECT_NE(s.message().find("cannot be created in " + locked), std::string::npos) << s;
    ASSERT_EQ(::chmod(locked.c_str(), 0700), 0);
  }
}

// Exporting into the model's directory would replace the weights and config.json that every later attempt
// of the job (a restart from step 0, a requeue) starts from.
TEST(JobFilesTest, TheExportMayNotReplaceAnInput) {
  ScopedTempDir dir;
  jobspec::JobPlan plan;
  plan.task = "grpo";
  plan.model = dir.File("base");
  plan.data.dir = dir.File("data");
  plan.export_dir = dir.File("out");
  EXPECT_TRUE(CheckExportKeepsInputs(plan).ok());

  plan.export_dir = dir.File("data/../base/");  // the same directory, spelled otherwise
  absl::Status s = CheckExportKeepsInputs(plan);
  EXPECT_EQ(s.message(), "field 'export': " + plan.export_dir +
                             " would replace the model's config.json (field "
                             "'model': " +
                             dir.File("base") + "/config.json); export to another directory");
  std::filesystem::create_directories(dir.File("base"));
  std::filesystem::create_directory_symlink(dir.File("base"), dir.File("link"));
  plan.export_dir = dir.File("link");  // through a link
  EXPECT_FALSE(CheckExportKeepsInputs(plan).ok());

  plan.export_dir = dir.File("out");
  plan.init = dir.File("out");  // the initial weights' directory
  s = CheckExportKeepsInputs(plan);
  EXPECT_NE(s.message().find("would replace the initial weights (field 'init'"), std::string::npos) << s;
  plan.init = dir.File("out/model.safetensors");  // or the file itself
  EXPECT_FALSE(CheckExportKeepsInputs(plan).ok());
  plan.init = "";

  plan.grpo.rewards = {jobspec::RewardSpec{}};
  plan.grpo.rewards[0].type = "model";
  plan.grpo.rewards[0].path = dir.File("out");  // a reward model exported by an earlier job
  s = CheckExportKeepsInputs(plan);
  EXPECT_NE(s.message().find("would replace the reward model's config.json (field 'rewards[0].path'"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace zerofit::data
