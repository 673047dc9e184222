#include "worker/data/job_inputs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace zerofit::data {
namespace {

namespace fs = std::filesystem;

std::string Inside(const std::string& dir, const char* file) { return (fs::path(dir) / file).string(); }

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

absl::Status CheckJobInputs(const jobspec::JobPlan& plan) {
  for (const JobInput& input : JobInputsOf(plan)) {
    if (absl::Status s = CheckJobInput(input); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace zerofit::data
