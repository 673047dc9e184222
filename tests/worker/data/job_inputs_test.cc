// A job's input files (worker/data/job_inputs.h): which the workers read, under which field, and the check
// that names the field when one cannot be read.
#include "worker/data/job_inputs.h"

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

TEST(JobInputsTest, TheDirectoryFormReadsItsTwoFilesUnderTheFieldData) {
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

TEST(JobInputsTest, TheFileFormNamesEachFileAndOnlyTheTokenizerItWasGiven) {
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
  // The list and the trainer's DataSource agree on every data file.
  const DataSource s = DataSourceOf(plan);
  EXPECT_EQ(s.train, "t.jsonl");
  EXPECT_EQ(s.test, "h.jsonl");
  EXPECT_EQ(s.tokenizer_dir, "tok");
}

TEST(JobInputsTest, AFileThatCannotBeReadIsNamedWithItsField) {
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

TEST(JobInputsTest, APlansFirstUnreadableInputIsReported) {
  ScopedTempDir dir;
  jobspec::JobPlan plan;
  plan.task = "reward";
  plan.model = dir.path().string();
  plan.data.dir = dir.path().string();
  absl::Status s = CheckJobInputs(plan);
  EXPECT_NE(s.message().find("field 'model' (the model's config.json)"), std::string::npos) << s;
  dir.Write("config.json", "{}");
  s = CheckJobInputs(plan);
  EXPECT_NE(s.message().find("field 'data' (the training data): " + dir.File("train_ids.jsonl")),
            std::string::npos)
      << s;
  dir.Write("train_ids.jsonl", "");
  s = CheckJobInputs(plan);
  EXPECT_NE(s.message().find("field 'data' (the held-out data): " + dir.File("test_ids.jsonl")),
            std::string::npos)
      << s;
  dir.Write("test_ids.jsonl", "");
  EXPECT_TRUE(CheckJobInputs(plan).ok()) << CheckJobInputs(plan);
}

}  // namespace
}  // namespace zerofit::data
