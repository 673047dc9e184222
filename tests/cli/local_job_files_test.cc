// `zerofit run`'s check of a job's input files before it starts anything (cli/local_job_files.h): the first
// file its workers could not read, at the spec's line, with the directory a relative path is taken from.
#include "cli/local_job_files.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace zerofit::cli {
namespace {

void Touch(const std::string& path) { std::ofstream(path) << "{}\n"; }

absl::Status Check(const std::string& text) {
  absl::StatusOr<jobspec::JobSpec> spec = jobspec::ParseJobSpec(text, "job.yaml");
  if (!spec.ok()) return spec.status();
  return CheckLocalJobFiles(*spec, text, "job.yaml");
}

TEST(LocalJobFilesTest, TheFirstMissingInputIsRefusedAtItsLine) {
  test_support::TempDir dir;
  const std::string model = dir.file("model");
  std::filesystem::create_directories(model);
  const std::string head = absl::StrCat("name: x\ntask: dpo\nmodel: ", model, "\n");
  const std::string tail =
      absl::StrCat("data:\n  train: ", dir.file("train.jsonl"), "\n  test: ", dir.file("test.jsonl"),
                   "\neval: {data: ", dir.file("eval.jsonl"), "}\n");
  const std::string text = head + tail;
  absl::Status s = Check(text);
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_EQ(s.message(), absl::StrCat("job.yaml:3: field 'model' (the model's config.json): ", model,
                                      "/config.json: No such file or directory"));
  Touch(model + "/config.json");
  s = Check(text);
  EXPECT_EQ(s.message(), absl::StrCat("job.yaml:5: field 'data.train' (the training data): ",
                                      dir.file("train.jsonl"), ": No such file or directory"));
  Touch(dir.file("train.jsonl"));
  s = Check(text);  // eval.data replaces data.test: the file the workers would read
  EXPECT_EQ(s.message(), absl::StrCat("job.yaml:7: field 'eval.data' (the held-out data): ",
                                      dir.file("eval.jsonl"), ": No such file or directory"));
  Touch(dir.file("eval.jsonl"));
  EXPECT_TRUE(Check(text).ok()) << Check(text);

  // `init` may be a directory; one that is not there is refused at its line.
  s = Check(absl::StrCat(head, "init: ", dir.file("sft"), "\n", tail));
  EXPECT_EQ(s.message(), absl::StrCat("job.yaml:4: field 'init' (the initial weights): ", dir.file("sft"),
                                      ": No such file or directory"));
  EXPECT_TRUE(Check(absl::StrCat(head, "init: ", model, "\n", tail)).ok());
}

TEST(LocalJobFilesTest, AnExportThatCouldNotBeWrittenOrWouldReplaceTheModelIsRefusedAtItsLine) {
  test_support::TempDir dir;
  const std::string model = dir.file("model");
  std::filesystem::create_directories(model);
  Touch(model + "/config.json");
  Touch(dir.file("train.jsonl"));
  const std::string head =
      absl::StrCat("task: sft\nmodel: ", model, "\ndata: {train: ", dir.file("train.jsonl"), "}\n");
  EXPECT_TRUE(Check(head + "export: " + dir.file("out/policy") + "\n").ok());
  absl::Status s = Check(absl::StrCat(head, "export: ", model, "/\n"));
  EXPECT_EQ(s.message(), absl::StrCat("job.yaml:4: field 'export': ", model,
                                      "/ would replace the model's config.json "
                                      "(field 'model': ",
                                      model, "/config.json); export to another directory"));
  s = Check(absl::StrCat(head, "checkpoint: {every: 5, dir: ", dir.file("train.jsonl"), "/ck}\n"));
  EXPECT_EQ(s.message(),
            absl::StrCat("job.yaml:4: field 'checkpoint.dir' (the checkpoints): ", dir.file("train.jsonl"),
                         "/ck: cannot be created: ", dir.file("train.jsonl"), " is not a directory"));
  s = Check(absl::StrCat(head, "metrics:\n  jsonl: ", dir.path(), "\n"));
  EXPECT_EQ(s.message(), absl::StrCat("job.yaml:5: field 'metrics.jsonl' (the metrics file): ", dir.path(),
                                      ": a directory, not a file"));
}

TEST(LocalJobFilesTest, ARelativePathSaysWhereTheWorkersStart) {
  const std::string text = "name: x\ntask: reward\nmodel: no/such/model\ndata: d\n";
  const absl::Status s = Check(text);
  EXPECT_EQ(s.message(),
            absl::StrCat("job.yaml:3: field 'model' (the model's config.json): no/such/model/config.json: No "
                         "such file or directory (relative to ",
                         std::filesystem::current_path().string(), ", where the workers start)"));
}

TEST(LocalJobFilesTest, GrpoRewardModelsAreInputsToo) {
  test_support::TempDir dir;
  std::filesystem::create_directories(dir.file("m"));
  Touch(dir.file("m/config.json"));
  Touch(dir.file("train_prompts_ids.jsonl"));
  Touch(dir.file("test_prompts_ids.jsonl"));
  const std::string text = absl::StrCat("task: grpo\nmodel: ", dir.file("m"), "\ndata: ", dir.path(),
                                        "\ntraining: {max_length: 64}\nrollout: {max_new_tokens: "
                                        "8}\nrewards:\n  - {type: answer}\n  - type: model\n    path: ",
                                        dir.file("rm"), "\n");
  const absl::Status s = Check(text);
  EXPECT_EQ(s.message(),
            absl::StrCat("job.yaml:9: field 'rewards[1].path' (the reward model's config.json): ",
                         dir.file("rm"), "/config.json: No such file or directory"));
}

}  // namespace
}  // namespace zerofit::cli
