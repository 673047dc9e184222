#include "cli/local_inputs.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "worker/data/job_inputs.h"

namespace zerofit::cli {
namespace {

// The spec's fields that name the workers' inputs, in a plan (the coordinator makes the real one at submit,
// with the same fields copied).
jobspec::JobPlan InputFieldsOf(const jobspec::JobSpec& spec) {
  jobspec::JobPlan p;
  p.task = spec.task;
  p.model = spec.model;
  p.init = spec.init;
  p.data = spec.data;
  p.eval = spec.eval;
  p.grpo = spec.grpo;
  return p;
}

std::string RelativeTo(const std::string& path) {
  if (std::filesystem::path(path).is_absolute()) return "";
  std::error_code ec;
  const std::filesystem::path cwd = std::filesystem::current_path(ec);
  return ec ? "" : absl::StrCat(" (relative to ", cwd.string(), ", where the workers start)");
}

}  // namespace

absl::Status CheckLocalInputs(const jobspec::JobSpec& spec, const std::string& yaml_text,
                              const std::string& source) {
  for (const data::JobInput& input : data::JobInputsOf(InputFieldsOf(spec))) {
    const absl::Status s = data::CheckJobInput(input);
    if (s.ok()) continue;
    const int line = jobspec::FieldLine(yaml_text, input.field);
    return absl::Status(s.code(), absl::StrCat(source, line > 0 ? absl::StrCat(":", line) : "", ": ",
                                               s.message(), RelativeTo(input.path)));
  }
  return absl::OkStatus();
}

}  // namespace zerofit::cli
