#include "worker/data/job_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <iterator>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace zerofit::data {
namespace {

namespace fs = std::filesystem;

std::string Inside(const std::string& dir, const char* file) { return (fs::path(dir) / file).string(); }

// One spelling per file: absolute, `.` and `..` and the links of its existing part resolved.
fs::path SamePath(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) p = fs::path(path).lexically_normal();
  return p.has_filename() ? p : p.parent_path();  // "out/" is "out"
}

// The data section's files: the directory form's under the field `data`, the file form's under their own.
void AddDataInputs(const jobspec::JobPlan& plan, std::vector<JobInput>* out) {
  const jobspec::DataSpec& d = plan.data;
  const DataSource s = DataSourceOf(plan);
  const bool grpo = plan.task == "grpo";
  const std::string train = grpo ? "the training prompts" : "the training data";
  const std::string test = grpo ? "the held-out prompts" : "the held-out data";
  if (!d.dir.empty()) {
    out->push_back({"data", train, s.train});
  } else {
    out->push_back({"data.train", train, s.train});
    if (!d.tokenizer.empty())
      out->push_back({"data.tokenizer", "the tokenizer", Inside(d.tokenizer, "tokenizer.json")});
    if (!d.chat_template.empty()) {
      out->push_back(
          {"data.chat_template", "the chat template", d.chat_template, /*directory_allowed=*/true});
    }
  }
  if (!plan.eval.data.empty()) {
    out->push_back({"eval.data", test, s.test});
  } else if (!s.test.empty()) {
    out->push_back({d.dir.empty() ? "data.test" : "data", test, s.test});
  }
}

}  // namespace

DataSource DataSourceOf(const jobspec::JobPlan& plan) {
  const jobspec::DataSpec& d = plan.data;
  DataSource s;
  if (!d.dir.empty() && plan.task == "grpo") {  // zerofit_make_arith_prefs's prompt files
    s.train = Inside(d.dir, "train_prompts_ids.jsonl");
    s.test = Inside(d.dir, "test_prompts_ids.jsonl");
  } else if (!d.dir.empty()) {
    s = DataSourceOfDirectory(d.dir);
  } else {
    s.train = d.train;
    s.test = d.test;
    s.tokenizer_dir = d.tokenizer.empty() ? TokenizerDirOf(plan.model) : d.tokenizer;
    s.max_prompt_length = d.max_prompt_length;
    s.tokenizer_overrides.eos_token = d.eos_token;
    s.tokenizer_overrides.chat_template = d.chat_template;
  }
  if (!plan.eval.data.empty()) s.test = plan.eval.data;
  return s;
}

std::vector<JobInput> JobInputsOf(const jobspec::JobPlan& plan) {
  std::vector<JobInput> out;
  out.push_back({"model", "the model's config.json", Inside(plan.model, "config.json")});
  if (!plan.init.empty())
    out.push_back({"init", "the initial weights", plan.init, /*directory_allowed=*/true});
  AddDataInputs(plan, &out);
  if (plan.task == "grpo") {
    for (size_t i = 0; i < plan.grpo.rewards.size(); ++i) {
      const jobspec::RewardSpec& r = plan.grpo.rewards[i];
      if (r.type != "model") continue;
      out.push_back({absl::StrCat("rewards[", i, "].path"), "the reward model's config.json",
                     Inside(r.path, "config.json")});
    }
  }
  return out;
}

absl::Status CheckJobInput(const JobInput& input) {
  const std::string prefix = absl::StrCat("field '", input.field, "' (", input.what, "): ", input.path);
  struct stat st {};
  if (::stat(input.path.c_str(), &st) != 0) return absl::ErrnoToStatus(errno, prefix);
  if (S_ISDIR(st.st_mode) && !input.directory_allowed) {
    return absl::FailedPreconditionError(absl::StrCat(prefix, ": a directory, not a file"));
  }
  if (::access(input.path.c_str(), R_OK) != 0) return absl::ErrnoToStatus(errno, prefix);
  return absl::OkStatus();
}

std::vector<JobOutput> JobOutputsOf(const jobspec::JobPlan& plan) {
  std::vector<JobOutput> out;
  if (!plan.checkpoint.dir.empty()) {
    out.push_back({"checkpoint.dir", "the checkpoints", plan.checkpoint.dir, true, /*every_rank=*/true});
  }
  if (!plan.export_dir.empty()) out.push_back({"export", "the exported model", plan.export_dir});
  if (!plan.metrics.jsonl.empty()) {
    out.push_back({"metrics.jsonl", "the metrics file", plan.metrics.jsonl, /*directory=*/false});
  }
  if (!plan.metrics.tensorboard.empty()) {
    out.push_back({"metrics.tensorboard", "the TensorBoard event files", plan.metrics.tensorboard});
  }
  return out;
}

absl::Status CheckJobOutput(const JobOutput& output) {
  const std::string prefix = absl::StrCat("field '", output.field, "' (", output.what, "): ", output.path);
  struct stat st {};
  if (::stat(output.path.c_str(), &st) == 0) {
    if (output.directory != S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat(prefix, output.directory ? ": not a directory" : ": a directory, not a file"));
    }
    const int mode = output.directory ? W_OK | X_OK : W_OK;
    if (::access(output.path.c_str(), mode) != 0) return absl::ErrnoToStatus(errno, prefix);
    return absl::OkStatus();
  }
  // Not there yet: created with its missing parents when first written, inside the nearest ancestor there.
  fs::path ancestor = fs::path(output.path).lexically_normal().parent_path();
  while (!ancestor.empty() && ::stat(ancestor.c_str(), &st) != 0 && ancestor != ancestor.root_path()) {
    ancestor = ancestor.parent_path();
  }
  if (ancestor.empty()) {
    ancestor = ".";
    if (::stat(".", &st) != 0) return absl::ErrnoToStatus(errno, absl::StrCat(prefix, ": ."));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(prefix, ": cannot be created: ", ancestor.string(), " is not a directory"));
  }
  if (::access(ancestor.c_str(), W_OK | X_OK) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat(prefix, ": cannot be created in ", ancestor.string()));
  }
  return absl::OkStatus();
}

absl::Status CheckExportKeepsInputs(const jobspec::JobPlan& plan) {
  if (plan.export_dir.empty()) return absl::OkStatus();
  const fs::path dir = SamePath(plan.export_dir);
  const fs::path written[] = {dir / "model.safetensors", dir / "config.json"};
  for (const JobInput& input : JobInputsOf(plan)) {
    const fs::path read = SamePath(input.path);
    const bool replaced = std::find(std::begin(written), std::end(written), read) != std::end(written) ||
                          (input.directory_allowed && read == dir);
    if (!replaced) continue;
    return absl::InvalidArgumentError(absl::StrCat("field 'export': ", plan.export_dir, " would replace ",
                                                   input.what, " (field '", input.field, "': ", input.path,
                                                   "); export to another directory"));
  }
  return absl::OkStatus();
}

absl::Status CheckJobFiles(const jobspec::JobPlan& plan, int rank, const JobFileError& report) {
  const auto failed = [&report](const absl::Status& s, const std::string& field, const std::string& path) {
    return report ? report(s, field, path) : s;
  };
  for (const JobInput& input : JobInputsOf(plan)) {
    if (absl::Status s = CheckJobInput(input); !s.ok()) return failed(s, input.field, input.path);
  }
  if (absl::Status s = CheckExportKeepsInputs(plan); !s.ok()) return failed(s, "export", "");
  for (const JobOutput& output : JobOutputsOf(plan)) {
    if (!output.every_rank && rank != 0) continue;
    if (absl::Status s = CheckJobOutput(output); !s.ok()) return failed(s, output.field, output.path);
  }
  return absl::OkStatus();
}

}  // namespace zerofit::data
